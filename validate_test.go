package rlverify_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/policy"
)

func loadPlan(t *testing.T, name string) *attacks.Plan {
	t.Helper()
	p, err := attacks.Load(name)
	require.NoError(t, err)
	return p
}

// The rules of an attack live in the library: Prepare refuses what the
// command refuses, with an *OptionError naming the option's field and a
// message that names no flag (the command says fields as flags).
func TestPrepareRefusesWhatTheCommandRefuses(t *testing.T) {
	burst := loadPlan(t, "concurrent-burst")
	retry := loadPlan(t, "retry-after")
	own, err := rlverify.LoadPolicy(retry.Policy)
	require.NoError(t, err)
	target := []string{"http://127.0.0.1:1"}
	for _, tc := range []struct {
		name  string
		o     rlverify.AttackOptions
		field string // "" means Prepare accepts o
		want  string
	}{
		{"no plan", rlverify.AttackOptions{}, "Plan", "is required"},
		{"bad request header", rlverify.AttackOptions{Plan: burst, Request: attacks.Request{Headers: map[string]string{"bad name": "x"}}}, "Request", "is not a valid header name"},
		{"too many instances", rlverify.AttackOptions{Plan: burst, Instances: envs.MaxInstances + 1}, "Instances", "want 1 …"},
		{"negative header cap", rlverify.AttackOptions{Plan: burst, MaxHeaderBytes: -1}, "MaxHeaderBytes", "want at least 1"},
		{"header cap beyond the ceiling", rlverify.AttackOptions{Plan: burst, MaxHeaderBytes: attacks.MaxHeaderBytesCeiling + 1}, "MaxHeaderBytes", "want at most"},
		{"Redis on local", rlverify.AttackOptions{Plan: burst, Env: rlverify.EnvLocal, RedisURL: "redis://127.0.0.1:6379"}, "Env", "starts its own redis-server processes"},
		{"Redis against a target", rlverify.AttackOptions{Plan: burst, Targets: target, RedisURL: "redis://127.0.0.1:6379"}, "RedisURL", "does not apply to Env external"},
		{"store proxy to itself", rlverify.AttackOptions{Plan: burst, Targets: target, Environment: envs.External{StoreProxies: []envs.ProxySpec{{Listen: "127.0.0.1:16390", Upstream: "127.0.0.1:16390"}}}}, "Environment.StoreProxies", "forward to itself"},
		{"unknown env", rlverify.AttackOptions{Plan: burst, Env: "moon"}, "Env", `"moon": want`},
		{"regions on local", rlverify.AttackOptions{Plan: burst, Env: rlverify.EnvLocal, Regions: 2}, "Regions", "embedded and docker"},
		{"docker with a Redis", rlverify.AttackOptions{Plan: burst, Env: rlverify.EnvDocker, RedisURL: "redis://127.0.0.1:6379"}, "RedisURL", "its own Redis container"},
		{"remote Redis", rlverify.AttackOptions{Plan: burst, Store: "redis", RedisURL: "redis://192.0.2.1:6379/2"}, "RedisURL", "192.0.2.1:6379 is not a loopback address"},
		{"remote Redis allowed", rlverify.AttackOptions{Plan: burst, Store: "redis", RedisURL: "redis://192.0.2.1:6379/2", AllowRemote: true}, "", ""},
		{"external without targets", rlverify.AttackOptions{Plan: burst, Env: rlverify.EnvExternal}, "Targets", "at least one target"},
		{"remote target", rlverify.AttackOptions{Plan: burst, Targets: []string{"http://192.0.2.1:8080"}}, "Targets", "is not a loopback address"},
		{"not a URL", rlverify.AttackOptions{Plan: burst, Targets: []string{"ftp://127.0.0.1"}}, "Targets", "want an http(s) URL"},
		{"plan's own policy, none declared", rlverify.AttackOptions{Plan: retry, Targets: target}, "Policy", "plan retry-after judges against its own policy"},
		{"plan's own policy passed back", rlverify.AttackOptions{Plan: retry, Targets: target, Policy: own}, "Policy", "plan retry-after judges against its own policy"},
		{"plan's own policy, service's declared", rlverify.AttackOptions{Plan: retry, Targets: target, Policy: policy.Default()}, "", ""},
		{"plan's own policy on the reference service", rlverify.AttackOptions{Plan: retry}, "", ""},
		{"remote store proxy", rlverify.AttackOptions{Plan: burst, Targets: target, Environment: envs.External{StoreProxies: []envs.ProxySpec{{Listen: "127.0.0.1:1", Upstream: "192.0.2.1:6379"}}}}, "Environment.StoreProxies", "is not a loopback address"},
		{"remote sink", rlverify.AttackOptions{Plan: burst, Targets: target, Environment: envs.External{Downstream: &envs.RemoteSink{URL: "http://192.0.2.1:9090"}}}, "Environment.Downstream.RemoteSink", "is not a loopback address"},
		{"toxiproxy without proxies", rlverify.AttackOptions{Plan: burst, Targets: target, Environment: envs.External{Toxiproxy: "http://127.0.0.1:8474"}}, "Environment.ToxiproxyProxies", "name the proxies"},
		// Moved from the command (issue 28): gateways, honest, the
		// faults a plan needs on your service, settings that apply only
		// there, checks, overrides and --fail-on thresholds.
		{"gateway on local", rlverify.AttackOptions{Plan: burst, Env: rlverify.EnvLocal, Limiter: "nginx/limit-req"}, "Env", "does not apply: limiter nginx/limit-req runs as its own child process"},
		{"gateway with a store", rlverify.AttackOptions{Plan: burst, Limiter: "haproxy/stick-table", Store: "redis"}, "Limiter", "keeps its state in its own child process"},
		{"honest without a gateway", rlverify.AttackOptions{Plan: burst, Honest: true}, "Honest", "applies to gateway limiters"},
		{"limiter policy against a target", rlverify.AttackOptions{Plan: burst, Targets: target, Policy: policy.Default(), LimiterPolicy: policy.Default()}, "LimiterPolicy", "not to your own service"},
		{"store fault with no way to inject it", rlverify.AttackOptions{Plan: loadPlan(t, "store-outage"), Targets: target, Policy: policy.Default()}, "Environment.StoreProxies", "plan store-outage injects store-down"},
		{"clock fault with no hook", rlverify.AttackOptions{Plan: loadPlan(t, "clock-skew"), Targets: target, Policy: policy.Default()}, "Environment.OnInject", "only through commands: OnInject clock-skew="},
		{"store fault through a hook", rlverify.AttackOptions{Plan: loadPlan(t, "store-outage"), Targets: target, Policy: policy.Default(),
			Environment: envs.External{Hooks: []envs.Hook{{Action: "inject", Kind: envs.FaultStoreDown, Command: "true"}}, HookTimeout: time.Second}}, "", ""},
		{"external settings on the embedded env", rlverify.AttackOptions{Plan: burst, Environment: envs.External{Toxiproxy: "http://127.0.0.1:8474", ToxiproxyProxies: []string{"redis"}}}, "Environment", "are for your own service"},
		{"unknown check", rlverify.AttackOptions{Plan: burst, Checks: checks.Options{Only: []string{"oversel"}}}, "Checks.Only", "oversel"},
		{"identity without its name", rlverify.AttackOptions{Plan: burst, Overrides: rlverify.PolicyOverrides{Identity: "header"}}, "Overrides.Identity", "give the name"},
		{"fail-on names no threshold", rlverify.AttackOptions{Plan: burst, FailOn: mustFailOn(t, "threshold:latency.p99")}, "FailOn", "the run has no thresholds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rlverify.Prepare(tc.o)
			require.Equal(t, err, tc.o.Validate(), "Prepare's refusal is Validate's")
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			var oe *rlverify.OptionError
			require.True(t, errors.As(err, &oe), "%v is an *OptionError", err)
			require.Equal(t, tc.field, oe.Field)
			require.ErrorContains(t, err, tc.want)
			require.False(t, strings.Contains(err.Error(), "--"), "%q names a flag", err)
			if strings.Contains(tc.want, "loopback") {
				require.ErrorIs(t, err, envs.ErrNotLoopback)
			}
		})
	}
}

func mustFailOn(t *testing.T, specs ...string) *rlverify.FailOn {
	t.Helper()
	fo, err := rlverify.ParseFailOn(specs)
	require.NoError(t, err)
	return fo
}
