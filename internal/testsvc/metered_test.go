package testsvc

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/policy"
)

// TestMeteredHonestPolicy: the metered service's honest policy parses and
// declares what the service does: K, r (0 for a one-off quota), the cost
// header and its range with peeks.
func TestMeteredHonestPolicy(t *testing.T) {
	for _, cfg := range []MeteredConfig{{}, {Burst: 3, Rate: 1.5}, {OneOff: true, Burst: 5}} {
		p, err := policy.Parse("metered.yaml", MeteredPolicyYAML(cfg))
		require.NoError(t, err)
		require.NotNil(t, p.Cost)
		require.Equal(t, MeteredUnitsHeader, p.Cost.Name)
		require.True(t, p.Cost.Peeks())
		require.Equal(t, int64(MaxMeteredUnits), p.Cost.Max)
		require.Equal(t, MeteredKeyHeader, p.Identity.Name)
		l := p.Tiers[0].Limits[0]
		if cfg.OneOff {
			require.True(t, l.NeverRefills())
			require.Equal(t, int64(cfg.Burst), l.Count)
			continue
		}
		want := int64(cfg.Burst)
		if want == 0 {
			want = DefaultMeteredBurst
		}
		require.Equal(t, want, l.Capacity)
	}
}

// TestMeteredCharges steps the service on a fixed clock: cost K on a full
// bucket, peeks, K+1, and each defect's difference.
func TestMeteredCharges(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	send := func(h http.Handler, units string) int {
		r := httptest.NewRequest(http.MethodGet, "/x", nil)
		r.Header.Set(MeteredKeyHeader, "a")
		if units != "" {
			r.Header.Set(MeteredUnitsHeader, units)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	k := strconv.Itoa(DefaultMeteredBurst)
	for _, tc := range []struct {
		name  string
		cfg   MeteredConfig
		steps []string
		want  []int
	}{
		{"honest", MeteredConfig{}, []string{"0", k, "0", k, "1"}, []int{200, 200, 200, 429, 429}},
		{"over K", MeteredConfig{}, []string{strconv.Itoa(DefaultMeteredBurst + 1), k}, []int{429, 200}},
		{"bad units", MeteredConfig{}, []string{"x", "-1", "33"}, []int{400, 400, 400}},
		{"ignores cost", MeteredConfig{IgnoreCost: true}, []string{k, k}, []int{200, 200}},
		{"charges peeks", MeteredConfig{ChargePeeks: true}, []string{"0", k}, []int{200, 429}},
		{"one-off", MeteredConfig{OneOff: true, Burst: 2}, []string{"1", "1", "1"}, []int{200, 200, 429}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Now = func() time.Time { return t0 }
			h := NewMetered(cfg)
			for i, u := range tc.steps {
				require.Equal(t, tc.want[i], send(h, u), "step %d (units %q)", i, u)
			}
		})
	}
}
