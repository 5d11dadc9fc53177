package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/reports"
)

// stabilityRuns is how often each case of TestStabilityOfTheDefaults runs
// and diagnosisRuns how often each row of TestStabilityOfTheDiagnosis
// repeats: 6 and 3 in CI, where the whole matrix also runs once
// (TestMutationMatrix) and CI time is bounded (30 minutes);
// RLVERIFY_STABILITY_RUNS=10 runs both ten times, the count issues 16 and
// 17 asked for (taken so in the series docs/reliability.md records, and
// with rlverify selftest ×10).
func stabilityRuns() int { return stabilityCount(6) }

func diagnosisRuns() int { return stabilityCount(3) }

func stabilityCount(ci int) int {
	if n, err := strconv.Atoi(os.Getenv("RLVERIFY_STABILITY_RUNS")); err == nil && n > 0 {
		return n
	}
	return ci
}

// cpuHog keeps one core busy in another process for the rest of the test,
// as a neighbour on a shared CI runner does.
func cpuHog(t *testing.T) {
	t.Helper()
	cmd := exec.Command("sh", "-c", "while :; do :; done")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
}

// The shipped defaults give a correct limiter the same verdict, PASS, every
// time, with a CPU hog beside them (issue 17, item 13).
func TestStabilityOfTheDefaults(t *testing.T) {
	if testing.Short() {
		t.Skip("real attacks with a CPU hog (about a minute)")
	}
	cpuHog(t)
	for _, args := range [][]string{
		{"--plan", "concurrent-burst", "--store", "redis", "--instances", "3"},
		{"--plan", "store-outage", "--policy", "fail-closed"},
		{"--plan", "clock-skew"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var bad []string
			for i := range stabilityRuns() {
				dir := t.TempDir()
				out, stderr, code := rl(t, append([]string{"attack", "--out", dir, "--quiet", "--format", "json"}, args...)...)
				if code != ExitPass {
					bad = append(bad, fmt.Sprintf("run %d: exit %d: %s", i+1, code, lastLine(stderr)))
					continue
				}
				d := decodeDoc(t, out)
				if d.Verdict != "pass" {
					bad = append(bad, fmt.Sprintf("run %d: %s: %s (history %s)", i+1, d.Verdict, notPassing(d), filepath.Join(dir, "latest")))
				}
			}
			require.Empty(t, bad, "%d of %d runs did not PASS", len(bad), stabilityRuns())
		})
	}
}

// A handful of diagnosis-matrix rows give the same diagnosis every time
// with a CPU hog beside them: no false alarm on the correct limiter, the
// exact root and explained set on the faulty one (issue 16).
func TestStabilityOfTheDiagnosis(t *testing.T) {
	if testing.Short() {
		t.Skip("real attacks with a CPU hog (about a minute)")
	}
	cpuHog(t)
	for _, pick := range []struct{ plan, bad string }{
		{"concurrent-burst", "faulty/racy-token-bucket"},
		{"tenant-isolation", "faulty/shared-bucket"},
		{"idle-refill", "faulty/deduct-on-reject"},
		{"clock-skew", "faulty/instance-clock"},
	} {
		row, ok := matrixRowFor(pick.plan, pick.bad)
		require.True(t, ok, "no matrix row %s/%s", pick.plan, pick.bad)
		t.Run(pick.plan+"/"+strings.ReplaceAll(pick.bad, "/", "-"), func(t *testing.T) {
			var bad []string
			for i := range diagnosisRuns() {
				r := rlverify.RunMatrixRow(context.Background(), row, t.TempDir())
				if r.Err != nil {
					bad = append(bad, fmt.Sprintf("run %d: %v", i+1, r.Err))
					continue
				}
				for _, p := range r.Problems() {
					bad = append(bad, fmt.Sprintf("run %d: %s", i+1, p))
				}
			}
			require.Empty(t, bad)
		})
	}
}

// matrixRowFor is the first row of the matrix for plan and faulty limiter.
func matrixRowFor(plan, bad string) (rlverify.MatrixRow, bool) {
	for _, r := range rlverify.MutationMatrix {
		if r.Plan == plan && r.Bad == bad {
			return r, true
		}
	}
	return rlverify.MatrixRow{}, false
}

// notPassing lists d's checks that neither passed nor skipped.
func notPassing(d reports.Document) string {
	var out []string
	for _, c := range d.Checks {
		if c.Verdict != checks.Pass && c.Verdict != checks.Skip {
			out = append(out, fmt.Sprintf("%s %s: %s", c.Name, c.Verdict, c.Summary))
		}
	}
	return strings.Join(out, "; ")
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
