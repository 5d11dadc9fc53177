package rlverify

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/internal/bench"
	"github.com/rlverify/rlverify/policy"
)

// TestJudgeStreamLeanMatchesTheDefaultStream (issue 29: the attack stays
// flat): judged with the lean stream and the reorder its writer measured,
// a history gives the document the default stream gives; a file further
// out of order than the bound it is given (edited after the run) is
// judged again with the default stream, with the same document, rather
// than failing or falling back to memory.
func TestJudgeStreamLeanMatchesTheDefaultStream(t *testing.T) {
	pol, err := policy.Parse("bench", []byte(bench.PolicyYAML))
	require.NoError(t, err)
	h := bench.Generate(9_000, 20)
	// Written in completion order: every seventh request answers 40ms late.
	for i := range h.Events {
		if i%7 == 0 {
			h.Events[i].Recv += int64(40 * time.Millisecond)
		}
	}
	sort.SliceStable(h.Events, func(i, j int) bool { return h.Events[i].Recv < h.Events[j].Recv })
	file := filepath.Join(t.TempDir(), "h.jsonl")
	var buf bytes.Buffer
	w := history.NewWriter(&buf)
	require.NoError(t, w.WriteRun(h.Run))
	for i := range h.Events {
		require.NoError(t, w.WriteEvent(&h.Events[i]))
	}
	require.NoError(t, w.WriteEnd(history.End{Requests: int64(len(h.Events))}))
	require.NoError(t, w.Close())
	require.NoError(t, os.WriteFile(file, buf.Bytes(), 0o600))
	measured := w.Reorder()
	require.Greater(t, measured, 30*time.Millisecond, "the writer measures how far out of order it wrote")

	o := CheckOptions{Histories: []string{file}, Policy: pol, Checks: checks.Options{Only: checks.Streamable()}}
	path, _, rec, names := choosePath(o)
	require.Equal(t, Streaming, path)
	want, err := judgeStream(o, rec, names, history.StreamOptions{})
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		reorder time.Duration
	}{
		{"the measured reorder", measured},
		{"a bound the file breaks", time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, reached, err := judgeStreamLean(o, rec, names, tc.reorder)
			require.NoError(t, err)
			require.Equal(t, want.Results, got.Results)
			require.Equal(t, want.Document, got.Document)
			require.Equal(t, len(h.Events), reached.events)
		})
	}
	_, err = judgeStream(o, rec, names, history.LeanStreamOptions(time.Millisecond))
	require.ErrorIs(t, err, errReorder, "the test's file is out of order beyond 1ms")
}
