package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policy"
)

// nginx without nodelay: configured from a declared delay (burst=K−1+Q'
// delay=K−1) it admits K at once and holds Q' = min(Q, ⌊D·r⌋) more up to
// Q'/r; with none declared (burst=K−1) it paces every request past the
// first, a bucket of one with K−1 waiting up to (K−1)/r. With nodelay, and
// HAProxy, a request is refused at once.
func TestHonestDelays(t *testing.T) {
	plain := policy.Default() // free 10 at 5/s, paid 100 at 50/s
	delayed := plain.Clone()
	delayed.Delay = &policy.Delay{MaxWait: policy.Duration(600 * time.Millisecond), Queue: 50}
	require.NoError(t, delayed.Validate())
	unbounded := plain.Clone() // no queue declared: max_wait bounds it
	unbounded.Delay = &policy.Delay{MaxWait: policy.Duration(600 * time.Millisecond)}
	require.NoError(t, unbounded.Validate())
	for _, tc := range []struct {
		name      string
		g         catalog.Gateway
		declared  *policy.Policy
		freeWait  time.Duration // 0: no delay in the honest policy
		freeQueue int
		freeK     int64 // the honest free tier's capacity
		deviation string
	}{
		{"nginx delay, none declared", catalog.Gateway{Kind: catalog.NGINX, Mode: "delay"}, plain, 1800 * time.Millisecond, 9, 1, "is refused at once"},
		{"nginx delay, none declared: paced", catalog.Gateway{Kind: catalog.NGINX, Mode: "delay"}, plain, 1800 * time.Millisecond, 9, 1, "a bucket of one with K−1 waiting"},
		{"nginx delay, a longer queue declared", catalog.Gateway{Kind: catalog.NGINX, Mode: "delay"}, delayed, 600 * time.Millisecond, 3, 10, "tier free delays as declared"},
		{"nginx delay, as declared", catalog.Gateway{Kind: catalog.NGINX, Mode: "delay"}, unbounded, 600 * time.Millisecond, 3, 10, ""},
		{"nginx nodelay, delay declared", catalog.Gateway{Kind: catalog.NGINX, Mode: "nodelay"}, delayed, 0, 0, 10, "a request for which no token is free waits for it"},
		{"haproxy, delay declared", catalog.Gateway{Kind: catalog.HAProxy}, delayed, 0, 0, 10, "a request for which no token is free waits for it"},
		{"nginx nodelay, none declared", catalog.Gateway{Kind: catalog.NGINX, Mode: "nodelay"}, plain, 0, 0, 10, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, devs, err := Honest(tc.g, tc.declared)
			require.NoError(t, err)
			free, ok := h.Tier("free")
			require.True(t, ok)
			assert.Equal(t, tc.freeK, free.Limits[0].Capacity)
			d := h.DelayFor(free)
			if tc.freeWait == 0 {
				assert.Nil(t, d)
			} else {
				require.NotNil(t, d)
				assert.Equal(t, tc.freeWait, d.MaxWait.D())
				assert.Equal(t, tc.freeQueue, d.Queue)
			}
			found := false
			for _, dv := range devs {
				if tc.deviation != "" && (contains(dv.Promise, tc.deviation) || contains(dv.Reality, tc.deviation)) {
					found = true
				}
				if tc.deviation == "" {
					assert.NotContains(t, dv.Promise, "delay")
				}
			}
			if tc.deviation != "" {
				assert.True(t, found, "%v", devs)
			}
		})
	}
}

func contains(s, sub string) bool { return sub != "" && strings.Contains(s, sub) }
