package service

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/policy"
)

func TestConfigRoundTrip(t *testing.T) {
	pol := policy.Default()
	for _, c := range []Config{
		{Addr: "0.0.0.0:8080", Limiter: "token-bucket"},
		{Addr: "0.0.0.0:8080", Limiter: "gcra", Store: "redis", Redis: "redis-1:6379", RedisLatency: policy.Duration(10 * time.Millisecond),
			ClockOffset: policy.Duration(-2 * time.Second), RegionMode: RegionStrict, Downstream: "http://sink:9090/",
			Control: true, ControlToken: "t0k3n", Policy: pol},
	} {
		data, err := c.Marshal()
		require.NoError(t, err)
		file := filepath.Join(t.TempDir(), "serve.yaml")
		require.NoError(t, os.WriteFile(file, data, 0o644))
		back, err := ReadConfig(file)
		require.NoError(t, err)
		if c.Policy != nil {
			require.Equal(t, c.Policy.Tiers, back.Policy.Tiers)
			require.Equal(t, c.Policy.Failure, back.Policy.Failure)
			c.Policy, back.Policy = nil, nil
		}
		require.Equal(t, c, back)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"unknown field", "addr: a:1\nlimiter: token-bucket\nlimitr: x\n", "field limitr not found"},
		{"no limiter", "addr: a:1\n", "addr and limiter are required"},
		{"bad duration", "addr: a:1\nlimiter: token-bucket\nclock_offset: soon\n", "soon"},
		{"bad policy", "addr: a:1\nlimiter: token-bucket\npolicy: {tiers: []}\n", "policy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig("c.yaml", []byte(tc.text))
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, "c.yaml")
		})
	}
}
