package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 26, item 13: numbers past what the run can hold are usage errors
// naming the value and the flag, never a crash or a wrapped value.
func TestReliabilityOverflowsAreUsageErrors(t *testing.T) {
	hist := filepath.Join(t.TempDir(), "h.jsonl")
	require.NoError(t, os.WriteFile(hist, sampleHistory(t), 0o600))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		// Was "fatal error: stack overflow" in human.Duration(MinInt64).
		{"latency threshold of 2^63-1 ns", []string{"check", "--history", hist, "--threshold", "latency.p99<9223372036854775807ns"},
			`threshold "latency.p99<9223372036854775807ns": p99: "9223372036854775807ns": want a duration such as 50ms or 1.5s, at most 24h0m0s`},
		{"latency threshold of 1e308 ms", []string{"check", "--history", hist, "--threshold", "latency.p99<1e308"}, "at most 24h0m0s"},
		// Was accepted: every comparison with NaN is false.
		{"NaN%", []string{"check", "--history", hist, "--threshold", "errors<NaN%"}, `threshold "errors<NaN%": share: "NaN%": want a percentage in 0 … 100%`},
		{"NaN rate", []string{"check", "--history", hist, "--threshold", "admitted.rate<NaN/s"}, `"NaN/s": want a rate`},
		// Was accepted and overflowed the interval arithmetic.
		{"--clock-skew 2562047h", []string{"check", "--history", hist, "--clock-skew", "2562047h"}, "--clock-skew 2562047h0m0s: want at most 1h0m0s"},
		// Was accepted: net/http's own margin overflowed and every answer became an error.
		{"--max-header-bytes 2^63-1", []string{"attack", "--plan", "concurrent-burst", "--out", t.TempDir(), "--max-header-bytes", "9223372036854775807"},
			"--max-header-bytes 9223372036854775807, --max-headers 100: want at most 1073741824 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := rl(t, tc.args...)
			require.Equal(t, ExitUsage, code, stderr)
			require.Contains(t, stderr, tc.want)
		})
	}
}
