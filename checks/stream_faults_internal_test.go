package checks

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// TestFailStreamStateIsBounded: the streamed fail-mode keeps the events
// its fault windows read and nothing else — none for a run without
// faults, a run without calibrate phases keeps no event for calibration,
// and regions keeps no count per key without region data.
func TestFailStreamStateIsBounded(t *testing.T) {
	sec := int64(time.Second)
	p := policy.Default()
	for _, tc := range []struct {
		name   string
		faults []history.Fault
		env    string
		kept   int
	}{
		{"no faults", nil, "", 0},
		{"one window", []history.Fault{{Kind: "store-down", Start: 60 * sec, End: 62 * sec}}, "", 20},
		{"a window and its reference spans (external)", []history.Fault{{Kind: "store-down", Start: 60 * sec, End: 62 * sec}}, "external", 60},
		{"a window that never ended", []history.Fault{{Kind: "store-down", Start: 90 * sec}}, "", 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &history.History{Run: history.Run{Env: tc.env}, Faults: tc.faults}
			s, err := NewStreamer(rec, p, Options{Only: []string{"fail-mode", CalibrationCheck, "regions"}})
			require.NoError(t, err)
			// 10 requests a second for 100 s, each answered in 1 ms.
			for i := range 1000 {
				e := history.Event{ID: uint64(i + 1), Key: "free-a", Sent: int64(i) * sec / 10, Status: 200, Phase: "steady"}
				e.Recv = e.Sent + int64(time.Millisecond)
				if i >= 500 {
					e.XLimit, e.XRemaining = "10", "3"
				}
				s.Add(&e, uint64(i))
			}
			require.Len(t, s.fail.kept, tc.kept)
			// The first 500 answers carried no header: each might be a
			// failure outside the faults, should a later answer carry one
			// (one did): a count, a span and the first ids are kept.
			require.Len(t, s.fail.keys, 1)
			require.Equal(t, 500, s.fail.keys["free-a"].open.n)
			require.Len(t, s.fail.keys["free-a"].open.first.recs, MaxIDs+1)
			require.Nil(t, s.cal.kept)
			require.Nil(t, s.keys["free-a"].regions)
		})
	}
}
