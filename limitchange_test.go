package rlverify_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/faults"
	"github.com/rlverify/rlverify/internal/testsvc"
	"github.com/rlverify/rlverify/policy"
)

// The limit-change plan against a service rlverify did not write (the
// metered test service, golang.org/x/time/rate per key), its limit changed
// by a hook that calls its admin endpoint: the honest service passes; one
// that drops its limiters on a change oversells across it; one whose change
// reaches only new keys overruns the new limit; a change nothing shows took
// effect (no answer advertises the limit) judges nothing under it.
func TestLimitChangeOnAServiceWeDidNotWrite(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  testsvc.MeteredConfig
		want checks.Verdict
		// summary or evidence text oversell must show.
		text string
	}{
		{"honest", testsvc.MeteredConfig{AdvertiseLimit: true}, checks.Pass, "judged against the limit change halve (tier metered: token-bucket K=4"},
		{"reload resets the buckets", testsvc.MeteredConfig{AdvertiseLimit: true, ReloadResets: true}, checks.Fail, "across the limit change halve"},
		{"reload reaches new keys only", testsvc.MeteredConfig{AdvertiseLimit: true, ReloadNewKeysOnly: true}, checks.Fail, "under the limit change halve"},
		{"the change cannot be seen", testsvc.MeteredConfig{ReloadNewKeysOnly: true}, checks.Pass, "was not shown to have taken effect (the hook ran, but no answer of tier metered advertised the changed limit 4)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			svc := httptest.NewServer(testsvc.NewMetered(c.cfg))
			defer svc.Close()
			pol, err := policy.Parse("metered+changes.yaml", append(testsvc.MeteredPolicyYAML(c.cfg), []byte(`changes:
  - name: halve
    tier: metered
    limits:
      - capacity: 4
        rate: 2/s
tolerance:
  propagation: 300ms
`)...))
			require.NoError(t, err)
			plan, err := attacks.Load("limit-change")
			require.NoError(t, err)
			change := func(burst, rate int) string {
				return fmt.Sprintf("curl -sf -X POST '%s%s?burst=%d&rate=%d'", svc.URL, testsvc.MeteredLimitsPath, burst, rate)
			}
			out, err := rlverify.Attack(context.Background(), rlverify.AttackOptions{
				Plan: plan, Targets: []string{svc.URL}, Policy: pol, Dir: t.TempDir(),
				Environment: envs.External{HookTimeout: 10 * time.Second, Hooks: []envs.Hook{
					{Action: "inject", Kind: faults.LimitChange, Command: change(4, 2)},
					{Action: "clear", Kind: faults.LimitChange, Command: change(testsvc.DefaultMeteredBurst, int(testsvc.DefaultMeteredRate))},
				}},
			})
			require.NoError(t, err)
			var over checks.Result
			text := ""
			for _, r := range out.Results {
				if r.Name == "oversell" {
					over = r
					text = r.Summary
					for _, e := range r.Evidence {
						text += "\n" + e.Message
					}
				}
			}
			require.Equal(t, c.want, over.Verdict, text)
			require.Contains(t, text, c.text)
		})
	}
}
