package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/internal/testsvc"
)

// TestPrecisionCalibratesEveryTier: the precision plan calibrates every
// declared tier, each at its own rate (testsvc orders: free 5 at 2.5/s,
// paid 20 at 12.5/s, neither 1/s). The honest service passes; one whose
// paid tier refills 100× slower than declared (0.125/s) is measured on
// the paid tier, where the default tier alone would have passed. A paid
// tier declared at 37.5/s (a token every 26.7ms, finer than one probe's
// timing) is probed densely: as declared it passes, a third slower or
// faster it fails calibration, on the paid key only.
func TestPrecisionCalibratesEveryTier(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: two calibrations per run")
	}
	pol, err := testsvc.PolicyYAML("orders")
	require.NoError(t, err)
	polFile := writeFile(t, "orders.yaml", string(pol))
	fast := strings.Replace(string(pol), "rate: 12.5/s", "rate: 37.5/s", 1)
	require.NotEqual(t, string(pol), fast)
	fastFile := writeFile(t, "orders-fast.yaml", fast)
	for _, tc := range []struct {
		name     string
		policy   string
		paidRate float64
		want     string
	}{
		{"as declared", polFile, 12.5, "pass"},
		{"paid 100x slower", polFile, 0.125, "fail"},
		{"fast paid tier as declared", fastFile, 37.5, "pass"},
		{"fast paid tier a third slower", fastFile, 25, "fail"},
		{"fast paid tier a third faster", fastFile, 50, "fail"},
	} {
		polFile := tc.policy
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tiers := testsvc.DefaultOrdersTiers()
			tiers["paid"] = testsvc.Bucket{Capacity: 20, Rate: tc.paidRate}
			o, err := testsvc.NewOrders(testsvc.OrdersConfig{Keys: testsvc.DefaultOrdersKeys(), Tiers: tiers})
			require.NoError(t, err)
			url, stop := testsvc.Serve(o)
			defer stop()
			out, stderr, code := rl(t, "attack", "--plan", "precision", "--target", url+"/v1/orders", "--policy", polFile,
				"--method", "POST", "--header", "Content-Type: application/json", "--body", `{"sku": "sku-{i}"}`,
				"--keys", filepath.Join("..", "..", "internal", "testsvc", "policies", "orders-keys.yaml"),
				"--out", t.TempDir(), "--quiet", "--fail-on", "none", "--format", "json")
			require.Equal(t, ExitPass, code, "stderr:\n%s", stderr)
			d := decodeDoc(t, out)
			v, sum := checkOf(t, out, "calibration")
			require.Equal(t, tc.want, v, "%s\n%v", sum, verdicts(d))
			if tc.want == "pass" {
				require.Contains(t, sum, "measured in 2 calibrate phases match the declared policy")
			}
			phases := map[string]bool{}
			for _, ph := range d.Phases {
				phases[ph.Name] = true
			}
			require.True(t, phases["calibrate-free"] && phases["calibrate-paid"], "%v", phases)
			if tc.want == "fail" {
				for _, c := range d.Checks {
					if c.Name == "calibration" {
						require.NotEmpty(t, c.Evidence)
						refill := false
						for _, e := range c.Evidence {
							require.Contains(t, e.Key, "pd_", "only the paid tier's key is measured wrong: %s", e.Message)
							refill = refill || strings.Contains(e.Message, "the refill is")
						}
						require.True(t, refill, "the paid tier's refill is measured wrong: %v", c.Evidence)
					}
				}
			}
		})
	}
}
