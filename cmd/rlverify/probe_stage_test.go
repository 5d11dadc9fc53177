package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/internal/testsvc"
)

// TestProbeOutlivesAHeaderReadTimeout: testsvc's servers read a request's
// header within 5 s (Go's ReadHeaderTimeout). A window of 6 s anchored at
// the key's first request advises 6 s; the probe at that advice is staged
// at most attacks.StageLead (3 s) before its send time, so the server sees
// a whole request, admits it, and retry-after judges the advice — not a
// 400 turned into an error and a pass on the header's presence alone.
func TestProbeOutlivesAHeaderReadTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: waits 6 s for the advice")
	}
	w, err := testsvc.NewWindowed(testsvc.WindowedConfig{Limit: 1, Window: 6 * time.Second})
	require.NoError(t, err)
	url, stop := testsvc.Serve(w)
	defer stop()
	require.Equal(t, 5*time.Second, testsvc.NewServer(nil).ReadHeaderTimeout)
	pol, err := testsvc.PolicyYAML("windowed")
	require.NoError(t, err)
	p := strings.Replace(strings.Replace(string(pol), "limit: 10", "limit: 1", 1), "window: 2s", "window: 6s", 1)
	require.NotEqual(t, string(pol), p)
	plan := "name: advice-6s\nphases:\n  - name: take\n    kind: burst\n    key: k\n    requests: 1\n  - name: refused\n    kind: burst\n    key: k\n    requests: 1\n  - name: at-advice\n    kind: probe\n    key: k\n    at: retry-after\n"
	out, stderr, code := rl(t, "attack", "--plan", writeFile(t, "plan.yaml", plan), "--target", url+"/search/x", "--policy", writeFile(t, "windowed-6s.yaml", p),
		"--out", t.TempDir(), "--quiet", "--format", "json")
	require.Equal(t, ExitPass, code, "stderr:\n%s\n%s", stderr, out)
	v, sum := checkOf(t, out, "retry-after")
	require.Equal(t, "pass", v, sum)
	require.Contains(t, sum, "1 of 1 followed at the advised time (nothing else of the key in between) were admitted")
}
