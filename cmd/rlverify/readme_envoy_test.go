package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/internal/envtest"
)

// TestReadmeEnvoyRateLimit runs "Verify your Envoy rate-limit service" on
// envoyproxy/ratelimit started as the README starts it (two instances, one
// Redis, examples/envoy-ratelimit/config.yaml), and what step 2 promises
// for a descriptor the service has no rule for.
func TestReadmeEnvoyRateLimit(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	cfg, err := os.ReadFile(filepath.Join(root, "examples", "envoy-ratelimit", "config.yaml"))
	require.NoError(t, err)
	rl := envtest.StartEnvoyRateLimit(t, string(cfg), 2)
	replace := []string{"grpc://127.0.0.1:8001", rl.Targets[0], "grpc://127.0.0.1:8011", rl.Targets[1],
		"examples/envoy-ratelimit/", filepath.Join(root, "examples", "envoy-ratelimit") + "/"}
	const test = "TestReadmeEnvoyRateLimit"
	t.Run("reach it once", func(t *testing.T) {
		out, stderr, code := runReadme(t, t.TempDir(), readmeArgs(t, readmeRow(t, test, "rlverify attack --plan concurrent-burst"), replace...)...)
		require.Equal(t, ExitPass, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
		requireVerdict(t, "PASS", out, stderr)
		require.Regexp(t, `(?m)^\s*headers\s+PASS\s+\d+ responses' X-RateLimit-\* valid`, out)
	})
	t.Run("no rule matches", func(t *testing.T) {
		dir := t.TempDir()
		pol, err := os.ReadFile(filepath.Join(root, "examples", "envoy-ratelimit", "policy.yaml"))
		require.NoError(t, err)
		// The descriptor's first entry renamed: the service has no rule
		// for user=KEY, plan=TIER.
		old := `{key: tenant, value: "{key}"}`
		require.Contains(t, string(pol), old)
		bad := strings.Replace(string(pol), old, `{key: user, value: "{key}"}`, 1)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "typo.yaml"), []byte(bad), 0o644))
		args := readmeArgs(t, readmeRow(t, test, "rlverify attack --plan concurrent-burst"), replace...)
		args[len(args)-1] = "typo.yaml"
		out, stderr, code := runReadme(t, dir, args...)
		require.Equal(t, ExitRun, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
		require.Contains(t, stderr, "unlimited: no descriptor matched")
		require.NotRegexp(t, `(?m)^verdict:?\s+PASS`, out)
	})
	t.Run("audit every instance", func(t *testing.T) {
		args := readmeArgs(t, readmeRow(t, test, "rlverify audit "), replace...)
		// Three plans keep it to seconds: a burst, the windows' edge, and
		// one key spread over both instances.
		args = append(args, "--plans", "concurrent-burst,boundary-burst,multi-instance")
		out, stderr, code := runReadme(t, t.TempDir(), args...)
		require.Equal(t, ExitPass, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
		requireVerdict(t, "PASS", out, stderr)
		require.Regexp(t, `(?m)^\s*instances\s+PASS`, out)
	})
	t.Run("its windows", func(t *testing.T) {
		out, stderr, code := runReadme(t, t.TempDir(), readmeArgs(t, readmeRow(t, test, "rlverify attack --plan boundary-burst"), replace...)...)
		require.Equal(t, ExitFail, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
		requireVerdict(t, "FAIL", out, stderr)
		require.Regexp(t, `(?m)^\s*oversell\s+FAIL`, out)
	})
}
