package history

import (
	"bufio"
	"bytes"
	"cmp"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// completionOrdered writes n events of keys keys as the engine does: each
// line when its request completes (by Recv), latency up to maxLat, a fault
// and a phase record among them and an end record with its digest; and
// the writer's Reorder.
func completionOrdered(t *testing.T, n, keys int, maxLat int64, seed uint64) ([]byte, time.Duration) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	evs := make([]Event, n)
	for i := range evs {
		sent := int64(i/2) * 1000 // pairs sent at once: ties ordered by recv
		evs[i] = Event{ID: uint64(i + 1), Key: "free-k" + strconv.Itoa(rng.IntN(keys)), Instance: rng.IntN(2), Phase: "rate",
			Intended: sent, Sent: sent, Recv: sent + rng.Int64N(maxLat+1), Status: []int{200, 429, 200, 0}[rng.IntN(4)]}
		if evs[i].Status == 429 {
			evs[i].RetryAfter = "1"
		}
		if evs[i].Status == 0 {
			evs[i].Err = "timeout"
		}
	}
	slices.SortStableFunc(evs, func(a, b Event) int { return cmp.Compare(a.Recv, b.Recv) })
	var buf bytes.Buffer
	w := NewWriter(&buf)
	require.NoError(t, w.WriteRun(Run{ID: "s", Start: time.Unix(1_700_000_000, 0)}))
	for i := range evs {
		if i == n/2 {
			require.NoError(t, w.WriteFault(Fault{Kind: "store-down", Start: 10, End: 20}))
			require.NoError(t, w.WritePhase(Phase{Name: "rate", Kind: "rate", Requests: int64(n)}))
		}
		require.NoError(t, w.WriteEvent(&evs[i]))
	}
	require.NoError(t, w.WriteEnd(End{Elapsed: int64(n) * 1000, Requests: int64(n)}))
	require.NoError(t, w.Flush())
	return buf.Bytes(), w.Reorder()
}

// smallWindows makes the stream's windows small (tests only), so that
// reordering crosses windows.
func smallWindows(t *testing.T) {
	cb, wl := chunkBytes, maxWindowLines
	t.Cleanup(func() { chunkBytes, maxWindowLines = cb, wl })
	chunkBytes, maxWindowLines = 512, 16
}

// drain reads st to its end, the events in the order given and the most
// held back at once.
func drain(st *Stream) (evs []Event, held int) {
	for st.Next() {
		held = max(held, st.Held()+1)
		evs = append(evs, *st.Event())
	}
	return evs, held
}

// TestStreamMatchesRead: a Stream gives Read's events ordered by send
// time (ties by receive time, then in file order), and Read's history but the events, holding
// back only the events within the reorder bound.
func TestStreamMatchesRead(t *testing.T) {
	smallWindows(t)
	for _, tc := range []struct {
		name     string
		n, keys  int
		maxLat   int64
		bound    time.Duration
		wantHeld int // at most
	}{
		// A window of 16 lines and the events sent within the bound and the
		// latency (two a microsecond).
		{"one key, latency within the bound", 5000, 1, 50_000, 100 * time.Microsecond, 16 + 300},
		{"many keys, latency within the bound", 5000, 300, 50_000, 100 * time.Microsecond, 16 + 300},
		{"default bound", 3000, 7, 2_000_000, 0, 3000},
		{"no reordering needed", 2000, 3, 0, time.Nanosecond, 16 + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, _ := completionOrdered(t, tc.n, tc.keys, tc.maxLat, uint64(tc.n))
			want, err := Read("h.jsonl", bytes.NewReader(data))
			require.NoError(t, err)
			require.Equal(t, Intact, want.Integrity)
			wantEvs := slices.Clone(want.Events)
			slices.SortStableFunc(wantEvs, func(a, b Event) int { return cmp.Or(cmp.Compare(a.Sent, b.Sent), cmp.Compare(a.Recv, b.Recv)) })

			st := NewStream("h.jsonl", bytes.NewReader(data), StreamOptions{ReorderBound: tc.bound})
			got, held := drain(st)
			require.NoError(t, st.Err())
			require.Equal(t, wantEvs, got)
			require.LessOrEqual(t, held, tc.wantHeld)
			require.EqualValues(t, tc.n, st.Events())
			rest := st.History()
			require.NotNil(t, rest)
			want.Events = nil
			require.Equal(t, want, rest)

			recs, n, err := ReadRecords("h.jsonl", bytes.NewReader(data))
			require.NoError(t, err)
			require.EqualValues(t, tc.n, n)
			require.Equal(t, want, recs)

			// ScanRecords: the same records, without the digest's word.
			scanned, n, err := ScanRecords("h.jsonl", bytes.NewReader(data))
			require.NoError(t, err)
			require.EqualValues(t, tc.n, n)
			require.Empty(t, scanned.Integrity)
			scanned.Integrity = want.Integrity
			require.Equal(t, want, scanned)
		})
	}
}

// TestStreamWithinTheWritersReorder: a stream bounded just above the
// Reorder its writer measured (Reorder()+1) gives the events in the order
// the default stream gives them, on lean windows too, holding back only
// the events sent within that bound; the writer's measure is exact.
func TestStreamWithinTheWritersReorder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		n, keys int
		maxLat  int64
	}{
		{"answers within 2µs", 4000, 3, 2_000},
		{"answers within 300µs", 4000, 50, 300_000},
		{"in send order", 3000, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, reorder := completionOrdered(t, tc.n, tc.keys, tc.maxLat, uint64(tc.n)+7)
			require.LessOrEqual(t, reorder, time.Duration(tc.maxLat))
			want, _ := drain(NewStream("h.jsonl", bytes.NewReader(data), StreamOptions{}))
			for _, o := range []StreamOptions{
				{ReorderBound: reorder + 1},
				LeanStreamOptions(reorder + 1),
				{ReorderBound: reorder + 1, Decoders: 3, ChunkBytes: 700, WindowLines: 9},
			} {
				st := NewStream("h.jsonl", bytes.NewReader(data), o)
				got, held := drain(st)
				require.NoError(t, st.Err(), "%+v", o)
				require.Equal(t, want, got, "%+v", o)
				// A window's lines, and the events sent within the bound:
				// two every µs.
				lines := o.WindowLines
				if lines == 0 {
					lines = maxWindowLines
				}
				require.LessOrEqual(t, held, lines+2*int(reorder/time.Microsecond)+2, "%+v", o)
			}
			// The measure is exact: the most an event's send time is before
			// one written ahead of it, in the file as Read gives it.
			h, err := Read("h.jsonl", bytes.NewReader(data))
			require.NoError(t, err)
			var latest, behind int64
			for i, e := range h.Events {
				if i == 0 || e.Sent > latest {
					latest = e.Sent
				}
				behind = max(behind, latest-e.Sent)
			}
			require.Equal(t, time.Duration(behind), reorder)
		})
	}
}

// TestStreamRefusesBeyondItsBound: an event further out of send order
// than the bound ends the read with a ReorderError naming it.
func TestStreamRefusesBeyondItsBound(t *testing.T) {
	smallWindows(t)
	data, _ := completionOrdered(t, 2000, 5, 500_000, 3)
	st := NewStream("h.jsonl", bytes.NewReader(data), StreamOptions{ReorderBound: 10 * time.Microsecond})
	drain(st)
	var re *ReorderError
	require.ErrorAs(t, st.Err(), &re)
	require.Greater(t, re.Passed, re.Sent)
	require.Contains(t, re.Error(), "h.jsonl:")
	require.Contains(t, re.Error(), "reorder bound 10µs")
	require.Nil(t, st.History())
}

// TestStreamBadInput: the stream fails where Read fails, with Read's
// error, and tolerates a cut last line as Read does.
func TestStreamBadInput(t *testing.T) {
	smallWindows(t)
	run := `{"t":"run","version":1,"id":"x","start":"2026-01-01T00:00:00Z"}`
	ev := func(id, sent int) string {
		return `{"t":"e","id":` + strconv.Itoa(id) + `,"key":"k","inst":0,"phase":"p","intended":0,"sent":` + strconv.Itoa(sent) + `,"recv":` + strconv.Itoa(sent+5) + `,"status":200}`
	}
	for _, tc := range []struct {
		name, data string
		cut        bool
	}{
		{"bad line in the middle", strings.Join([]string{run, ev(1, 1), `{"t":"e","id":2,`, ev(3, 3)}, "\n"), false},
		{"cut last line", strings.Join([]string{run, ev(1, 1), ev(2, 2), `{"t":"e","id":3,"ke`}, "\n"), true},
		{"no header", strings.Join([]string{ev(1, 1), ev(2, 2)}, "\n"), false},
		{"duplicate ids", strings.Join([]string{run, ev(1, 1), ev(1, 2)}, "\n"), false},
		{"many duplicate ids", strings.Join([]string{run, ev(1, 1), ev(1, 2), ev(2, 3), ev(2, 4), ev(2, 5), ev(3, 6), ev(3, 7), ev(4, 8), ev(4, 9), ev(5, 10), ev(5, 11)}, "\n"), false},
		{"recv before sent", strings.Join([]string{run, `{"t":"e","id":1,"key":"k","inst":0,"phase":"p","intended":0,"sent":9,"recv":2,"status":200}`}, "\n"), false},
		{"empty", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, wantErr := Read("h.jsonl", strings.NewReader(tc.data))
			st := NewStream("h.jsonl", strings.NewReader(tc.data), StreamOptions{})
			got, _ := drain(st)
			if wantErr != nil {
				require.EqualError(t, st.Err(), wantErr.Error())
				return
			}
			require.NoError(t, st.Err())
			require.Equal(t, tc.cut, st.History().Truncated)
			require.Equal(t, want.Events, got)
		})
	}
}

// TestStreamClose: a stream abandoned before its end stops reading.
func TestStreamClose(t *testing.T) {
	smallWindows(t)
	data, _ := completionOrdered(t, 3000, 2, 1000, 5)
	st := NewStream("h.jsonl", bytes.NewReader(data), StreamOptions{ReorderBound: 2 * time.Microsecond})
	require.True(t, st.Next())
	st.Close()
	st.Close()
	_, open := <-st.batches
	require.False(t, open, "the reading goroutine has ended")
	require.False(t, st.Next())
	require.NoError(t, st.Err())
	require.Nil(t, st.History())
}

// TestStreamLineTooLong: a line longer than any the writer writes ends the
// read, as it ends Read's.
func TestStreamLineTooLong(t *testing.T) {
	data := `{"t":"run","version":1,"id":"x","start":"2026-01-01T00:00:00Z"}` + "\n" +
		`{"t":"sink","key":"` + strings.Repeat("x", MaxLine+5) + `","arrivals":1}` + "\n"
	_, err := Read("h.jsonl", strings.NewReader(data))
	require.ErrorIs(t, err, bufio.ErrTooLong)
	st := NewStream("h.jsonl", strings.NewReader(data), StreamOptions{})
	require.False(t, st.Next())
	require.ErrorIs(t, st.Err(), bufio.ErrTooLong)
}

// TestStreamDecodesIntoItsWindowsAgain: the events held stay in the
// windows they were decoded into, and a window is decoded into again once
// its events are passed on: over hundreds of windows the stream makes only
// as many as the events it holds at once span, whether it holds back few
// events or many.
func TestStreamDecodesIntoItsWindowsAgain(t *testing.T) {
	for _, tc := range []struct {
		name   string
		maxLat int64
		bound  time.Duration
	}{
		{"in send order", 0, time.Nanosecond},
		{"held within 20 µs", 20_000, 20 * time.Microsecond},
		{"held within 200 µs", 200_000, 200 * time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, _ := completionOrdered(t, 6000, 5, tc.maxLat, 9)
			for _, line := range bytes.Split(data, []byte{'\n'}) {
				require.Less(t, len(line), 256, "a window of 1 KB holds at least 4 lines")
			}
			// Windows of at most 1 KB: more than 700 of them.
			st := NewStream("h.jsonl", bytes.NewReader(data), StreamOptions{ReorderBound: tc.bound, Decoders: 2, ChunkBytes: 512, WindowLines: 16})
			made := map[*Event]bool{}
			held := 0
			for st.Next() {
				held = max(held, st.Held())
				for _, w := range st.wins {
					made[&w.evs[:1][0]] = true
				}
			}
			require.NoError(t, st.Err())
			require.Greater(t, len(data)/1024, 700)
			// The windows that hold the events held (at least 4 lines each),
			// the one being decoded, the spare one and one handed over.
			require.LessOrEqual(t, len(made), held/4+4, "windows made, for %d events held at most", held)
		})
	}
}

// TestStreamDecodesBlankWindowsIntoOne: windows that hold no event the
// queue keeps (blank lines, junk) are decoded into again at once, even
// while the stream reads on for its next event: a file of blank lines
// takes one window, not one per window read (it took 15 GB for a 32 MB
// file before).
func TestStreamDecodesBlankWindowsIntoOne(t *testing.T) {
	data, _ := completionOrdered(t, 10, 1, 0, 3)
	header, rest, _ := bytes.Cut(data, []byte{'\n'})
	file := append(append(append(header, '\n'), bytes.Repeat([]byte("\n  \n"), 20_000)...), rest...)
	st := NewStream("h.jsonl", bytes.NewReader(file), StreamOptions{ReorderBound: time.Nanosecond, Decoders: 2, ChunkBytes: 512, WindowLines: 16})
	made := map[*Event]bool{}
	for st.Next() {
		for _, w := range st.wins {
			made[&w.evs[:1][0]] = true
		}
		for _, evs := range st.spare {
			made[&evs[:1][0]] = true
		}
	}
	require.NoError(t, st.Err())
	require.EqualValues(t, 10, st.Events())
	require.LessOrEqual(t, len(made), 4, "windows made for 40,000 blank lines")
}

// TestStreamLetsSparseWindowsGo: a file where one event in each window was
// sent ahead of the others (a second ahead; the others, sent earlier, are
// passed on first) would keep every window until MaxHeld events are
// held: the stream copies the few events of the earliest windows out
// instead and keeps within twice MaxHeld events' room, in the same order.
// A file as the engine writes it never needs that.
func TestStreamLetsSparseWindowsGo(t *testing.T) {
	const windows, lines, maxHeld = 600, 16, 1000
	var buf bytes.Buffer
	w := NewWriter(&buf)
	require.NoError(t, w.WriteRun(Run{ID: "s", Start: time.Unix(1_700_000_000, 0)}))
	id, behind := uint64(0), int64(0)
	event := func(sent int64) {
		id++
		require.NoError(t, w.WriteEvent(&Event{ID: id, Key: "k", Phase: "rate", Intended: sent, Sent: sent, Recv: sent + 5, Status: 200}))
	}
	for g := range int64(windows) {
		event(int64(time.Second) + g)
		for range lines - 1 {
			behind += 100
			event(behind)
		}
	}
	require.NoError(t, w.WriteEnd(End{Elapsed: int64(2 * time.Second), Requests: int64(id)}))
	require.NoError(t, w.Flush())
	want, err := Read("h.jsonl", bytes.NewReader(buf.Bytes()))
	require.NoError(t, err)
	slices.SortStableFunc(want.Events, func(a, b Event) int { return cmp.Compare(a.Sent, b.Sent) })

	o := StreamOptions{MaxHeld: maxHeld, Decoders: 1, ChunkBytes: 64 << 10, WindowLines: lines}
	st := NewStream("h.jsonl", bytes.NewReader(buf.Bytes()), o)
	var got []Event
	pinned := 0
	for st.Next() {
		pinned = max(pinned, st.pinned)
		got = append(got, *st.Event())
	}
	require.NoError(t, st.Err())
	require.Equal(t, want.Events, got)
	// Each window has room for its lines and a quarter more.
	require.LessOrEqual(t, pinned, 2*maxHeld+4*lines, "room of the windows held, in events (%d windows read)", windows)
	require.Positive(t, st.unpinned, "windows let go")

	data, reorder := completionOrdered(t, 20_000, 5, 20_000, 4)
	st = NewStream("h.jsonl", bytes.NewReader(data), StreamOptions{ReorderBound: reorder, MaxHeld: 64, Decoders: 2, ChunkBytes: 512, WindowLines: 16})
	for st.Next() {
	}
	require.NoError(t, st.Err())
	require.Zero(t, st.unpinned, "windows let go of a file the engine wrote")
}
