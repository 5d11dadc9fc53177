package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify"
)

// latestTarget is the folder DIR/latest names (symlink or file).
func latestTarget(t *testing.T, dir string) string {
	t.Helper()
	l := filepath.Join(dir, rlverify.LatestName)
	if target, err := os.Readlink(l); err == nil {
		return target
	}
	b, err := os.ReadFile(l)
	require.NoError(t, err)
	return string(b[:len(b)-1])
}

func TestEachRunWritesItsOwnFolder(t *testing.T) {
	dir := t.TempDir()
	_, stderr, code := rl(t, "attack", "--plan", "concurrent-burst", "--out", dir, "--quiet", "--format", "text,md")
	require.Equal(t, ExitPass, code, stderr)
	first := latestTarget(t, dir)
	_, stderr, code = rl(t, "attack", "--plan", "concurrent-burst", "--limiter", "faulty/racy-token-bucket", "--out", dir, "--quiet")
	require.Equal(t, ExitFail, code, stderr)
	second := latestTarget(t, dir)
	require.NotEqual(t, first, second, "the rerun got a folder of its own")
	for _, run := range []string{first, second} {
		for _, f := range []string{"history.jsonl", "result.json", "report.txt"} {
			_, err := os.Stat(filepath.Join(dir, run, f))
			require.NoError(t, err, "%s/%s", run, f)
		}
	}
	_, err := os.Stat(filepath.Join(dir, second, "report.md"))
	require.True(t, errors.Is(err, os.ErrNotExist), "no report of the first run beside the second's result")
	first1, _ := os.ReadFile(filepath.Join(dir, first, "report.txt"))
	require.Contains(t, string(first1), "verdict: PASS", "the first run's report is left alone")
	latest, _ := os.ReadFile(filepath.Join(dir, "latest", "report.txt"))
	require.Contains(t, string(latest), "verdict: FAIL")
	h, err := os.ReadFile(filepath.Join(dir, second, "history.jsonl"))
	require.NoError(t, err)
	require.Contains(t, string(h), `"id":"`+second+`"`, "the folder is named after the run id in the history")
}

func TestAFixedRunIDIsNotOverwrittenWithoutForce(t *testing.T) {
	dir := t.TempDir()
	args := []string{"attack", "--plan", "concurrent-burst", "--out", dir, "--quiet", "--run-id", "nightly"}
	_, stderr, code := rl(t, args...)
	require.Equal(t, ExitPass, code, stderr)
	require.Equal(t, "nightly", latestTarget(t, dir))
	_, stderr, code = rl(t, args...)
	require.Equal(t, ExitUsage, code)
	require.Contains(t, stderr, "already holds the files of a run with id nightly")
	_, stderr, code = rl(t, append(args, "--force")...)
	require.Equal(t, ExitPass, code, stderr)
	_, stderr, code = rl(t, "attack", "--plan", "concurrent-burst", "--out", dir, "--quiet", "--run-id", "../x")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, stderr, `--run-id "../x" cannot name a folder`)
}

func TestAuditCompareAndCheckWriteRunFolders(t *testing.T) {
	dir := t.TempDir()
	_, stderr, code := rl(t, "attack", "--plan", "concurrent-burst", "--out", filepath.Join(dir, "a"), "--quiet")
	require.Equal(t, ExitPass, code, stderr)
	hist := filepath.Join(dir, "a", "latest", "history.jsonl")
	for i := 0; i < 2; i++ {
		_, stderr, code = rl(t, "check", "--history", hist, "--out", filepath.Join(dir, "c"), "--format", "md")
		require.Equal(t, ExitPass, code, stderr)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "c"))
	require.NoError(t, err)
	require.Len(t, entries, 3, "two check folders and latest")
	_, err = os.Stat(filepath.Join(dir, "c", "latest", "report.md"))
	require.NoError(t, err)

	_, stderr, code = rl(t, "compare", "--plan", "concurrent-burst", "--limiter", "token-bucket", "--limiter", "gcra", "--out", filepath.Join(dir, "cmp"), "--format", "json")
	require.Equal(t, ExitPass, code, stderr)
	for _, f := range []string{"comparison.json", "token-bucket/history.jsonl", "gcra/result.json"} {
		_, err := os.Stat(filepath.Join(dir, "cmp", "latest", f))
		require.NoError(t, err, f)
	}
}
