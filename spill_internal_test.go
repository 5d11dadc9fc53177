package rlverify

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/internal/bench"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/reports"
)

// TestSpillReplaysWhatItKept: the spill gives back every event's Compact
// form in the order kept, across its buffer's flushes and with values of
// any sign and size; its file is gone once made (or at close), and a spill
// that cannot be made says so before replay.
func TestSpillReplaysWhatItKept(t *testing.T) {
	pol, err := policy.Parse("bench", []byte(bench.PolicyYAML))
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		n    int
	}{
		{"none", 0},
		{"one", 1},
		{"across flushes", 5000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			doc := reports.NewDocStream(&history.History{}, pol)
			sp := newSpill(dir, doc)
			defer sp.close()
			require.NoError(t, sp.err)
			sp.flushAt = 1000 // a few records: many flushes, records cut by refills
			var want []reports.Compact
			keys := []string{"free-a", "free-b", "paid-c"}
			sent := int64(-5)
			for i := range tc.n {
				e := &history.Event{ID: uint64(i + 1), Key: keys[i%3], Instance: i%4 - 1, Sent: sent, Recv: sent + int64(i%9) - 3, Status: []int{200, 429, 0, 503}[i%4]}
				if i == tc.n-1 {
					e.Sent, e.Recv = math.MaxInt64/2, math.MinInt64/2 // far apart
				}
				sent += int64(i % 1000)
				doc.Add(e, uint64(i))
				sp.add(e, uint64(i))
				want = append(want, doc.Compact(e))
			}
			names, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Empty(t, names, "the spill's file is removed once open")
			require.False(t, sp.failed())
			var got []reports.Compact
			require.NoError(t, sp.replay(func(c reports.Compact) { got = append(got, c) }))
			require.Equal(t, want, got)
			if tc.n > 2 {
				require.Equal(t, int32(2), got[2].Key)
				require.Equal(t, history.Rejected, got[1].Outcome)
			}
		})
	}
	t.Run("no directory", func(t *testing.T) {
		doc := reports.NewDocStream(&history.History{}, pol)
		sp := newSpill(filepath.Join(t.TempDir(), "missing"), doc)
		sp.add(&history.Event{Key: "free-a", Status: 200}, 0)
		require.True(t, sp.failed())
		require.ErrorContains(t, sp.replay(func(reports.Compact) {}), "spill")
		sp.close()
	})
}
