package history

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/headers"
)

func sample() []Event {
	return []Event{
		{ID: 1, Key: "free-a", Tier: "free", Phase: "burst", Intended: 5, Sent: 10, Recv: 20, Status: 200, Fields: headers.Fields{RateLimit: `"free";r=9;t=1`, XRemaining: "9"}},
		{ID: 2, Key: "free-a", Variant: "FREE-A ", Instance: 1, Phase: "burst", Sent: 11, Recv: 25, Status: 429, Fields: headers.Fields{RetryAfter: "1", Fallback: "closed", Scope: "global"}},
		{ID: 3, Key: "weird \"key\" <&> \u2028 é \x01", Phase: "p", Sent: 12, Recv: 30, Status: 0, Err: "dial tcp: refused"},
	}
}

// weightedSample are events of weighted requests: cost 3 and a peek.
func weightedSample() []Event {
	return []Event{
		{ID: 4, Key: "free-w", Tier: "free", Phase: "weighted", Sent: 13, Recv: 31, Status: 200, Cost: CostOf(3)},
		{ID: 5, Key: "free-w", Tier: "free", Phase: "weighted", Sent: 14, Recv: 32, Status: 200, Cost: CostPeek},
	}
}

func TestAppendEventMatchesEncodingJSON(t *testing.T) {
	for _, e := range append(sample(), weightedSample()...) {
		e.T = TypeEvent
		want, err := json.Marshal(e)
		require.NoError(t, err)
		require.Equal(t, string(want), string(AppendEvent(nil, &e)))
	}
}

func TestRoundTripAndOutcomes(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	require.NoError(t, w.WriteRun(Run{ID: "r1", Start: start, Plan: "p"}))
	for _, e := range sample() {
		require.NoError(t, w.WriteEvent(&e))
	}
	require.NoError(t, w.WritePhase(Phase{Name: "burst", Kind: "burst", Requests: 3, SpreadP99: 100}))
	require.NoError(t, w.WriteFault(Fault{Kind: "store-down", Start: 1, End: 2}))
	require.NoError(t, w.WriteSink(Sink{Key: "free-a", Arrivals: 1}))
	require.NoError(t, w.WriteEnd(End{Elapsed: 40, Requests: 3}))
	require.NoError(t, w.Flush())
	h, err := Read("mem", &buf)
	require.NoError(t, err)
	require.Equal(t, "r1", h.Run.ID)
	require.True(t, h.Run.Start.Equal(start))
	require.Len(t, h.Events, 3)
	require.Equal(t, sample()[2].Key, h.Events[2].Key)
	require.Len(t, h.Phases, 1)
	require.Len(t, h.Faults, 1)
	require.Len(t, h.Sink, 1)
	require.False(t, h.Interrupted())
	st := h.Stats()
	require.Equal(t, Stats{Requests: 3, Admitted: 1, Rejected: 1, Errors: 1}, st)
	require.Equal(t, start.Add(10), h.Wall(10))
}

func TestReadBadInput(t *testing.T) {
	run := `{"t":"run","version":1,"id":"x","start":"2026-01-01T00:00:00Z"}` + "\n"
	ev := `{"t":"e","id":1,"key":"k","inst":0,"phase":"p","intended":0,"sent":1,"recv":2,"status":200}` + "\n"
	for _, tc := range []struct{ name, in, want string }{
		{"empty", "", "the file is empty"},
		{"no header", ev, "mem:1: not a valid rlverify history: the first line must be the run header"},
		{"wrong version", `{"t":"run","version":9}` + "\n", "format version 9"},
		{"garbage middle", run + "not json\n" + ev, "mem:2: not a valid rlverify history: invalid JSON"},
		{"recv before sent", run + `{"t":"e","id":1,"key":"k","inst":0,"phase":"p","intended":0,"sent":5,"recv":2,"status":200}` + "\n" + ev, "recv 2 is before sent 5"},
		{"unknown type", run + `{"t":"zzz"}` + "\n" + ev, "unknown record type"},
		{"unknown field", run + `{"t":"e","id":1,"key":"k","inst":0,"phase":"p","sent":1,"recv":2,"status":200,"bogus":1}` + "\n" + ev, "unknown field"},
		{"bad status", run + `{"t":"e","id":1,"key":"k","inst":0,"phase":"p","sent":1,"recv":2,"status":-4}` + "\n" + ev, "not an HTTP status"},
		{"two headers", run + run, "a second run header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read("mem", strings.NewReader(tc.in))
			require.Error(t, err)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestTruncatedLastLineIsSkipped(t *testing.T) {
	run := `{"t":"run","version":1,"id":"x","start":"2026-01-01T00:00:00Z"}` + "\n"
	ev := `{"t":"e","id":1,"key":"k","inst":0,"phase":"p","intended":0,"sent":1,"recv":2,"status":200}` + "\n"
	h, err := Read("mem", strings.NewReader(run+ev+ev[:30]))
	require.NoError(t, err)
	require.True(t, h.Truncated)
	require.Len(t, h.Events, 1)
	require.True(t, h.Interrupted(), "no end record")
}

func TestMergeRebasesShards(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := &History{Run: Run{Start: t0, Shard: "1/2"}, Events: []Event{{ID: 1, Sent: 10, Recv: 20}}, End: &End{Requests: 1, Elapsed: 100}}
	b := &History{Run: Run{Start: t0.Add(5), Shard: "2/2"}, Events: []Event{{ID: 2, Sent: 0, Recv: 3}}, End: &End{Requests: 1, Elapsed: 100},
		Faults: []Fault{{Kind: "store-down", Start: 1, End: 2, Injecting: 1, Cleared: 3}, {Kind: "store-slow", Start: 4}},
		Sink:   []Sink{{Key: "k", Arrivals: 1, First: 1, Last: 2, At: 3}, {Key: "*", Arrivals: 1}}}
	m, err := Merge(a, b)
	require.NoError(t, err)
	require.Len(t, m.Events, 2)
	require.Equal(t, uint64(2), m.Events[0].ID, "sorted by send time after rebasing")
	require.Equal(t, int64(5), m.Events[0].Sent)
	require.Equal(t, Fault{Kind: "store-down", Start: 6, End: 7, Injecting: 6, Cleared: 8}, m.Faults[0])
	require.Equal(t, Fault{Kind: "store-slow", Start: 9}, m.Faults[1], "an open fault stays open")
	require.Equal(t, Sink{Key: "k", Arrivals: 1, First: 6, Last: 7, At: 8}, m.Sink[0], "sink offsets are rebased too")
	require.Equal(t, Sink{Key: "*", Arrivals: 1}, m.Sink[1], "offsets not recorded stay 0")
	require.Equal(t, int64(2), m.End.Requests)
	require.Equal(t, int64(105), m.End.Elapsed)
	c := &History{Run: Run{Start: t0, Shard: "2/2"}, Events: []Event{{ID: 1, Sent: 10, Recv: 20}}, End: &End{Requests: 1}}
	_, err = Merge(a, c)
	require.ErrorContains(t, err, "event id 1 appears in shard 1 and shard 2")
	_, err = Merge(a, a)
	require.ErrorContains(t, err, "shard 1 and shard 2 are both shard 1/2 of the run")
}

func TestCostTokens(t *testing.T) {
	for _, tc := range []struct {
		c        Cost
		tokens   int64
		weighted bool
		json     string
	}{
		{0, 1, false, ""},
		{CostOf(0), 0, true, `,"cost":0`},
		{CostOf(1), 1, true, `,"cost":1`},
		{CostOf(9), 9, true, `,"cost":9`},
		{CostOf(1 << 40), MaxEventCost, true, `,"cost":2147483647`},
	} {
		require.Equal(t, tc.tokens, tc.c.Tokens())
		require.Equal(t, tc.weighted, tc.c.Weighted())
		e := Event{T: TypeEvent, ID: 1, Cost: tc.c}
		line := AppendEvent(nil, &e)
		want, err := json.Marshal(e)
		require.NoError(t, err)
		require.Equal(t, string(want), string(line))
		require.Equal(t, tc.json != "", strings.Contains(string(line), tc.json) && tc.json != "", "%s", line)
		var back Event
		require.NoError(t, decodeEvent(line, &back))
		require.Equal(t, tc.c.Tokens(), back.Cost.Tokens(), "%s", line)
	}
}
