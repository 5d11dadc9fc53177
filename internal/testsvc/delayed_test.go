package testsvc

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/policy"
)

// The delayed service's slots at fixed instants: a burst of 10 at t0 on
// K=5, r=5/s, max wait 600ms gets five at once, three 200ms apart, and
// two refusals whose wait (800ms, 800ms) would pass max wait.
func TestDelayedReserve(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	for _, tc := range []struct {
		name  string
		fault DelayedFault
		queue int
		want  []time.Duration // −1: refused
	}{
		{"honest", "", 0, []time.Duration{0, 0, 0, 0, 0, 200 * time.Millisecond, 400 * time.Millisecond, 600 * time.Millisecond, -1, -1}},
		{"queue of 2", "", 2, []time.Duration{0, 0, 0, 0, 0, 200 * time.Millisecond, 400 * time.Millisecond, -1, -1, -1}},
		{"no-delay", DelayedNoDelay, 0, []time.Duration{0, 0, 0, 0, 0, -1, -1, -1, -1, -1}},
		{"capacity+2", DelayedCapacityPlus2, 0, []time.Duration{0, 0, 0, 0, 0, 0, 0, 200 * time.Millisecond, 400 * time.Millisecond, 600 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := NewDelayed(DelayedConfig{Fault: tc.fault, Queue: tc.queue, Now: func() time.Time { return t0 }})
			require.NoError(t, err)
			for i, want := range tc.want {
				wait, ok := d.reserve("k")
				if want < 0 {
					assert.False(t, ok, "request %d", i)
					continue
				}
				assert.True(t, ok, "request %d", i)
				assert.Equal(t, want, wait, "request %d", i)
			}
		})
	}
}

func TestDelayedRoutes(t *testing.T) {
	d, err := NewDelayed(DelayedConfig{})
	require.NoError(t, err)
	for _, tc := range []struct {
		method, path, key string
		want              int
	}{
		{http.MethodPost, DelayedPath, "a", http.StatusAccepted},
		{http.MethodGet, DelayedPath, "a", http.StatusMethodNotAllowed},
		{http.MethodPost, "/other", "a", http.StatusNotFound},
		{http.MethodPost, DelayedPath, "", http.StatusUnauthorized},
	} {
		r := httptest.NewRequest(tc.method, tc.path, nil)
		if tc.key != "" {
			r.Header.Set(DelayedHeader, tc.key)
		}
		w := httptest.NewRecorder()
		d.ServeHTTP(w, r)
		assert.Equal(t, tc.want, w.Code, "%s %s", tc.method, tc.path)
	}
	_, err = NewDelayed(DelayedConfig{Fault: "bogus"})
	require.Error(t, err)
}

func TestDelayedHonestPolicy(t *testing.T) {
	p, err := policy.Load(filepath.Join("policies", "delayed.yaml"))
	require.NoError(t, err)
	l := p.Tiers[0].Limits[0]
	assert.Equal(t, int64(DefaultDelayedCapacity), l.Capacity)
	assert.InDelta(t, DefaultDelayedRate, l.R(), 1e-12)
	d := p.DelayFor(&p.Tiers[0])
	require.NotNil(t, d)
	assert.Equal(t, DefaultDelayedMaxWait, d.MaxWait.D())
	assert.Equal(t, DefaultDelayedQueue, d.Queue)
	assert.Equal(t, DelayedHeader, p.Identity.Name)
	assert.Equal(t, "202", p.Statuses.Admitted.String())
}
