package docker

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/service"
)

// Every limiter container gets its whole serve configuration as a file
// that service.ReadConfig reads back, and a command line that names only
// that file: the environment knows no flag of `rlverify serve`.
func TestLimiterContainersCarryTheirConfigAsAFile(t *testing.T) {
	pol := policy.Default()
	for _, tc := range []struct {
		name string
		spec envs.Spec
		want []service.Config
	}{
		{"skewed instances", envs.Spec{Policy: pol, Limiter: "token-bucket", Instances: 2, Skews: []time.Duration{0, 2 * time.Second}},
			[]service.Config{{Redis: "redis:6379"}, {Redis: "redis:6379", ClockOffset: policy.Duration(2 * time.Second)}}},
		{"strict regions", envs.Spec{Policy: pol, Limiter: "token-bucket", Instances: 1, Regions: &envs.RegionSpec{Regions: 2, Mode: service.RegionStrict, Latency: 10 * time.Millisecond}},
			[]service.Config{{Redis: "redis:6379", RegionMode: service.RegionStrict}, {Redis: "redis:6379", RegionMode: service.RegionStrict, RedisLatency: policy.Duration(10 * time.Millisecond)}}},
		{"replicated regions", envs.Spec{Policy: pol, Limiter: "token-bucket", Instances: 1, Regions: &envs.RegionSpec{Regions: 2, Mode: service.RegionReplicated}},
			[]service.Config{{Redis: "redis:6379", RegionMode: service.RegionReplicated}, {Redis: "redis-1:6379", RegionMode: service.RegionReplicated}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Docker{}.plan(tc.spec)
			require.NoError(t, err)
			ds := &dockerStack{controlToken: "secret"}
			lims, err := ds.limiterContainers(p, tc.spec, "rlverify/limiter:test")
			require.NoError(t, err)
			require.Len(t, lims, len(tc.want))
			for i, cs := range lims {
				require.Equal(t, []string{"serve", "--config", configFile}, cs.cmd)
				require.Len(t, cs.files, 1)
				require.Equal(t, configFile, cs.files[0].ContainerFilePath)
				data, err := io.ReadAll(cs.files[0].Reader)
				require.NoError(t, err)
				got, err := service.ParseConfig("container", data)
				require.NoError(t, err)
				require.Equal(t, p.declared.Tiers, got.Policy.Tiers)
				want := tc.want[i]
				want.Addr, want.Limiter, want.Store, want.Downstream = "0.0.0.0:8080", "token-bucket", "redis", "http://sink:9090/"
				want.Control, want.ControlToken = true, "secret"
				got.Policy = nil
				require.Equal(t, want, got)
			}
		})
	}
}

func TestPlanRefusesWhatDockerCannotStart(t *testing.T) {
	pol := policy.Default()
	for _, tc := range []struct {
		spec envs.Spec
		want string
	}{
		{envs.Spec{}, "no policy"},
		{envs.Spec{Policy: pol, Limiter: "token-bucket", Store: "memory"}, "keeps state in its Redis container"},
		{envs.Spec{Policy: pol, Limiter: "token-bucket", Instances: envs.MaxInstances + 1}, "at most"},
		{envs.Spec{Policy: pol, Limiter: "gcra", Regions: &envs.RegionSpec{Regions: 2}}, "regions run the reference token-bucket"},
		{envs.Spec{Policy: pol, Limiter: "token-bucket", RedisURL: "redis://127.0.0.1:6379"}, "runs its own Redis container"},
		{envs.Spec{Policy: pol, Limiter: "token-bucket", RedisCluster: 3}, "Redis Cluster"},
	} {
		_, err := Docker{}.plan(tc.spec)
		require.ErrorContains(t, err, tc.want)
	}
}
