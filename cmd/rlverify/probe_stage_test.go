package main

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/internal/testsvc"
)

// TestProbeOutlivesAHeaderReadTimeout: a window of 3 s anchored at the
// key's first request advises 3 s; the probe at that advice is staged
// attacks.ProbeLead (250 ms) before its send time. Against a server that
// reads a request's header within 1.5 s (Go's ReadHeaderTimeout) the probe
// is a whole request, admitted, and retry-after judges the advice, naming
// the lead. Against one that allows only 100 ms, shorter than the lead,
// the probe is a 400 turned into an error, and retry-after is unknown,
// never a pass on the header's presence alone.
func TestProbeOutlivesAHeaderReadTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: waits 3 s for the advice")
	}
	require.Equal(t, 250*time.Millisecond, attacks.ProbeLead)
	pol, err := testsvc.PolicyYAML("windowed")
	require.NoError(t, err)
	p := strings.Replace(strings.Replace(string(pol), "limit: 10", "limit: 1", 1), "window: 2s", "window: 3s", 1)
	require.NotEqual(t, string(pol), p)
	plan := "name: advice-3s\nphases:\n  - name: take\n    kind: burst\n    key: k\n    requests: 1\n  - name: refused\n    kind: burst\n    key: k\n    requests: 1\n  - name: at-advice\n    kind: probe\n    key: k\n    at: retry-after\n"
	for _, tc := range []struct {
		name          string
		headerTimeout time.Duration
		code          int
		verdict, want string
	}{
		{"header-read-1.5s", 1500 * time.Millisecond, ExitPass, "pass", "1 of 1 followed at the advised time (nothing else of the key in between) were admitted; each probe was staged (connected, all but its last byte written) at most "},
		{"header-read-100ms", 100 * time.Millisecond, ExitFail, "unknown", "all 1 probe aimed at the advice ended in an error (status 400), so whether a client that waits as advised is served was not tested; each probe was staged"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w, err := testsvc.NewWindowed(testsvc.WindowedConfig{Limit: 1, Window: 3 * time.Second})
			require.NoError(t, err)
			url := serveWithHeaderTimeout(t, w, tc.headerTimeout)
			out, stderr, code := rl(t, "attack", "--plan", writeFile(t, "plan.yaml", plan), "--target", url+"/search/x", "--policy", writeFile(t, "windowed-3s.yaml", p),
				"--out", t.TempDir(), "--quiet", "--format", "json")
			v, sum := checkOf(t, out, "retry-after")
			require.Equal(t, tc.verdict, v, "%s\nstderr:\n%s", sum, stderr)
			require.Contains(t, sum, tc.want)
			require.Contains(t, sum, "staged (connected, all but its last byte written) at most")
			for _, c := range decodeDoc(t, out).Checks {
				if c.Name == "retry-after" {
					// Staged well inside the 1.5 s timeout, whatever the machine's load.
					require.Less(t, c.Figures["probe_staged_s"], 1.0, "%v", c.Figures)
				}
			}
			require.Equal(t, tc.code, code, "stderr:\n%s\n%s", stderr, out)
		})
	}
}

// serveWithHeaderTimeout serves h on loopback with Go's ReadHeaderTimeout
// set to d, stopped at the end of the test.
func serveWithHeaderTimeout(t *testing.T, h http.Handler, d time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &http.Server{Handler: h, ReadHeaderTimeout: d, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = s.Close()
		<-done
	})
	return "http://" + ln.Addr().String()
}
