package checks_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/internal/bench"
	"github.com/rlverify/rlverify/policy"
)

// TestStreamerMatchesRun is the differential test of the streaming
// judgement: a history written to a file and judged in memory (Run), and
// the same file streamed (history.Stream) into a Streamer, give the same
// results — verdict, summary, figures and evidence — for every streaming
// check, on histories of one key, many keys, faults and several instances,
// each with and without violations.
func TestStreamerMatchesRun(t *testing.T) {
	pol, err := policy.Parse("bench", []byte(bench.PolicyYAML))
	require.NoError(t, err)
	// The same policy declaring the RateLimit headers the events lack, and
	// the X-RateLimit ones on admissions only.
	rlPol, err := policy.Parse("bench-ratelimit", []byte(strings.Replace(strings.Replace(bench.PolicyYAML, "ratelimit: false", "ratelimit: true", 1),
		"headers:\n", "headers:\n  on: admitted\n", 1)))
	require.NoError(t, err)
	require.True(t, rlPol.Headers.RateLimit.Declared())
	sec := int64(time.Second)
	// broken reports wrong remaining counts on some responses: too many,
	// negative, growing faster than the refill, too few.
	broken := func(h *history.History, every int, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 2))
		for i := range h.Events {
			if rng.IntN(every) != 0 {
				continue
			}
			e := &h.Events[i]
			e.XRemaining = []string{"11", "-1", "9", "0", "10", "3"}[rng.IntN(6)]
			switch rng.IntN(8) {
			case 0:
				e.XLimit = "ten"
			case 1:
				e.XReset = "99"
			case 2:
				e.XReset = ""
			}
		}
	}
	for _, tc := range []struct {
		name string
		h    func() *history.History
	}{
		{"one key", func() *history.History { return bench.Generate(4000, 1) }},
		{"one key, broken", func() *history.History { h := bench.Generate(4000, 1); broken(h, 50, 1); return h }},
		{"many keys, broken", func() *history.History { h := bench.Generate(20_000, 500); broken(h, 40, 2); return h }},
		{"faults, instances and errors, broken", func() *history.History {
			h := bench.Generate(20_000, 40)
			broken(h, 30, 3)
			for i := range h.Events {
				e := &h.Events[i]
				e.Instance = i % 3
				switch i % 23 {
				case 4:
					e.Status, e.Err = 0, "timeout"
				case 9:
					e.Fallback = "open"
				}
			}
			h.Faults = []history.Fault{{Kind: "store-down", Start: 2 * sec, End: 4 * sec}, {Kind: "store-slow", Start: 9 * sec, End: 0}}
			return h
		}},
		{"weighted, broken", func() *history.History {
			// Costs 0 … 3 (peeks among them) on every fifth request.
			h := bench.Generate(6000, 20)
			broken(h, 40, 5)
			for i := range h.Events {
				if i%5 == 0 {
					h.Events[i].Cost = history.CostOf(int64(i / 5 % 4))
				}
			}
			return h
		}},
		{"ties and early reports", func() *history.History {
			// Requests sent at once (equal send times) from the start, when
			// the whole quota is still there: pass 3's case.
			h := bench.Generate(3000, 7)
			broken(h, 60, 4)
			for i := range h.Events {
				h.Events[i].Sent = h.Events[i].Sent / 1e8 * 1e8
				h.Events[i].Intended = h.Events[i].Sent
				if i < 60 {
					h.Events[i].XRemaining = strconv.Itoa(i % 4)
				}
			}
			return h
		}},
	} {
		// All the evidence (every pass's, in Run's order) and the default
		// cap (which examples are kept).
		for _, run := range []struct {
			what  string
			maxEv int
			pol   *policy.Policy
		}{{"X-RateLimit, 5 examples", 0, pol}, {"X-RateLimit, all evidence", 1 << 20, pol}, {"RateLimit too, all evidence", 1 << 20, rlPol}} {
			maxEv, pol := run.maxEv, run.pol
			t.Run(tc.name+"/"+run.what, func(t *testing.T) {
				h := tc.h()
				file := filepath.Join(t.TempDir(), "h.jsonl")
				writeHistory(t, file, h)
				whole, err := history.ReadFile(file)
				require.NoError(t, err)
				o := checks.Options{Only: checks.Streamable(), MaxEvidence: maxEv}
				want := checks.Run(whole, pol, o)

				rec, n, err := readRecords(file)
				require.NoError(t, err)
				require.EqualValues(t, len(h.Events), n)
				s, err := checks.NewStreamer(rec, pol, o)
				require.NoError(t, err)
				f, err := os.Open(file)
				require.NoError(t, err)
				defer f.Close()
				st := history.NewStream(file, f, history.StreamOptions{})
				for st.Next() {
					s.Add(st.Event(), st.Seq())
				}
				require.NoError(t, st.Err())
				got := s.Results()
				require.Equal(t, want, got)
				if tc.name != "one key" {
					require.Equal(t, checks.Fail, got[0].Verdict, "the broken history must exercise the evidence")
				}
				if maxEv > 0 && tc.name == "ties and early reports" {
					// Every pass's evidence is compared: too many, faster than
					// the refill, fewer than the quota less what was sent.
					var passes [3]bool
					for _, e := range got[0].Evidence {
						passes[0] = passes[0] || strings.Contains(e.Message, "more than the limit") || strings.Contains(e.Message, "the whole quota")
						passes[1] = passes[1] || strings.Contains(e.Message, "surely decided earlier")
						passes[2] = passes[2] || strings.Contains(e.Message, "could have consumed by its decision")
					}
					require.Equal(t, [3]bool{true, true, true}, passes)
				}
			})
		}
	}
}

func TestStreamerRefusesWhatDoesNotStream(t *testing.T) {
	_, err := checks.NewStreamer(&history.History{}, policy.Default(), checks.Options{Only: []string{"oversell"}})
	require.ErrorContains(t, err, `"oversell" does not stream yet`)
}

func readRecords(file string) (*history.History, int64, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	return history.ReadRecords(file, f)
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
	require.NoError(t, w.WriteEnd(*h.End))
	require.NoError(t, w.Close())
}
