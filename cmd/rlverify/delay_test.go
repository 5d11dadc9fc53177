package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/internal/testsvc"
)

// TestDelayPlan runs the delay plan against testsvc delayed, a service
// that queues instead of refusing (GCRA slots, its own route, header and
// statuses), with its honest policy (delay: max_wait 600ms, queue 20).
// The honest service passes; one that holds delayed requests past
// max_wait, and one that refuses at once while the queue has room (a plain
// bucket), fail the delay check alone; one that oversells (K+2) fails
// oversell and is not blamed by the delay check.
func TestDelayPlan(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: about 4 s per run")
	}
	pol, err := testsvc.PolicyYAML("delayed")
	require.NoError(t, err)
	polFile := writeFile(t, "delayed.yaml", string(pol))
	for _, tc := range []struct {
		name  string
		fault testsvc.DelayedFault
		want  map[string]string
	}{
		{"honest", "", map[string]string{"delay": "pass"}},
		{"hold-past", testsvc.DelayedHoldPast, map[string]string{"delay": "fail"}},
		{"no-delay", testsvc.DelayedNoDelay, map[string]string{"delay": "fail"}},
		{"capacity+2", testsvc.DelayedCapacityPlus2, map[string]string{"oversell": "fail", "delay": "pass|skip"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d, err := testsvc.NewDelayed(testsvc.DelayedConfig{Fault: tc.fault})
			require.NoError(t, err)
			url, stop := testsvc.Serve(d)
			defer stop()
			out, stderr, code := rl(t, "attack", "--plan", "delay", "--target", url+testsvc.DelayedPath, "--policy", polFile,
				"--method", "POST", "--out", t.TempDir(), "--quiet", "--fail-on", "none", "--format", "json")
			require.Equal(t, ExitPass, code, "stderr:\n%s", stderr)
			got := verdicts(decodeDoc(t, out))
			_, sum := checkOf(t, out, "delay")
			t.Logf("delay: %s; %v", sum, got)
			requireOnly(t, got, tc.want)
		})
	}
}
