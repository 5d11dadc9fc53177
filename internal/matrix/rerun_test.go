package matrix

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/envs/gateway"
	"github.com/rlverify/rlverify/limiters/catalog"
)

// quickPlans are the plans the rerun test runs by default: the three that
// take under half a minute together for all ten implementations. Set
// RLVERIFY_MATRIX_PLANS=all (about 7 minutes) or a comma-separated list.
var quickPlans = []string{"concurrent-burst", "bypass", "boundary-burst"}

// The committed matrix is what the code produces: each plan is run again
// over every implementation and its stable cells must come out as
// committed. A cell that differs gets one more run of its plan (a loaded
// runner delays a request now and then); it fails when it differs twice.
func TestCommittedMatrixIsWhatTheCodeProduces(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every implementation; not in -short")
	}
	for _, prog := range []string{"nginx", "haproxy"} {
		if _, err := exec.LookPath(prog); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is missing in CI: scripts/install.sh --test installs it", prog)
			}
			t.Skipf("%s is not installed (bash scripts/install.sh --test)", prog)
		}
	}
	if err := gateway.Available(catalog.EnvoyRateLimit); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("envoyproxy/ratelimit is missing in CI (scripts/install.sh --test builds it): %v", err)
		}
		t.Skipf("%v", err)
	}
	d, err := Load(filepath.Join(root(t), "docs", "compare", "matrix.json"))
	require.NoError(t, err)
	committed := map[string]Table{}
	for _, tb := range d.Tables {
		committed[tb.Plan] = tb
	}
	plans := quickPlans
	switch v := os.Getenv("RLVERIFY_MATRIX_PLANS"); v {
	case "":
	case "all":
		plans = nil
		for _, p := range Plans {
			plans = append(plans, p.Name)
		}
	default:
		plans = strings.Split(v, ",")
	}
	bin := filepath.Join(t.TempDir(), "rlverify")
	build := exec.Command("go", "build", "-tags", "gubernator", "-o", bin, "./cmd/rlverify") // the matrix has gubernator columns
	build.Dir = root(t)
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	for _, plan := range plans {
		want, ok := committed[plan]
		require.True(t, ok, "plan %s is not in docs/compare/matrix.json", plan)
		var diffs []string
		for try := 0; try < 2; try++ {
			var stderr bytes.Buffer
			got, err := Run(bin, plan, filepath.Join(t.TempDir(), plan), &stderr)
			require.NoError(t, err, "%s", stderr.String())
			if diffs = want.Differences(got); len(diffs) == 0 {
				break
			}
			t.Logf("%s, run %d: %s", plan, try+1, strings.Join(diffs, "; "))
		}
		require.Empty(t, diffs, "stable cells of %s changed twice: regenerate with bash scripts/compare-matrix.sh (and explain new cells in internal/matrix/explain.go)", plan)
	}
}
