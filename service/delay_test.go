package service

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/policy"
)

// The delaying path at fixed instants: a burst of 10 on K=5, r=5/s with
// max_wait 600ms gets five at once, three 200ms apart and two refusals
// (their 800ms would pass max_wait); a queue of 2 refuses the third waiter.
func TestDelayerReserve(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	limits := []policy.Limit{{Algorithm: policy.TokenBucket, Capacity: 5, Rate: 5}}
	ms := time.Millisecond
	for _, tc := range []struct {
		name  string
		queue int
		want  []time.Duration // −1: refused
	}{
		{"no queue bound", 0, []time.Duration{0, 0, 0, 0, 0, 200 * ms, 400 * ms, 600 * ms, -1, -1}},
		{"queue of 2", 2, []time.Duration{0, 0, 0, 0, 0, 200 * ms, 400 * ms, -1, -1, -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var dl delayer
			d := &policy.Delay{MaxWait: policy.Duration(600 * ms), Queue: tc.queue}
			for i, want := range tc.want {
				wait, ok := dl.reserve(t0, "k", limits, d)
				if want < 0 {
					assert.False(t, ok, "request %d", i)
					continue
				}
				require.True(t, ok, "request %d", i)
				assert.Equal(t, want, wait, "request %d", i)
			}
		})
	}
}

// A request that read the clock before another took the lock must not
// make the bucket count the time between them twice.
func TestDelayerTimeNeverGoesBack(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	limits := []policy.Limit{{Algorithm: policy.TokenBucket, Capacity: 1, Rate: 1}}
	d := &policy.Delay{MaxWait: policy.Duration(10 * time.Millisecond)}
	var dl delayer
	_, ok := dl.reserve(t0.Add(time.Second), "k", limits, d)
	require.True(t, ok)
	_, ok = dl.reserve(t0, "k", limits, d) // late with an older instant: no token
	require.False(t, ok)
	_, ok = dl.reserve(t0.Add(1500*time.Millisecond), "k", limits, d)
	assert.False(t, ok, "half a second after the first admission no token is due")
}
