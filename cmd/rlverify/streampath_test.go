package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/internal/bench"
)

// TestCheckStreamingPathMatchesInMemory: `check` of a history file whose
// selected checks all stream takes the streaming path and says so; the
// same history on standard input (which cannot be read twice) is judged in
// memory; the reports are byte for byte the same (JSON, text, HTML; the
// library's TestCheckPathsGiveOneDocument renders every format). A check
// that does not stream sends the file to the in-memory path, saying why.
// Not parallel: it reads the history from os.Stdin.
func TestCheckStreamingPathMatchesInMemory(t *testing.T) {
	dir := t.TempDir()
	pol := writeFile(t, "bench.yaml", bench.PolicyYAML)
	h := bench.Generate(2000, 30)
	for i := range h.Events {
		switch {
		case i%13 == 5:
			h.Events[i].Status, h.Events[i].Err = 0, "connection reset" // errors, within --max-error-rate
		case i%29 == 0:
			h.Events[i].XRemaining = "12" // more than the limit: token-bounds fails
		}
	}
	file := filepath.Join(dir, "h.jsonl")
	require.NoError(t, bench.WriteHistory(file, h))
	streamable := "oversell,token-bounds,retry-after,headers"
	for _, format := range []string{"json", "text", "html"} {
		args := []string{"check", "--policy", pol, "--checks", streamable, "--format", format, "--max-error-rate", "0.2", "--fail-on", "none"}
		streamed, stderr, code := rl(t, append(args, "--history", file)...)
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stderr, "rlverify: judged on the streaming path: every check judged streams: oversell, token-bounds, retry-after, headers\n")
		inMemory, stderr2, code := rlStdin(t, file, append(args, "--history", "-")...)
		require.Equal(t, 0, code, stderr2)
		require.Contains(t, stderr2, "rlverify: judged on the in-memory path: standard input cannot be read twice\n")
		require.Equal(t, inMemory, streamed, format)
		if format == "text" {
			require.Regexp(t, `(?m)^token-bounds\s+FAIL`, streamed)
		}
	}
	// delay streams only under a policy that declares no delay.
	delaying := writeFile(t, "delaying.yaml", bench.PolicyYAML+"delay:\n  max_wait: 600ms\n")
	_, stderr, _ := rl(t, "check", "--policy", delaying, "--checks", "oversell,delay", "--history", file, "--fail-on", "none")
	require.Contains(t, stderr, "rlverify: judged on the in-memory path: delay does not stream (streaming: "+strings.Join(checks.Streamable(), ", ")+"); delay streams only when the policy declares no delay (this one does)\n")
	// Without --checks every check is judged: on the streaming path, said.
	_, stderr, _ = rl(t, "check", "--policy", pol, "--history", file, "--fail-on", "none")
	require.Contains(t, stderr, "rlverify: judged on the streaming path: every check judged streams: "+strings.Join(checks.Names(), ", ")+"\n")
}

// rlStdin is rl with the file in on standard input.
func rlStdin(t *testing.T, in string, args ...string) (string, string, int) {
	t.Helper()
	f, err := os.Open(in)
	require.NoError(t, err)
	defer f.Close()
	old := os.Stdin
	os.Stdin = f
	defer func() { os.Stdin = old }()
	return rl(t, args...)
}

// TestAttackStreamingPath: the soak plan's checks all stream, so `attack`
// judges its own history on the streaming path and says so with check's
// line; its report is byte for byte the one `check` gives the same
// history on standard input (in memory). --checks naming one that does
// not stream judges in memory, saying why; a plan judging every check
// says nothing. Not parallel: it reads the history from os.Stdin.
func TestAttackStreamingPath(t *testing.T) {
	dir := t.TempDir()
	args := []string{"--format", "json", "--quiet", "--fail-on", "none"}
	streamed, stderr, code := rl(t, append([]string{"attack", "--plan", "soak", "--max-duration", "1s", "--out", dir}, args...)...)
	require.Equal(t, ExitPass, code, stderr)
	require.Contains(t, stderr, "rlverify: judged on the streaming path: every check judged streams: oversell, under-admission, token-bounds, retry-after, headers, isolation, downstream\n")
	file := filepath.Join(dir, "latest", "history.jsonl")
	inMemory, stderr, code := rlStdin(t, file, append([]string{"check", "--history", "-", "--checks", "oversell,under-admission,token-bounds,retry-after,headers,isolation,downstream"}, args...)...)
	require.Equal(t, ExitPass, code, stderr)
	require.Contains(t, stderr, "rlverify: judged on the in-memory path: standard input cannot be read twice\n")
	require.Equal(t, inMemory, streamed)

	_, stderr, code = rl(t, append([]string{"attack", "--plan", "soak", "--max-duration", "1s", "--checks", "oversell", "--threshold", "errors<100%", "--out", t.TempDir()}, args...)...)
	require.Equal(t, ExitPass, code, stderr)
	require.Contains(t, stderr, "rlverify: judged on the in-memory path: thresholds read the events in memory\n")
	_, stderr, code = rl(t, append([]string{"attack", "--plan", "concurrent-burst", "--out", t.TempDir()}, args...)...)
	require.Equal(t, ExitPass, code, stderr)
	require.Contains(t, stderr, "rlverify: judged on the streaming path: every check judged streams: ")
}
