package rlverify

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
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
			doc, wantDoc := reports.NewDocStream(&history.History{}, pol), reports.NewDocStream(&history.History{}, pol)
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
				sp.add(e, uint64(i)) // doc.Add, on the writer
				wantDoc.Add(e, uint64(i))
				want = append(want, wantDoc.Compact(e))
			}
			names, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Empty(t, names, "the spill's file is removed once open")
			require.False(t, sp.failed())
			require.Equal(t, wantDoc.Stats(), doc.Stats(), "the spill's writer hands every event to the document")
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
		var beside []uint64
		sp := newEventSpill(filepath.Join(t.TempDir(), "missing"), func(_ *history.Event, seq uint64) { beside = append(beside, seq) })
		sp.add(&history.Event{Key: "free-a", Status: 200}, 7)
		require.Equal(t, []uint64{7}, beside, "beside has the events all the same")
		require.True(t, sp.failed())
		require.ErrorContains(t, sp.replayEvents(nil, func(*history.Event, uint64) {}), "spill")
		sp.close()
	})
	t.Run("no directory, compact", func(t *testing.T) {
		doc := reports.NewDocStream(&history.History{}, pol)
		sp := newSpill(filepath.Join(t.TempDir(), "missing"), doc)
		sp.add(&history.Event{Key: "free-a", Status: 200}, 0)
		require.True(t, sp.failed())
		require.EqualValues(t, 1, doc.Stats().Admitted, "the document has the events all the same")
		require.ErrorContains(t, sp.replay(func(reports.Compact) {}), "spill")
		sp.close()
	})
}

// TestEventSpillReplaysWhatItKept: a spill of whole events gives back
// every event and its file position, in the order kept, across flushes,
// refills of a buffer smaller than a record, and batches of the reading
// goroutine; each replay reads from the start. What runs beside (on the
// writer, on the reader) has every event too, in the same order, by join
// and by the replay's end.
func TestEventSpillReplaysWhatItKept(t *testing.T) {
	for _, n := range []int{0, 1, relayBatch, 3*relayBatch + 7} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			dir := t.TempDir()
			type kept struct {
				e   history.Event
				seq uint64
			}
			var written []kept
			sp := newEventSpill(dir, func(e *history.Event, seq uint64) { written = append(written, kept{*e, seq}) })
			defer sp.close()
			require.NoError(t, sp.err)
			require.True(t, sp.keepsEvents())
			sp.flushAt = 1000
			sp.buf = make([]byte, 0, 100) // records longer than the buffer
			var want []kept
			keys := []string{"free-a", "free-b", "paid-c"}
			for i := range n {
				e := history.Event{T: history.TypeEvent, ID: uint64(i + 1), Key: keys[i%3], Phase: "rate", Instance: i % 4, Sent: int64(i) * 1e6, Recv: int64(i)*1e6 + int64(i%9), Status: []int{200, 429, 0, 503}[i%4]}
				if i%4 == 1 {
					e.RetryAfter = "1"
				}
				if i%97 == 0 {
					e.Body = strings.Repeat("x", 300)
				}
				seq := uint64(n - i) // out of file order
				sp.add(&e, seq)
				want = append(want, kept{e, seq})
			}
			names, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Empty(t, names, "the spill's file is removed once open")
			require.False(t, sp.failed())
			require.Equal(t, want, written, "beside the writer")
			for range 2 {
				var got, read []kept
				require.NoError(t, sp.replayEvents(func(e *history.Event, seq uint64) { read = append(read, kept{*e, seq}) },
					func(e *history.Event, seq uint64) { got = append(got, kept{*e, seq}) }))
				require.Equal(t, want, got)
				require.Equal(t, want, read, "beside the reader")
			}
			require.ErrorContains(t, sp.replay(func(reports.Compact) {}), "whole events")
		})
	}
}

// TestEventSpillStopsAtADamagedRecord: a record the spill cannot read
// back ends the replay with an error naming it, after the events before
// it.
func TestEventSpillStopsAtADamagedRecord(t *testing.T) {
	sp := newEventSpill(t.TempDir(), nil)
	defer sp.close()
	for i := range 3000 {
		sp.add(&history.Event{T: history.TypeEvent, ID: uint64(i), Key: "free-a", Status: 200}, uint64(i))
	}
	require.False(t, sp.failed())
	// The 2,001st record's mask names no string field.
	off := int64(0)
	buf := make([]byte, 16)
	for range 2000 {
		_, err := sp.f.ReadAt(buf, off)
		require.NoError(t, err)
		size, k := binary.Uvarint(buf)
		off += int64(k) + int64(size)
	}
	_, err := sp.f.WriteAt([]byte{0xff, 0xff, 0xff, 0xff, 0x0f}, off+1)
	require.NoError(t, err)
	var got int
	err = sp.replayEvents(nil, func(*history.Event, uint64) { got++ })
	require.ErrorContains(t, err, "record 2001 of 3000")
	require.Equal(t, 2000, got)
}
