package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// serve --config reads the whole configuration (what the docker
// environment writes); the same checks as the flags apply to it, and a
// flag beside it is refused rather than silently dropped.
func TestServeConfigFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		file := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(file, []byte(text), 0o644))
		return file
	}
	open := write("open.yaml", "addr: 0.0.0.0:0\nlimiter: token-bucket\ncontrol: true\n")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"flag beside it", []string{"--config", open, "--addr", "127.0.0.1:0"}, "--addr does not go with it"},
		{"control beyond loopback", []string{"--config", open}, "give --control-token TOKEN"},
		{"unknown field", []string{"--config", write("typo.yaml", "addr: 127.0.0.1:0\nlimiter: token-bucket\ncontrl: true\n")}, "field contrl not found"},
		{"missing file", []string{"--config", filepath.Join(dir, "none.yaml")}, "none.yaml"},
		{"redis store without redis", []string{"--config", write("redis.yaml", "addr: 127.0.0.1:0\nlimiter: token-bucket\nstore: redis\n")}, "--redis is required by --store redis"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := rl(t, append([]string{"serve"}, tc.args...)...)
			require.Equal(t, ExitUsage, code, stderr)
			require.Contains(t, stderr, tc.want)
		})
	}
}
