package envs

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// One syntax for a Redis everywhere: redis://HOST:PORT[/DB] or HOST:PORT.
func TestParseRedis(t *testing.T) {
	for _, tc := range []struct {
		in, url, addr string
	}{
		{"redis://127.0.0.1:6379", "redis://127.0.0.1:6379", "127.0.0.1:6379"},
		{"127.0.0.1:6380", "redis://127.0.0.1:6380", "127.0.0.1:6380"},
		{"redis://redis:6379/2", "redis://redis:6379/2", "redis:6379"},
	} {
		u, a, err := ParseRedis(tc.in)
		require.NoError(t, err)
		require.Equal(t, tc.url, u)
		require.Equal(t, tc.addr, a)
	}
	for _, bad := range []string{"localhost", "http://x:1", "redis://"} {
		_, _, err := ParseRedis(bad)
		require.Error(t, err, bad)
	}
}
