package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/internal/testsvc"
	"github.com/rlverify/rlverify/policy"
)

// judgedMetered runs plan against a testsvc metered service (weighted
// requests on golang.org/x/time/rate's AllowN) built from cfg, with the
// service's honest policy, and returns every check's verdict and the
// report's JSON.
func judgedMetered(t *testing.T, plan string, cfg testsvc.MeteredConfig) (map[string]string, string) {
	t.Helper()
	url, stop := testsvc.Serve(testsvc.NewMetered(cfg))
	defer stop()
	out, stderr, code := rl(t, "attack", "--plan", plan, "--policy", writeFile(t, "metered.yaml", string(testsvc.MeteredPolicyYAML(cfg))),
		"--target", url+"/v1/units", "--out", t.TempDir(), "--quiet", "--fail-on", "none", "--format", "json")
	require.Equal(t, ExitPass, code, "stderr:\n%s", stderr)
	return verdicts(decodeDoc(t, out)), out
}

// TestWeightedRequests: the weighted plan against a service we did not
// write that reads each request's cost from its own header. The honest
// service passes every check; one that charges every request one token
// whatever it asks for is oversell (cost K admitted twice in a row); one
// that charges peeks is under-admission (cost K refused on a full bucket
// after peeks); one whose only defect is a missing Retry-After leaves the
// weighted checks quiet.
func TestWeightedRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: two refills of a 2 s bucket")
	}
	for _, tc := range []struct {
		name string
		cfg  testsvc.MeteredConfig
		want map[string]string
	}{
		{"honest", testsvc.MeteredConfig{}, nil},
		{"ignores-cost", testsvc.MeteredConfig{IgnoreCost: true}, map[string]string{"oversell": "fail", "under-admission": "pass|skip|explained", "retry-after": "pass|explained|fail"}},
		{"charges-peeks", testsvc.MeteredConfig{ChargePeeks: true}, map[string]string{"under-admission": "fail"}},
		{"no-retry-after", testsvc.MeteredConfig{NoRetryAfter: true}, map[string]string{"retry-after": "fail"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, out := judgedMetered(t, "weighted", tc.cfg)
			requireOnly(t, got, tc.want)
			require.Contains(t, got, "oversell")
			require.NotEqual(t, "skip", got["oversell"], "the weighted plan admitted something: %s", out)
		})
	}
}

// TestOneOffQuota: a one-off quota (rate: 0) on x/time/rate with a zero
// Limit. idle-refill drains it, does not wait for a refill that never
// comes (its note says so), and bursts again: the honest service refuses
// every request after the quota and passes; one that refills after all
// (at 4/s) is oversell.
func TestOneOffQuota(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	for _, tc := range []struct {
		name string
		cfg  testsvc.MeteredConfig
		want map[string]string
	}{
		{"honest", testsvc.MeteredConfig{OneOff: true}, nil},
		{"refills", testsvc.MeteredConfig{OneOff: true, Refills: 4}, map[string]string{"oversell": "fail"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, out := judgedMetered(t, "idle-refill", tc.cfg)
			requireOnly(t, got, tc.want)
			require.Contains(t, out, "a one-off quota never refills", "the idle phase says why it did not wait")
		})
	}
}

// TestReferenceServiceHonoursCost: the reference token bucket reads the
// declared cost header (policy cost) and passes the weighted plan, with
// its state in memory and in Redis (the Lua script takes n tokens at once).
func TestReferenceServiceHonoursCost(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	pol := strings.Replace(string(policy.DefaultYAML()), "\nheaders:", "\ncost:\n  name: X-Units\n  min: 0\n  max: 50\nheaders:", 1)
	require.Contains(t, pol, "X-Units")
	file := writeFile(t, "weighted.yaml", pol)
	for _, store := range []string{"memory", "redis"} {
		t.Run(store, func(t *testing.T) {
			out, stderr, code := rl(t, "attack", "--plan", "weighted", "--policy", file, "--store", store,
				"--out", t.TempDir(), "--quiet", "--fail-on", "none", "--format", "json")
			require.Equal(t, ExitPass, code, "stderr:\n%s", stderr)
			got := verdicts(decodeDoc(t, out))
			requireOnly(t, got, nil)
			require.Equal(t, "pass", got["oversell"])
		})
	}
}

// TestAuditWeightedAndOneOff: an audit of the metered service with its
// one-off quota runs the weighted plan (the policy declares a cost) and
// idle-refill, and skips precision naming the one-off limit; the ignore-cost
// defect is oversell in the audit too.
func TestAuditWeightedAndOneOff(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	for _, tc := range []struct {
		name     string
		cfg      testsvc.MeteredConfig
		code     int
		oversell checks.Verdict
	}{
		{"honest", testsvc.MeteredConfig{OneOff: true}, ExitPass, checks.Pass},
		{"ignores-cost", testsvc.MeteredConfig{OneOff: true, IgnoreCost: true}, ExitFail, checks.Fail},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url, stop := testsvc.Serve(testsvc.NewMetered(tc.cfg))
			defer stop()
			a, code, stderr := audit(t, "--policy", writeFile(t, "metered.yaml", string(testsvc.MeteredPolicyYAML(tc.cfg))),
				"--target", url+"/v1/units", "--plans", "weighted,precision,idle-refill")
			require.Equal(t, tc.code, code, stderr)
			require.Equal(t, tc.oversell, property(t, a, "oversell").Verdict, property(t, a, "oversell").Summary)
			ran := map[string]string{}
			for _, p := range a.Plans {
				ran[p.Plan] = p.Why
				if p.Plan != "precision" {
					require.True(t, p.Ran, "%s: %s", p.Plan, p.Why)
				}
			}
			require.Equal(t, "tier metered's limit 8-once is a one-off quota (never refills): the plan waits for a refill or window edge that no run reaches", ran["precision"])
			require.Contains(t, ran, "weighted")
		})
	}
}

// refundPlan fails the downstream of K requests (the metered service's
// X-Upstream-Fail) and then, past the timing tolerance (a refunded request
// may hold its tokens while it is decided), sends K ordinary ones.
const refundPlan = `name: refunds
phases:
  - name: failing
    kind: burst
    key: free-refund
    requests: 8
    request:
      headers:
        X-Upstream-Fail: "1"
  - name: gap
    kind: idle
    duration: 100ms
  - name: after
    kind: burst
    key: free-refund
    requests: 8
`

// TestRefunds: a service that declares refund_on: [502] and gives the
// tokens of failed requests back (x/time/rate Reservation.CancelAt) passes;
// one that keeps them refuses the requests after the failures although the
// refunded bucket was full: under-admission. Without the declaration the
// same defect is not blamed (a failed request may have consumed).
func TestRefunds(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	for _, tc := range []struct {
		name    string
		cfg     testsvc.MeteredConfig
		declare bool
		want    map[string]string
	}{
		{"refunds", testsvc.MeteredConfig{Refunds: true}, true, nil},
		{"forgets-refund", testsvc.MeteredConfig{Refunds: true, ForgetsRefund: true}, true, map[string]string{"under-admission": "fail", "retry-after": "pass|explained|fail"}},
		{"no-refund-declared", testsvc.MeteredConfig{}, false, map[string]string{"evidence": "unknown"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url, stop := testsvc.Serve(testsvc.NewMetered(tc.cfg))
			defer stop()
			pol := testsvc.MeteredPolicyYAML(tc.cfg)
			require.Equal(t, tc.declare, strings.Contains(string(pol), "refund_on"))
			out, stderr, code := rl(t, "attack", "--plan", writeFile(t, "refunds.yaml", refundPlan), "--policy", writeFile(t, "metered.yaml", string(pol)),
				"--target", url+"/v1/units", "--out", t.TempDir(), "--quiet", "--fail-on", "none", "--format", "json")
			require.Equal(t, ExitPass, code, "stderr:\n%s", stderr)
			got := verdicts(decodeDoc(t, out))
			requireOnly(t, got, tc.want)
		})
	}
}

// weightedRatePlan is the weighted plan's sustained phase alone: requests
// of costs 1, 2 and 3 at 1.5 times the tier's rate.
const weightedRatePlan = `name: weighted-rate
phases:
  - name: weighted-rate
    kind: rate
    key: free-weighted-rate
    rate_x: 1.5
    duration: 2s
    costs: ["1", "2", "3"]
`

// TestWeightedRatePhase: a rate phase of mixed costs alone tells a limiter
// that charges what each request asks for from one that counts requests:
// at 1.5 times the rate in requests (three times in tokens) the second
// admits more tokens than the bucket holds and refills.
func TestWeightedRatePhase(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	plan := writeFile(t, "weighted-rate.yaml", weightedRatePlan)
	for _, tc := range []struct {
		name string
		cfg  testsvc.MeteredConfig
		want map[string]string
	}{
		{"honest", testsvc.MeteredConfig{}, nil},
		{"ignores-cost", testsvc.MeteredConfig{IgnoreCost: true}, map[string]string{"oversell": "fail", "under-admission": "pass|skip|explained", "retry-after": "skip"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, _ := judgedMetered(t, plan, tc.cfg)
			requireOnly(t, got, tc.want)
		})
	}
}
