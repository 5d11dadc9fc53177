package checks_test

import (
	"cmp"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
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

				got := streamResults(t, file, pol, o)
				require.Equal(t, want, got)
				if tc.name != "one key" {
					require.Equal(t, checks.Fail, resultNamed(got, "token-bounds").Verdict, "the broken history must exercise the evidence")
				}
				if maxEv > 0 && tc.name == "ties and early reports" {
					// Every pass's evidence is compared: too many, faster than
					// the refill, fewer than the quota less what was sent.
					var passes [3]bool
					for _, e := range resultNamed(got, "token-bounds").Evidence {
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
	// delay streams only under a policy that declares no delay.
	p, err := policy.Parse("delaying.yaml", []byte("name: delaying\ntiers:\n  - name: free\n    key_prefix: \"\"\n    limits:\n      - {algorithm: token-bucket, capacity: 5, rate: 5/s}\ndelay:\n  max_wait: 600ms\n"))
	require.NoError(t, err)
	_, err = checks.NewStreamer(&history.History{}, p, checks.Options{Only: []string{"delay"}})
	require.ErrorContains(t, err, `"delay" streams only when the policy declares no delay (this one does)`)
	_, err = checks.NewStreamer(&history.History{}, policy.Default(), checks.Options{Only: []string{"nope"}})
	require.ErrorContains(t, err, `"nope" does not stream yet`)
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
	for _, ph := range h.Phases {
		require.NoError(t, w.WritePhase(ph))
	}
	require.NoError(t, w.WriteEnd(*h.End))
	require.NoError(t, w.Close())
}

// TestStreamerMatchesRunOversell is the differential test of the streamed
// oversell: every envelope (bucket, per instance, sliding log and counter,
// fixed windows epoch-aligned and anchored, a bucket with a sliding log,
// two buckets of different refills) on
// histories of one key under steady overload (never cut), many keys with
// pauses (cut and swept), several instances with faults, fallbacks and
// variants, written in completion order — with and without admissions
// beyond the envelope, comparing every result field. CI runs it small
// (a few thousand events, under -race); RLVERIFY_STREAM_SCALE=N makes every
// history N times longer.
func TestStreamerMatchesRunOversell(t *testing.T) {
	scale := 1
	if n, err := strconv.Atoi(os.Getenv("RLVERIFY_STREAM_SCALE")); err == nil && n > 1 {
		scale = n
	}
	limits := map[string]string{
		"bucket":          "      - {algorithm: token-bucket, capacity: 10, rate: 5/s}\n",
		"per instance":    "      - {algorithm: token-bucket, capacity: 10, rate: 5/s, scope: instance}\n",
		"sliding log":     "      - {algorithm: sliding-log, limit: 10, window: 2s}\n",
		"sliding counter": "      - {algorithm: sliding-counter, limit: 10, window: 2s}\n",
		"fixed":           "      - {algorithm: fixed-window, limit: 10, window: 2s}\n",
		"anchored":        "      - {algorithm: fixed-window, limit: 10, window: 2s, anchor: first}\n",
		"two limits":      "      - {algorithm: token-bucket, capacity: 10, rate: 5/s}\n      - {algorithm: sliding-log, limit: 30, window: 10s}\n",
		"two buckets":     "      - {algorithm: token-bucket, capacity: 10, rate: 5/s}\n      - {algorithm: gcra, capacity: 40, rate: 4/s}\n",
		// Windows no history here fills: cleared in the first pass.
		"roomy windows": "      - {algorithm: sliding-log, limit: 60, window: 2s}\n      - {algorithm: fixed-window, limit: 60, window: 2s}\n      - {algorithm: sliding-counter, limit: 60, window: 3s}\n",
	}
	bucket := "      - algorithm: token-bucket\n        capacity: 10\n        rate: 5/s\n"
	require.Contains(t, bench.PolicyYAML, bucket)
	sec := int64(time.Second)
	// oversold admits some refused requests; paused shifts the events
	// after every every-th by gap (the keys idle past their cut).
	oversold := func(h *history.History, every int, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 3))
		for i := range h.Events {
			if e := &h.Events[i]; e.Status == 429 && rng.IntN(every) == 0 {
				e.Status, e.RetryAfter = 200, ""
			}
		}
	}
	paused := func(h *history.History, every int, gap int64) {
		for i := range h.Events {
			e := &h.Events[i]
			d := int64(i/every) * gap
			e.Intended, e.Sent, e.Recv = e.Intended+d, e.Sent+d, e.Recv+d
		}
		h.End.Elapsed += int64(len(h.Events)/every) * gap
	}
	type hist struct {
		name string
		h    func() *history.History
		fail bool
	}
	hists := []hist{
		{"one key, correct", func() *history.History { return bench.Generate(1500*scale, 1) }, false},
		{"one key, overload", func() *history.History { h := bench.Generate(1500*scale, 1); oversold(h, 20, 1); return h }, true},
		{"many keys, pauses", func() *history.History {
			h := bench.Generate(4000*scale, 20)
			paused(h, 1000, 7*sec)
			oversold(h, 2, 2)
			return h
		}, true},
		{"correct with pauses", func() *history.History { h := bench.Generate(1500*scale, 3); paused(h, 300, 5*sec); return h }, false},
		{"instances, faults, fallbacks, variants, completion order", func() *history.History {
			h := bench.Generate(4000*scale, 30)
			paused(h, 1000, 11*sec)
			oversold(h, 3, 3)
			for i := range h.Events {
				e := &h.Events[i]
				e.Instance = i % 3
				switch i % 29 {
				case 9:
					e.Fallback = "open"
				case 13:
					e.Variant = "case"
				}
			}
			h.Faults = []history.Fault{{Kind: "store-down", Start: 2 * sec, End: 4 * sec}, {Kind: "store-slow", Start: 80 * sec, End: 0}}
			// The engine writes an event when it completes.
			slices.SortStableFunc(h.Events, func(a, b history.Event) int { return cmp.Compare(a.Recv, b.Recv) })
			return h
		}, true},
	}
	for _, hc := range hists {
		h := hc.h()
		file := filepath.Join(t.TempDir(), "h.jsonl")
		writeHistory(t, file, h)
		whole, err := history.ReadFile(file)
		require.NoError(t, err)
		for _, lname := range slices.Sorted(maps.Keys(limits)) {
			pol, err := policy.Parse(lname, []byte(strings.Replace(bench.PolicyYAML, bucket, limits[lname], 1)))
			require.NoError(t, err)
			for _, maxEv := range []int{0, 1 << 20} {
				if maxEv == 0 && lname != "bucket" && lname != "sliding log" {
					continue // which examples are kept: two envelopes suffice
				}
				t.Run(hc.name+"/"+lname+"/"+strconv.Itoa(maxEv), func(t *testing.T) {
					o := checks.Options{Only: []string{"oversell"}, MaxEvidence: maxEv}
					want := checks.Run(whole, pol, o)
					got, again := streamResultsAgain(t, file, pol, o)
					require.Equal(t, want, got)
					switch lname {
					case "bucket":
						// A correct bucket's clusters are cleared in the first
						// pass; an oversold one's are judged in the second.
						require.Equal(t, hc.fail, again)
					case "roomy windows":
						require.False(t, again)
						require.Equal(t, checks.Pass, got[0].Verdict)
					case "anchored", "per instance":
						require.True(t, again, "never screened")
					}
					if hc.fail && lname == "bucket" {
						require.Equal(t, checks.Fail, got[0].Verdict, "the oversold history must exercise the evidence")
					}
					if !hc.fail && strings.HasPrefix(limits[lname], "      - {algorithm: token-bucket") && !strings.Contains(lname, "two") {
						require.Equal(t, checks.Pass, got[0].Verdict, "a correct bucket's history")
					}
				})
			}
		}
	}
}

// streamResults judges file through a Streamer.
func streamResults(t *testing.T, file string, pol *policy.Policy, o checks.Options) []checks.Result {
	t.Helper()
	rs, _ := streamResultsAgain(t, file, pol, o)
	return rs
}

// streamResultsAgain judges file through a Streamer, and says whether it
// took a second pass.
func streamResultsAgain(t *testing.T, file string, pol *policy.Policy, o checks.Options) ([]checks.Result, bool) {
	t.Helper()
	s, again := streamFile(t, file, pol, o)
	return s.Results(), again
}

// streamFile hands file's events to a Streamer, a second time when it
// asks, and says whether it did.
func streamFile(t *testing.T, file string, pol *policy.Policy, o checks.Options) (*checks.Streamer, bool) {
	t.Helper()
	rec, n, err := readRecords(file)
	require.NoError(t, err)
	s, err := checks.NewStreamer(rec, pol, o)
	require.NoError(t, err)
	s.SetEvents(n)
	pass := func(add func(*history.Event, uint64)) {
		f, err := os.Open(file)
		require.NoError(t, err)
		defer f.Close()
		st := history.NewStream(file, f, history.StreamOptions{})
		for st.Next() {
			add(st.Event(), st.Seq())
		}
		require.NoError(t, st.Err())
		require.Equal(t, n+int64(len(rec.Events)), st.Events())
	}
	pass(s.Add)
	again := s.Again()
	if again {
		pass(s.AddAgain)
	}
	return s, again
}

func resultNamed(rs []checks.Result, name string) checks.Result {
	for _, r := range rs {
		if r.Name == name {
			return r
		}
	}
	return checks.Result{}
}

// TestStreamerWithoutItsSecondPass: results asked for without the second
// pass Again asked for say oversell was not judged.
func TestStreamerWithoutItsSecondPass(t *testing.T) {
	h := bench.Generate(1500, 1)
	for i := range h.Events {
		if e := &h.Events[i]; e.Status == 429 && i%2 == 0 {
			e.Status, e.RetryAfter = 200, ""
		}
	}
	file := filepath.Join(t.TempDir(), "h.jsonl")
	writeHistory(t, file, h)
	pol, err := policy.Parse("bench", []byte(bench.PolicyYAML))
	require.NoError(t, err)
	rec, _, err := readRecords(file)
	require.NoError(t, err)
	for _, ask := range []bool{false, true} {
		s, err := checks.NewStreamer(rec, pol, checks.Options{Only: []string{"oversell"}})
		require.NoError(t, err)
		f, err := os.Open(file)
		require.NoError(t, err)
		st := history.NewStream(file, f, history.StreamOptions{})
		for st.Next() {
			s.Add(st.Event(), st.Seq())
		}
		require.NoError(t, st.Err())
		require.NoError(t, f.Close())
		if ask {
			require.True(t, s.Again())
		}
		rs := s.Results()
		require.Equal(t, checks.Unknown, rs[0].Verdict)
		require.Contains(t, rs[0].Summary, "needed a second pass over the events")
	}
}
