package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/attacks"
)

// TestBuiltinPlansPassOnTheReferenceLimiter runs every built-in plan against
// the reference token bucket (Redis where the plan needs it) and expects every
// check to pass.
func TestBuiltinPlansPassOnTheReferenceLimiter(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every built-in plan (about a minute)")
	}
	for _, p := range attacks.Builtins() {
		t.Run(p.Name, func(t *testing.T) {
			args := []string{"attack", "--plan", p.Name, "--out", t.TempDir(), "--quiet", "--format", "text"}
			if p.NeedsRedis() {
				args = append(args, "--store", "redis")
			}
			if p.Name == "soak" {
				args = append(args, "--max-duration", "3s")
			}
			out, stderr, code := rl(t, args...)
			require.Equal(t, ExitPass, code, "%s\n%s", out, stderr)
			require.True(t, strings.Contains(out, "verdict: PASS"), out)
		})
	}
}

func TestPlansListAndShow(t *testing.T) {
	out, _, code := rl(t, "plans")
	require.Equal(t, 0, code)
	for _, p := range attacks.Builtins() {
		require.Contains(t, out, p.Name)
	}
	out, _, code = rl(t, "plans", "show", "boundary-burst")
	require.Equal(t, 0, code)
	require.Contains(t, out, "kind: boundary")
	_, stderr, code := rl(t, "plans", "show", "nope")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, stderr, "no built-in plan")
}

func TestLimitersListsEveryAlgorithmStoreAndFaultyVariant(t *testing.T) {
	out, _, code := rl(t, "limiters")
	require.Equal(t, 0, code)
	for _, alg := range []string{"token-bucket", "gcra", "fixed-window", "sliding-log", "sliding-counter"} {
		require.Regexp(t, "(?m)^"+alg+`\s+\S+\s+memory`, out)
		require.Regexp(t, "(?m)^"+alg+`\s+\S+\s+redis`, out)
	}
	for _, f := range []string{"faulty/racy-token-bucket", "faulty/unweighted-fixed-window", "faulty/uncapped-refill",
		"faulty/deduct-on-reject", "faulty/local-only", "faulty/instance-clock", "faulty/no-retry-after",
		"faulty/short-retry-after", "faulty/trust-xff"} {
		require.Contains(t, out, f)
	}
	// envoyproxy/ratelimit: fixed windows in a shared Redis, the free
	// tier's (N=10, W=2s) rounded to its unit; built by a script, and
	// the listing says which one when it is not.
	require.Regexp(t, `(?m)^envoy/ratelimit\s+fixed-window\s+redis\s+N=10 W=2s\s+envoyproxy/ratelimit`, out)
	t.Setenv("RLVERIFY_ENVOY_RATELIMIT", filepath.Join(t.TempDir(), "none"))
	out, _, code = rl(t, "limiters")
	require.Equal(t, 0, code)
	require.Regexp(t, `(?m)^envoy/ratelimit\s.*NOT INSTALLED: bash scripts/envoy-ratelimit\.sh`, out)
}

func TestPlansValidateAndShowFiles(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	tierless := filepath.Join(dir, "tierless.yaml")
	require.NoError(t, os.WriteFile(good, []byte("name: good\nthresholds: [errors<1%]\nphases:\n  - kind: burst\n    key: free-a\n    requests: 5\n"), 0o644))
	require.NoError(t, os.WriteFile(bad, []byte("name: bad\nphases:\n  - kind: burst\n    key: free-a\n    requests: 5\n    rate: 5/s\n"), 0o644))
	require.NoError(t, os.WriteFile(tierless, []byte("name: t\nphases:\n  - kind: burst\n    key: gold-a\n    requests: 5\n"), 0o644))

	out, stderr, code := rl(t, "plans", "validate", good, "concurrent-burst")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, good+": ok — plan good, 1 phase(s), needs nothing, policy builtin:default")
	require.Contains(t, out, "concurrent-burst: ok — plan concurrent-burst")

	out, stderr, code = rl(t, "plans", "validate", good, bad)
	require.Equal(t, ExitUsage, code)
	require.Contains(t, out, good+": ok")
	require.Contains(t, stderr, bad+":6: phases.0.rate: field \"rate\" does not apply to a burst phase")
	require.Contains(t, stderr, "1 of 2 plan(s) invalid")

	strict := filepath.Join(dir, "strict.yaml")
	require.NoError(t, os.WriteFile(strict, []byte("name: strict\ntiers:\n  - name: free\n    key_prefix: free-\n    limits:\n      - algorithm: token-bucket\n        capacity: 10\n        rate: 5/s\n"), 0o644))
	_, stderr, code = rl(t, "plans", "validate", "--policy", strict, tierless)
	require.Equal(t, ExitUsage, code)
	require.Contains(t, stderr, `key "gold-a" matches no tier of policy`)

	out, _, code = rl(t, "plans", "show", good)
	require.Equal(t, 0, code)
	b, err := os.ReadFile(good)
	require.NoError(t, err)
	require.Equal(t, string(b), out)
	_, stderr, code = rl(t, "plans", "show", bad)
	require.Equal(t, ExitUsage, code)
	require.Contains(t, stderr, bad+":6:")
}
