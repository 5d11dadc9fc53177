package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/envs/redisproc"
	"github.com/rlverify/rlverify/internal/testsvc"
)

// TestFailuresNobodyInjected: testsvc's redisbucket with one connection to
// Redis and a 2ms store timeout fails under a concurrent burst with no
// fault injected (requests wait for the connection past the timeout). Its
// failure mode then decides: fail-open admits without its X-RateLimit-*
// headers, fail-closed answers 503. Either is a fail-mode finding with that
// signature as evidence, never a pass and never oversell's; the same
// service with its usual pool passes.
func TestFailuresNobodyInjected(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	if err := redisproc.Available(); err != nil {
		t.Skip(err)
	}
	rs, err := redisproc.Start()
	require.NoError(t, err)
	defer rs.Stop()
	for _, tc := range []struct {
		name, policy, mode string
		maxCalls           int
		verdict, cause     string
	}{
		{"fail-open under load", "redisbucket-open", testsvc.FailOpen, 2, "fail", checks.CauseFailedOpen},
		{"fail-closed under load", "redisbucket", testsvc.FailClosed, 2, "fail", checks.CauseFailedClosed},
		{"no bound on store calls", "redisbucket-open", testsvc.FailOpen, 0, "skip", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc, err := testsvc.NewRedisBucket(testsvc.RedisBucketConfig{Addr: rs.Addr, FailMode: tc.mode, MaxStoreCalls: tc.maxCalls,
				Namespace: fmt.Sprintf("t%d", time.Now().UnixNano())})
			require.NoError(t, err)
			defer svc.Close()
			url, stop := testsvc.Serve(svc)
			defer stop()
			pol, err := testsvc.PolicyYAML(tc.policy)
			require.NoError(t, err)
			out, stderr, code := rl(t, "attack", "--plan", "concurrent-burst", "--target", url+"/any", "--policy", writeFile(t, tc.policy+".yaml", string(pol)),
				"--out", t.TempDir(), "--quiet", "--fail-on", "none", "--format", "json", "--max-error-rate", "1")
			require.Equal(t, ExitPass, code, "stderr:\n%s", stderr)
			d := decodeDoc(t, out)
			for _, c := range d.Checks {
				for _, e := range c.Evidence {
					t.Logf("%s %s: %s %d-%d %s ids %v", c.Name, c.Verdict, e.Key, e.From, e.To, e.Cause, e.RequestIDs)
				}
			}
			for _, c := range d.Checks {
				switch c.Name {
				case "fail-mode":
					require.Equal(t, tc.verdict, string(c.Verdict), c.Summary)
					if tc.cause != "" {
						require.NotEmpty(t, c.Evidence)
						require.Equal(t, tc.cause, c.Evidence[0].Cause, c.Evidence[0].Message)
						require.Contains(t, c.Evidence[0].Message, "outside any injected fault")
					}
				case "evidence":
				default:
					require.Contains(t, []checks.Verdict{checks.Pass, checks.Skip, checks.Explained}, c.Verdict, "%s: %s", c.Name, c.Summary)
					if c.Verdict == checks.Explained {
						require.Equal(t, "fail-mode", c.ExplainedBy, c.Name)
					}
				}
			}
		})
	}
}
