package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/thresholds"
)

// TestThresholdsFailTheRunLikeChecks runs concurrent-burst (100 requests,
// 10 admitted) once and judges its history with thresholds that hold and
// that do not, on the command line and in a plan.
func TestThresholdsFailTheRunLikeChecks(t *testing.T) {
	dir := t.TempDir()
	out, stderr, code := rl(t, "attack", "--plan", "concurrent-burst", "--out", dir, "--quiet", "--format", "json",
		"--threshold", "latency.p99<10s", "--threshold", "phase.burst.admitted.count<=10")
	require.Equal(t, ExitPass, code, stderr)
	d := decodeDoc(t, out)
	require.Len(t, d.Thresholds, 2)
	for _, r := range d.Thresholds {
		require.Equal(t, thresholds.Pass, r.Verdict, r.Summary)
	}
	hist := filepath.Join(dir, "latest", "history.jsonl")

	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"a threshold missed fails", []string{"--threshold", "admitted.count<5"}, ExitFail, "admitted.count<5  FAIL"},
		{"met", []string{"--threshold", "errors<1%", "--threshold", "rejected>=50%"}, ExitPass, "rejected>=50%  PASS"},
		{"fail-on a check only ignores it", []string{"--threshold", "admitted.count<5", "--fail-on", "oversell"}, ExitPass, "FAIL"},
		{"fail-on threshold", []string{"--threshold", "admitted.count<5", "--fail-on", "oversell,threshold"}, ExitFail, ""},
		{"fail-on one threshold by key", []string{"--threshold", "admitted.count<5", "--threshold", "latency.p50<1ns", "--fail-on", "threshold:admitted.count"}, ExitFail, ""},
		{"fail-on another threshold", []string{"--threshold", "admitted.count<5", "--threshold", "latency.p50<1h", "--fail-on", "threshold:latency.p50"}, ExitPass, ""},
		{"a rate", []string{"--threshold", "phase.burst.errors.rate<1/s"}, ExitPass, "phase.burst.errors.rate<1/s  PASS"},
		{"none", []string{"--threshold", "admitted.count<5", "--fail-on", "none"}, ExitPass, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"check", "--history", hist}, tc.args...)
			out, stderr, code := rl(t, args...)
			require.Equal(t, tc.code, code, "%s\n%s", out, stderr)
			require.Contains(t, out, tc.want)
		})
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"syntax", []string{"--threshold", "latency<5ms"}, "latency needs a statistic"},
		{"no such phase", []string{"--threshold", "phase.brust.errors<1%"}, `no phase "brust" (phases: burst)`},
		{"fail-on names no threshold", []string{"--threshold", "errors<1%", "--fail-on", "threshold:latency.p99"}, "no such threshold (the run's: errors.share)"},
		{"fail-on without thresholds", []string{"--fail-on", "threshold:errors"}, "the run has no thresholds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"check", "--history", hist}, tc.args...)
			_, stderr, code := rl(t, args...)
			require.Equal(t, ExitUsage, code, stderr)
			require.Contains(t, stderr, tc.want)
		})
	}
}

func TestPlanThresholdsAndTyposBeforeAnythingIsSent(t *testing.T) {
	dir := t.TempDir()
	plan := filepath.Join(dir, "p.yaml")
	require.NoError(t, os.WriteFile(plan, []byte("name: p\nthresholds:\n  - phase.drain.admitted.count<5\nphases:\n  - name: drain\n    kind: burst\n    key: free-a\n    requests: 20\n"), 0o644))
	out, stderr, code := rl(t, "attack", "--plan", plan, "--out", filepath.Join(dir, "out"), "--quiet")
	require.Equal(t, ExitFail, code, stderr)
	require.Regexp(t, `phase\.drain\.admitted\.count<5\s+FAIL\s+10 admitted in phase drain; threshold < 5`, out)
	require.Contains(t, out, "verdict: FAIL")

	_, stderr, code = rl(t, "attack", "--plan", plan, "--out", filepath.Join(dir, "out2"), "--quiet", "--threshold", "phase.drian.errors<1%")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, stderr, `no phase "drian"`)
	_, err := os.Stat(filepath.Join(dir, "out2"))
	require.True(t, os.IsNotExist(err), "nothing ran")
}

func TestAuditRefusesThresholdSelectors(t *testing.T) {
	_, stderr, code := rl(t, "audit", "--quiet", "--out", t.TempDir(), "--fail-on", "threshold:latency.p99")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, stderr, "the run has no thresholds")
}
