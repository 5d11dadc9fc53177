package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/envs/gateway"
	"github.com/rlverify/rlverify/internal/testsvc"
	"github.com/rlverify/rlverify/limiters/catalog"
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

// TestDelayPlanNginx runs the delay plan against nginx limit_req, a real
// limiter. Configured from a declared delay (nginx/limit-req-delay: burst=
// K−1+Q delay=K−1, here K=5 at 5/s, max_wait 800ms, queue 4) it admits five
// at once and holds four more, up to 800ms: it passes. Configured from the
// same policy without its delay (burst=K−1, no delay=: every request past
// the first waits its turn at the rate) and judged against the declared
// one, it holds requests whose tokens were free; configured with a
// max_wait of 400ms, it refuses what 800ms would have held; with nodelay
// it refuses at once what the delay should have held. Each of those fails
// the delay check alone. Declared without a delay and judged --honest, the
// honest policy declares nginx's own (a bucket of one, K−1 waiting up to
// (K−1)/r) and passes.
func TestDelayPlanNginx(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: about 4 s per run")
	}
	if err := gateway.Available(catalog.NGINX); err != nil {
		t.Skip(err)
	}
	policyWith := func(t *testing.T, delay string) string {
		return writeFile(t, "nginx-delayed.yaml", `name: nginx-delayed
tiers:
  - name: free
    key_prefix: "free-"
    limits:
      - algorithm: token-bucket
        capacity: 5
        rate: 5/s
default_tier: free
# nginx reads a millisecond clock, cached per event loop: a delayed
# answer can come a fraction of a millisecond before its token is due.
clock_quantum: 1ms
delay: `+delay+`
headers:
  retry_after: false
  ratelimit: none
  x_ratelimit: false
checks_off: [retry-after]
`)
	}
	for _, tc := range []struct {
		name, limiter, delay string
		// configured, when set, is the delay nginx is configured from
		// (--limiter-policy) instead of the declared one.
		configured string
		honest     bool
		want       map[string]string
	}{
		{"delay as configured", "nginx/limit-req-delay", "{max_wait: 800ms, queue: 4, tolerance: 250ms}", "", false, map[string]string{"delay": "pass"}},
		{"paced within its burst", "nginx/limit-req-delay", "{max_wait: 800ms, queue: 4, tolerance: 250ms}", "null", false, map[string]string{"delay": "fail"}},
		{"max_wait configured shorter", "nginx/limit-req-delay", "{max_wait: 800ms, queue: 4, tolerance: 250ms}", "{max_wait: 400ms, queue: 4}", false, map[string]string{"delay": "fail"}},
		{"nodelay", "nginx/limit-req", "{max_wait: 800ms, queue: 4, tolerance: 250ms}", "", false, map[string]string{"delay": "fail"}},
		// None declared: judged against what nginx really does (the
		// honest policy declares its delay).
		{"honest", "nginx/limit-req-delay", "null", "", true, map[string]string{"delay": "pass"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.honest {
				// The honest policy's default tolerance is a tenth of
				// max_wait (80ms): that case runs alone, before the others
				// start their nginx beside each other.
				t.Parallel()
			}
			args := []string{"attack", "--plan", "delay", "--limiter", tc.limiter, "--policy", policyWith(t, tc.delay),
				"--out", t.TempDir(), "--quiet", "--fail-on", "none", "--format", "json"}
			if tc.configured != "" {
				args = append(args, "--limiter-policy", policyWith(t, tc.configured))
			}
			if tc.honest {
				args = append(args, "--honest")
			}
			out, stderr, code := rl(t, args...)
			require.Equal(t, ExitPass, code, "stderr:\n%s", stderr)
			got := verdicts(decodeDoc(t, out))
			_, sum := checkOf(t, out, "delay")
			t.Logf("delay: %s; %v", sum, got)
			requireOnly(t, got, tc.want)
		})
	}
}

// The audit runs the delay plan only when the policy declares a delay; the
// reference service, built from the shipped delayed policy, holds what it
// cannot admit at once up to max_wait, and the delay check decides on it.
func TestAuditRunsTheDelayPlanWhereDeclared(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	a, code, stderr := audit(t, "--policy", "delayed", "--plans", "delay,concurrent-burst")
	require.Equal(t, ExitPass, code, stderr)
	delay := property(t, a, "delay")
	require.Equal(t, checks.Pass, delay.Verdict, delay.Summary)
	require.Contains(t, delay.DecidedBy, "delay")
	require.Equal(t, checks.Pass, property(t, a, "oversell").Verdict)

	a, _, stderr = audit(t, "--plans", "delay,concurrent-burst")
	found := false
	for _, p := range a.Plans {
		if p.Plan == "delay" {
			found = true
			require.False(t, p.Ran, stderr)
			require.Contains(t, p.Why, "the policy declares no delay")
		}
	}
	require.True(t, found, "the audit lists the delay plan as not run")
}
