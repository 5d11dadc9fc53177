package main

import (
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
}
