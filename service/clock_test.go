package service

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policy"
)

// A clock-skew fault steps the instance's wall clock (its Date header) and
// not the steady clock its limiters decide at.
func TestClockStepMovesTheWallClockOnly(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name         string
		skew, shift  time.Duration
		wall, steady time.Duration
	}{
		{"no skew", 0, 0, 0, 0},
		{"configured skew", 2 * time.Second, 0, 2 * time.Second, 2 * time.Second},
		{"stepped forward", 0, 3 * time.Second, 3 * time.Second, 0},
		{"stepped back on a skewed instance", time.Second, -3 * time.Second, -2 * time.Second, time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := NewSkewClock(func() time.Time { return t0 }, c.skew)
			clk.Shift(c.shift)
			assert.Equal(t, t0.Add(c.wall), clk.Now())
			assert.Equal(t, t0.Add(c.steady), clk.Steady())
		})
	}
	real := NewSkewClock(nil, 0)
	real.Shift(time.Hour)
	assert.WithinDuration(t, time.Now(), real.Steady(), time.Minute, "the real steady clock ignores the step")
}

func TestInstanceSaysItsWallClockAndChangesLimits(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	pol := policy.Default()
	entry, err := catalog.Lookup("token-bucket", "")
	require.NoError(t, err)
	in, err := NewInstance(pol, entry, InstanceOptions{Now: func() time.Time { return t0 }})
	require.NoError(t, err)
	in.Clock.Shift(5 * time.Second)
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set("X-API-Key", "free-a")
	w := httptest.NewRecorder()
	in.Service.ServeHTTP(w, req)
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, t0.Add(5*time.Second).Format(http.TimeFormat), w.Header().Get("Date"))

	admits := func(key string) int {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("X-API-Key", key)
		n := 0
		for n < 100 {
			w := httptest.NewRecorder()
			in.Service.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				break
			}
			n++
		}
		return n
	}
	require.Equal(t, 10, admits("free-drained"))
	lowered := []policy.Limit{pol.Tiers[0].Limits[0]}
	lowered[0].Capacity, lowered[0].Count = 5, 5
	require.NoError(t, in.Service.ChangeLimits("free", lowered))
	assert.Equal(t, 5, admits("free-a"), "9 left, capped at the new capacity")
	assert.Zero(t, admits("free-drained"), "a drained key stays drained across the change")
	require.ErrorContains(t, in.Service.ChangeLimits("gold", lowered), `no tier "gold"`)
}
