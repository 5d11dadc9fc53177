package bench

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/policy"
)

// TestGeneratedHistoryPasses: the synthetic correct bucket must pass every
// check, or the benchmark would time failure paths.
func TestGeneratedHistoryPasses(t *testing.T) {
	p, err := policy.Parse("bench", []byte(PolicyYAML))
	require.NoError(t, err)
	for _, keys := range []int{1, 100, 10_000} {
		h := Generate(20_000, keys)
		for _, r := range checks.Run(h, p, checks.Options{}) {
			require.NotEqual(t, checks.Fail, r.Verdict, "keys=%d %s: %s %+v", keys, r.Name, r.Summary, r.Evidence)
		}
	}
}
