package checks_test

import (
	"net/http"
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

// TestStreamerMatchesRunRetryAfter is retry-after's differential test: the
// streamed judgement (two passes: the first gathers the tolerance's sample,
// the calibrate bursts and the probe phases, the second judges every
// refusal) gives Run's result — verdict, summary, figures, every piece of
// evidence — on honoured and unhonoured advice, missing, invalid and
// HTTP-date Retry-After, advice beyond any need, calibrate bursts with
// exact waits, weighted requests, faults, several instances, variants,
// probe phases that all errored and runs without headers; with the
// default cap on evidence and with all of it.
func TestStreamerMatchesRunRetryAfter(t *testing.T) {
	pol, err := policy.Parse("bench", []byte(bench.PolicyYAML))
	require.NoError(t, err)
	tolPol, err := policy.Parse("bench-tol", []byte(bench.PolicyYAML+"tolerance:\n  timing: 30ms\n"))
	require.NoError(t, err)
	require.Equal(t, 30*time.Millisecond, tolPol.Tolerance.Timing.D())
	sec := int64(time.Second)
	// advice rewrites the Retry-After of every every-th refusal by turns:
	// missing, not a number, an HTTP-date ahead and one in the past, 0,
	// longer than a request needs, beyond any need; and refuses some
	// admissions (unhonoured advice when they follow one).
	advice := func(h *history.History, every int) {
		n := 0
		for i := range h.Events {
			e := &h.Events[i]
			switch {
			case e.Status == 200 && i%(3*every) == 1:
				e.Status, e.RetryAfter = 429, "1"
			case e.Status == 429:
				n++
				if n%every != 0 {
					break
				}
				switch n / every % 7 {
				case 0:
					e.RetryAfter = ""
				case 1:
					e.RetryAfter = "soon"
				case 2:
					e.RetryAfter = h.Wall(e.Recv).Add(2 * time.Second).UTC().Format(http.TimeFormat)
				case 3:
					e.RetryAfter = h.Wall(e.Recv).Add(-time.Hour).UTC().Format(http.TimeFormat)
				case 4:
					e.RetryAfter = "0"
				case 5:
					e.RetryAfter = "2"
				case 6:
					e.RetryAfter = "30"
				}
			}
		}
	}
	// calibrate prepends, for each of keys, a calibrate burst from a whole
	// quota: 10 admitted, then refusals advised 1 s (within the exact
	// wait) or 2 s (beyond it).
	calibrate := func(h *history.History, keys int) {
		ph := history.Phase{T: "phase", Name: "cal", Kind: "calibrate", Start: 0, End: sec, Target: 0}
		h.Phases = append(h.Phases, ph)
		var burst []history.Event
		id := uint64(len(h.Events)) + 1000
		for k := 0; k < keys; k++ {
			for j := 0; j < 13; j++ {
				e := history.Event{ID: id, Key: "free-cal" + strconv.Itoa(k), Phase: "cal", Intended: 0, Sent: int64(j) * 100_000, Recv: int64(j)*100_000 + 2_000_000, Status: 200}
				id++
				if j >= 10 {
					e.Status, e.RetryAfter = 429, []string{"1", "2"}[(k+j)%2]
				}
				burst = append(burst, e)
			}
			// A later request after the advice: honoured or not.
			e := history.Event{ID: id, Key: "free-cal" + strconv.Itoa(k), Sent: 3 * sec, Recv: 3*sec + 1_000_000, Status: []int{200, 429}[k%2]}
			e.RetryAfter = []string{"", "1"}[k%2]
			burst = append(burst, e)
			id++
		}
		h.Events = append(burst, h.Events...)
	}
	for _, tc := range []struct {
		name string
		pol  *policy.Policy
		h    func() *history.History
		// verdict is the verdict the case must reach (the evidence it
		// exercises).
		verdict checks.Verdict
	}{
		{"one key, honoured", pol, func() *history.History { return bench.Generate(2000, 1) }, checks.Pass},
		{"many keys, declared tolerance", tolPol, func() *history.History { return bench.Generate(4000, 100) }, checks.Pass},
		{"one key, bad advice", pol, func() *history.History { h := bench.Generate(2000, 1); advice(h, 5); return h }, checks.Fail},
		{"many keys, bad advice", pol, func() *history.History { h := bench.Generate(5000, 100); advice(h, 3); return h }, checks.Fail},
		{"calibrate bursts", pol, func() *history.History { h := bench.Generate(3000, 5); calibrate(h, 6); return h }, checks.Fail},
		{"weighted, faults, instances, variants", pol, func() *history.History {
			h := bench.Generate(6000, 30)
			advice(h, 7)
			for i := range h.Events {
				e := &h.Events[i]
				e.Instance = i % 3
				switch {
				case i%5 == 0:
					e.Cost = history.CostOf(int64(i / 5 % 13)) // 0 … 12: peeks, and beyond the capacity
				case i%17 == 3:
					e.Variant = "xff"
				case i%23 == 4:
					e.Status, e.Err, e.RetryAfter = 0, "timeout", ""
				case i%29 == 9:
					e.Fallback = "open"
				}
			}
			h.Faults = []history.Fault{{Kind: "store-down", Start: 2 * sec, End: 4 * sec}, {Kind: "store-slow", Start: 9 * sec, End: 0}}
			return h
		}, checks.Fail},
		{"probes all errored", pol, func() *history.History {
			h := bench.Generate(600, 2)
			h.Phases = append(h.Phases, history.Phase{T: "phase", Name: "probe", Kind: "probe", Start: 0, End: 100 * sec, Staged: 3_000_000})
			seen := map[string]int{}
			for i := range h.Events {
				e := &h.Events[i]
				// The refusals advised 3 s (within any need) are probed
				// only by requests that all end in an error.
				switch {
				case seen[e.Key] > 5:
					e.Phase, e.Status, e.Err, e.RetryAfter = "probe", 0, "connection reset", ""
				case e.Status == 429:
					e.RetryAfter = "3"
					fallthrough
				case seen[e.Key] > 0:
					seen[e.Key]++ // from the key's first refusal on
				}
			}
			return h
		}, checks.Unknown},
		{"advice 0 answered at its send time", pol, func() *history.History {
			// No latency and no slack: an advice of 0 points at the
			// refusal's own send time; its probe is a later request
			// (refused: the bucket had not refilled, the advice is wrong).
			h := bench.Generate(3000, 2)
			for i := range h.Events {
				e := &h.Events[i]
				e.Recv = e.Sent
				if e.Status == 429 && i%2 == 0 {
					e.RetryAfter = "0"
				}
			}
			return h
		}, checks.Fail},
		{"no headers", pol, func() *history.History { h := bench.Generate(2000, 3); h.Run.NoHeaders = true; return h }, checks.Skip},
		{"no refusals", pol, func() *history.History {
			h := bench.Generate(200, 50)
			for i := range h.Events {
				if h.Events[i].Status == 429 {
					h.Events[i].Status, h.Events[i].RetryAfter = 200, ""
				}
			}
			return h
		}, checks.Skip},
	} {
		for _, maxEv := range []int{0, 1 << 20} {
			t.Run(tc.name+"/evidence "+strconv.Itoa(maxEv), func(t *testing.T) {
				h := tc.h()
				file := filepath.Join(t.TempDir(), "h.jsonl")
				writeHistory(t, file, h)
				whole, err := history.ReadFile(file)
				require.NoError(t, err)
				// Alone with the default cap, beside every streaming check
				// (sharing the second pass with oversell) with all evidence.
				only := []string{"retry-after"}
				if maxEv > 0 {
					only = checks.Streamable()
				}
				{
					o := checks.Options{Only: only, MaxEvidence: maxEv}
					want := checks.Run(whole, tc.pol, o)
					got, again := streamResultsAgain(t, file, tc.pol, o)
					require.Equal(t, want, got)
					r := resultNamed(got, "retry-after")
					require.Equal(t, tc.verdict, r.Verdict, r.Summary)
					// The branches each case is for.
					f := r.Figures
					switch tc.name {
					case "many keys, bad advice":
						for _, k := range []string{"missing", "invalid", "too_long", "beyond_any_need", "honoured", "refused_within_tolerance"} {
							require.Positive(t, f[k], k)
						}
						require.Greater(t, f["probed"], f["honoured"], "unhonoured advice")
					case "calibrate bursts":
						require.Positive(t, f["beyond_exact_wait"])
					case "weighted, faults, instances, variants":
						require.Positive(t, f["beyond_capacity_not_judged"])
					case "probes all errored":
						require.Positive(t, f["probe_errors"])
					}
					if r.Verdict != checks.Skip {
						require.True(t, again, "refusals to judge take the second pass")
					}
				}
			})
		}
	}
}

// TestStreamerRetryAfterNeedsTheEventCount: without the number of events
// (SetEvents) the default tolerance cannot be sampled as Run samples it,
// and retry-after says so instead of guessing.
func TestStreamerRetryAfterNeedsTheEventCount(t *testing.T) {
	pol, err := policy.Parse("bench", []byte(bench.PolicyYAML))
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "h.jsonl")
	writeHistory(t, file, bench.Generate(500, 2))
	rec, _, err := readRecords(file)
	require.NoError(t, err)
	s, err := checks.NewStreamer(rec, pol, checks.Options{Only: []string{"retry-after"}})
	require.NoError(t, err)
	streamInto(t, file, s.Add)
	require.False(t, s.Again())
	r := s.Results()[0]
	require.Equal(t, checks.Unknown, r.Verdict)
	require.True(t, strings.Contains(r.Summary, "SetEvents"), r.Summary)

	// Told one event more (the records count a cut last line): the same
	// sample, Run's result; told twice as many: another sample, UNKNOWN.
	o := checks.Options{Only: []string{"retry-after"}}
	whole, err := history.ReadFile(file)
	require.NoError(t, err)
	want := checks.Run(whole, pol, o)
	for _, tc := range []struct {
		extra int64
		same  bool
	}{{1, true}, {30_000, false}} {
		s, err := checks.NewStreamer(rec, pol, o)
		require.NoError(t, err)
		s.SetEvents(500 + tc.extra)
		streamInto(t, file, s.Add)
		if s.Again() {
			streamInto(t, file, s.AddAgain)
		}
		if tc.same {
			require.Equal(t, want, s.Results())
			continue
		}
		r := s.Results()[0]
		require.Equal(t, checks.Unknown, r.Verdict)
		require.Contains(t, r.Summary, "was handed 500 events")
	}
}

// streamInto hands every event of file, in the stream's order, to add.
func streamInto(t *testing.T, file string, add func(*history.Event, uint64)) {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	st := history.NewStream(file, f, history.StreamOptions{})
	for st.Next() {
		add(st.Event(), st.Seq())
	}
	require.NoError(t, st.Err())
}
