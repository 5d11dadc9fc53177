package rlverify_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/faults"
	"github.com/rlverify/rlverify/internal/testsvc"
	"github.com/rlverify/rlverify/policies"
	"github.com/rlverify/rlverify/policy"
)

// The limit-change plans against a service rlverify did not write (the
// metered test service, golang.org/x/time/rate per key), its limit changed
// by a hook that calls its admin endpoint. Lowered (limit-change): the
// honest service passes; one that drops its limiters on a change oversells
// across it; one whose change reaches only new keys overruns the new limit;
// a change nothing shows took effect (no answer advertises the limit)
// judges nothing under it. Raised (limit-raise): the honest service passes,
// its refusals judged by the raised limit once a key has refilled under
// it; one whose raise reaches only new keys refuses wrongfully there
// (under-admission, named after the change); one that drops its limiters
// admits beyond even the raised limit across it.
func TestLimitChangeOnAServiceWeDidNotWrite(t *testing.T) {
	lower := change{plan: "limit-change", name: "halve", burst: 4, rate: 2}
	// Raised to refill from empty in 1s: the plan rests 2.5s after it.
	raise := change{plan: "limit-raise", name: "double", burst: 2 * testsvc.DefaultMeteredBurst, rate: 2 * testsvc.DefaultMeteredBurst}
	for _, c := range []struct {
		name   string
		change change
		cfg    testsvc.MeteredConfig
		// check whose verdict and summary or evidence text must show (and
		// the same for also's, when set).
		check string
		want  checks.Verdict
		text  string
		also  *expect
	}{
		{"honest", lower, testsvc.MeteredConfig{AdvertiseLimit: true}, "oversell", checks.Pass, "judged against the limit change halve (tier metered: token-bucket K=4", nil},
		{"reload resets the buckets", lower, testsvc.MeteredConfig{AdvertiseLimit: true, ReloadResets: true}, "oversell", checks.Fail, "across the limit change halve", nil},
		{"reload reaches new keys only", lower, testsvc.MeteredConfig{AdvertiseLimit: true, ReloadNewKeysOnly: true}, "oversell", checks.Fail, "under the limit change halve", nil},
		{"the change cannot be seen", lower, testsvc.MeteredConfig{ReloadNewKeysOnly: true}, "oversell", checks.Pass, "was not shown to have taken effect (the hook ran, but no answer of tier metered advertised the changed limit 4)", nil},
		{"honest raise", raise, testsvc.MeteredConfig{AdvertiseLimit: true}, "under-admission", checks.Pass, "after the limit change double (tier metered: token-bucket K=16 r=16/s",
			&expect{"oversell", checks.Pass, "judged against the limit change double"}},
		{"raise reaches new keys only", raise, testsvc.MeteredConfig{AdvertiseLimit: true, ReloadNewKeysOnly: true}, "under-admission", checks.Fail, "after the limit change double", nil},
		{"raise resets the buckets", raise, testsvc.MeteredConfig{AdvertiseLimit: true, ReloadResets: true}, "oversell", checks.Fail, "across the limit change double", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			svc := httptest.NewServer(testsvc.NewMetered(c.cfg))
			defer svc.Close()
			pol, err := policy.Parse("metered+changes.yaml", append(testsvc.MeteredPolicyYAML(c.cfg), []byte(fmt.Sprintf(`changes:
  - name: halve
    tier: metered
    limits:
      - capacity: %d
        rate: %d/s
  - name: double
    tier: metered
    limits:
      - capacity: %d
        rate: %d/s
tolerance:
  propagation: 300ms
`, lower.burst, lower.rate, raise.burst, raise.rate))...))
			require.NoError(t, err)
			plan, err := attacks.Load(c.change.plan)
			require.NoError(t, err)
			set := func(burst, rate int) string {
				return fmt.Sprintf("curl -sf -X POST '%s%s?burst=%d&rate=%d'", svc.URL, testsvc.MeteredLimitsPath, burst, rate)
			}
			out, err := rlverify.Attack(context.Background(), rlverify.AttackOptions{
				Plan: plan, Targets: []string{svc.URL}, Policy: pol, Dir: t.TempDir(),
				Environment: envs.External{HookTimeout: 10 * time.Second, Hooks: []envs.Hook{
					{Action: "inject", Kind: faults.LimitChange, Command: set(c.change.burst, c.change.rate)},
					{Action: "clear", Kind: faults.LimitChange, Command: set(testsvc.DefaultMeteredBurst, int(testsvc.DefaultMeteredRate))},
				}},
			})
			require.NoError(t, err)
			wants := []expect{{c.check, c.want, c.text}}
			if c.also != nil {
				wants = append(wants, *c.also)
			}
			for _, w := range wants {
				var got checks.Result
				text := ""
				for _, r := range out.Results {
					if r.Name == w.check {
						got = r
						text = r.Summary
						for _, e := range r.Evidence {
							text += "\n" + e.Message
						}
					}
				}
				require.Equal(t, w.want, got.Verdict, "%s: %s", w.check, text)
				require.Contains(t, text, w.text)
			}
		})
	}
}

// expect is a check's verdict and text it must show.
type expect struct {
	check string
	want  checks.Verdict
	text  string
}

// change is a declared limit change, the plan that applies it and the
// metered service's limits under it.
type change struct {
	plan, name  string
	burst, rate int
}

// The audit runs limit-change when the policy declares a lowering of the
// plans' tier and limit-raise when it declares a raise, each applying the
// policy's own change; a limiter deaf to changes fails both, by the root
// cause each shows (an overrun after the lowering, wrongful refusals after
// the raise). Without a declared raise, limit-raise says why it did not run.
func TestAuditRunsTheDeclaredChanges(t *testing.T) {
	raw, ok := policies.Get("limit-change")
	require.True(t, ok)
	// The shipped changes under other names: the audit applies them by
	// what they do, not by the shipped plans' names.
	both, err := policy.Parse("changes.yaml", []byte(strings.NewReplacer("name: halve", "name: cut", "name: double", "name: lift").Replace(string(raw))))
	require.NoError(t, err)
	lowerOnly, err := policy.Parse("lower.yaml", []byte(strings.Split(strings.Replace(string(raw), "name: halve", "name: cut", 1), "  - name: double")[0]+"tolerance:\n  propagation: 500ms\n"))
	require.NoError(t, err)
	require.Len(t, lowerOnly.Changes, 1)
	for _, c := range []struct {
		name  string
		pol   *policy.Policy
		plans []string
		// want is each plan's verdict, or why it did not run.
		want map[string]string
		// fails are the properties that must fail.
		fails []string
	}{
		{"both declared", both, []string{"limit-change", "limit-raise"}, map[string]string{"limit-change": "fail", "limit-raise": "fail"}, []string{"oversell", "under-admission"}},
		{"no raise declared", lowerOnly, []string{"limit-raise"}, map[string]string{"limit-raise": "no declared limit change raises the limits of the tier the plan's keys get"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, err := rlverify.Audit(context.Background(), rlverify.AuditOptions{
				Attack: rlverify.AttackOptions{Limiter: "faulty/keeps-old-limit", Policy: c.pol},
				Plans:  c.plans,
				Dir:    t.TempDir(),
			})
			require.NoError(t, err)
			for _, p := range a.Plans {
				want, ok := c.want[p.Plan]
				if !ok {
					continue
				}
				if p.Ran {
					require.Equal(t, want, string(p.Verdict), p.Plan)
				} else {
					require.Contains(t, p.Why, want, p.Plan)
				}
			}
			for _, name := range c.fails {
				found := false
				for _, pr := range a.Properties {
					if pr.Name == name {
						found = true
						require.Equal(t, checks.Fail, pr.Verdict, "%s: %+v", name, pr)
					}
				}
				require.True(t, found, name)
			}
		})
	}
}
