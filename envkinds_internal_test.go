package rlverify

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/envs/gateway"
	"github.com/rlverify/rlverify/policy"
)

// Every environment name is a value with its own rules and preparation;
// an unknown name is an OptionError of Env that lists the known ones.
func TestEveryEnvironmentIsAKind(t *testing.T) {
	for _, name := range []string{EnvEmbedded, EnvLocal, EnvDocker, EnvExternal, EnvGateway} {
		k, err := kindOf(name)
		require.NoError(t, err, name)
		require.NotNil(t, k, name)
	}
	require.Len(t, envKinds, 5, "a new kind is a new Env* name, listed above and in kindOf's message")
	_, err := kindOf("cloud")
	var oe *OptionError
	require.True(t, errors.As(err, &oe))
	require.Equal(t, "Env", oe.Field)
	require.EqualError(t, err, `Env "cloud": want embedded, local, docker, external or gateway`)
}

// Each kind prepares its own run: the envs.Environment Run starts, the
// limiter and the regions it sets up. Nothing starts here.
func TestEachKindPreparesItsRun(t *testing.T) {
	burst, err := attacks.Load("concurrent-burst")
	require.NoError(t, err)
	docker := envs.External{} // any value stands for the caller's docker.Docker
	for _, tc := range []struct {
		name    string
		o       AttackOptions
		env     envs.Environment
		limiter string
		regions int
	}{
		{"embedded", AttackOptions{Plan: burst}, envs.Embedded{}, DefaultLimiter, 0},
		{"embedded regions", AttackOptions{Plan: burst, Regions: 2}, envs.Embedded{}, DefaultLimiter, 2},
		{"local cluster", AttackOptions{Plan: burst, Env: EnvLocal, RedisCluster: 3}, envs.Local{Cluster: 3}, DefaultLimiter, 0},
		{"docker", AttackOptions{Plan: burst, Env: EnvDocker, Environment: docker, Regions: 2}, docker, DefaultLimiter, 2},
		{"external", AttackOptions{Plan: burst, Targets: []string{"http://127.0.0.1:1"}, Policy: policy.Default()}, envs.External{}, "", 0},
		{"gateway", AttackOptions{Plan: burst, Limiter: "nginx/limit-req"}, gateway.Environment{}, "nginx/limit-req", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Prepare(tc.o)
			require.NoError(t, err)
			if g, ok := p.Env.(gateway.Environment); ok {
				require.Equal(t, "nginx", g.Gateway.Kind)
			} else {
				require.Equal(t, tc.env, p.Env)
			}
			require.Equal(t, tc.limiter, p.spec.Limiter)
			if tc.regions > 0 {
				require.Equal(t, tc.regions, p.spec.Regions.Regions)
			} else {
				require.Nil(t, p.spec.Regions)
			}
			require.NotNil(t, p.Declared())
		})
	}
}
