package reports

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/internal/bench"
	"github.com/rlverify/rlverify/policy"
)

// TestTallyMatchesBuild is the differential test of the streaming run
// figures: a history written to a file, read whole and built (Build), and
// streamed (history.Stream) into a Tally, give the same Stats, Elapsed,
// PerSecond and latency count and maximum, and percentiles within the
// Tally's stated 0.1% below Build's.
func TestTallyMatchesBuild(t *testing.T) {
	pol, err := policy.Parse("bench", []byte(bench.PolicyYAML))
	require.NoError(t, err)
	sec := int64(time.Second)
	for _, tc := range []struct {
		name string
		h    func() *history.History
	}{
		{"one key", func() *history.History {
			h := bench.Generate(3000, 1)
			h.Faults = []history.Fault{{Kind: "store-down", Start: 20 * sec, End: 40 * sec}}
			return h
		}},
		{"many keys", func() *history.History {
			h := bench.Generate(20_000, 300)
			h.Faults = []history.Fault{{Kind: "store-slow", Start: 2 * sec, End: 3 * sec, Param: "50ms"}, {Kind: "store-down", Start: 5 * sec, End: 6 * sec}}
			return h
		}},
		{"faults, errors and several instances, no end record", func() *history.History {
			h := bench.Generate(20_000, 30)
			for i := range h.Events {
				e := &h.Events[i]
				e.Instance = i % 3
				switch i % 17 {
				case 3:
					e.Status, e.Err, e.XLimit, e.XRemaining, e.XReset = 0, "timeout", "", "", ""
				case 5:
					e.Status, e.RetryAfter = 503, "2"
				case 7:
					e.Recv += int64(i) * 997 // a long tail
				}
			}
			h.Faults = []history.Fault{{Kind: "store-down", Start: 10 * sec, End: 0}}
			h.End = nil
			return h
		}},
		{"no faults: no per-second table", func() *history.History { return bench.Generate(5000, 10) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.h()
			file := filepath.Join(t.TempDir(), "h.jsonl")
			writeHistory(t, file, h)
			whole, err := history.ReadFile(file)
			require.NoError(t, err)
			want := Build(whole, pol, nil)

			f, err := os.Open(file)
			require.NoError(t, err)
			defer f.Close()
			st := history.NewStream(file, f, history.StreamOptions{})
			ta := NewTally(pol)
			for st.Next() {
				ta.Add(st.Event())
			}
			require.NoError(t, st.Err())
			stats, elapsed, lat, secs := ta.Figures(st.History())
			require.Equal(t, want.Stats, stats)
			require.Equal(t, want.Elapsed, elapsed)
			require.Equal(t, want.PerSecond, secs)
			require.Equal(t, len(h.Faults) > 0, secs != nil)
			require.NotNil(t, lat)
			require.Equal(t, want.Latency.Decisions, lat.Decisions)
			require.Equal(t, want.Latency.Max, lat.Max)
			for _, p := range [][2]int64{{want.Latency.P50, lat.P50}, {want.Latency.P90, lat.P90}, {want.Latency.P99, lat.P99}} {
				exact, approx := p[0], p[1]
				require.LessOrEqual(t, approx, exact)
				require.GreaterOrEqual(t, float64(approx), float64(exact)*(1-1.0/latSub), "exact %d, tallied %d", exact, approx)
			}
		})
	}
}

func writeHistory(t *testing.T, file string, h *history.History) {
	t.Helper()
	w, err := history.Create(file)
	require.NoError(t, err)
	require.NoError(t, w.WriteRun(h.Run))
	for i := range h.Events {
		if i == len(h.Events)/2 {
			for _, f := range h.Faults {
				require.NoError(t, w.WriteFault(f))
			}
		}
		require.NoError(t, w.WriteEvent(&h.Events[i]))
	}
	if h.End != nil {
		require.NoError(t, w.WriteEnd(*h.End))
	}
	require.NoError(t, w.Close())
}

// TestLatencyBuckets: every value falls in the bucket whose lower end is
// within 1/latSub below it, exactly below 2·latSub.
func TestLatencyBuckets(t *testing.T) {
	for _, v := range []int64{0, 1, 2047, 2048, 2049, 4095, 4096, 123_456_789, 1 << 40, 1<<62 + 12345} {
		low := latLow(latBucket(v))
		require.LessOrEqual(t, low, v, "v=%d", v)
		require.GreaterOrEqual(t, float64(low), float64(v)*(1-1.0/latSub), "v=%d", v)
		if v < 2*latSub {
			require.Equal(t, v, low)
		}
		require.Equal(t, latBucket(v), latBucket(low), "v=%d", v)
	}
}
