package rlverify_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/attacks"
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
