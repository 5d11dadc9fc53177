package checks_test

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/internal/bench"
	"github.com/rlverify/rlverify/policy"
)

// requireStreamMatchesRun writes h to a file, judges it in memory (Run)
// and through a Streamer with check alone (with the default 5 examples
// and with every piece of evidence) and, when every is set, with every
// check that streams under pol (all the evidence) and alone with the
// oversell streams sweeping after every event, and requires the same
// results. It
// returns the check's result. Every check on every case costs minutes
// under -race: CI runs them together on a few cases of each test;
// RLVERIFY_STREAM_EVERY=1 runs them on all.
func requireStreamMatchesRun(t *testing.T, h *history.History, pol *policy.Policy, check string, every bool) checks.Result {
	t.Helper()
	file := filepath.Join(t.TempDir(), "h.jsonl")
	writeHistory(t, file, h)
	whole, err := history.ReadFile(file)
	require.NoError(t, err)
	var got checks.Result
	type config struct {
		only  []string
		maxEv int
		sweep bool
	}
	configs := []config{
		{[]string{check}, 0, false},
		{[]string{check}, 1 << 20, false},
	}
	if every || os.Getenv("RLVERIFY_STREAM_EVERY") != "" {
		configs = append(configs, config{checks.StreamableUnder(pol), 1 << 20, false})
		if check == "fail-mode" || check == "bypass" {
			// The oversell streams (fail-mode's recoveries, bypass's
			// unions and its plain keys') sweeping after every event.
			configs = append(configs, config{[]string{check}, 1 << 20, true})
		}
	}
	for _, c := range configs {
		require.Contains(t, c.only, check)
		o := checks.Options{Only: c.only, MaxEvidence: c.maxEv}
		want := checks.Run(whole, pol, o)
		restore := checks.SweepEvery(0)
		if !c.sweep {
			restore()
		}
		rs := streamResults(t, file, pol, o)
		restore()
		require.Equal(t, want, rs, "%s alone: %v, max evidence %d, sweeping after every event: %v", check, len(c.only) == 1, c.maxEv, c.sweep)
		got = resultNamed(rs, check)
	}
	return got
}

// benchPolicy is bench.PolicyYAML with extra appended.
func benchPolicy(t *testing.T, extra string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse("bench", []byte(bench.PolicyYAML+extra))
	require.NoError(t, err)
	return p
}

// oversold admits some refused requests (every-th on average).
func oversold(h *history.History, every int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	for i := range h.Events {
		if e := &h.Events[i]; e.Status == 429 && rng.IntN(every) == 0 {
			e.Status, e.RetryAfter = 200, ""
		}
	}
}

// mixed adds what every check must see past: weighted requests (peeks
// among them), variants, errors, fallbacks and a store fault.
func mixed(h *history.History) {
	sec := int64(time.Second)
	for i := range h.Events {
		e := &h.Events[i]
		switch i % 37 {
		case 3:
			e.Cost = history.CostOf(int64(i / 37 % 4))
		case 5:
			e.Variant = "xff:10.0.0.1"
		case 11:
			e.Status, e.Err = 0, "timeout"
		case 17:
			e.Fallback = "open"
		}
	}
	h.Faults = append(h.Faults, history.Fault{Kind: "store-down", Start: 2 * sec, End: 3 * sec})
}

// TestStreamerMatchesRunRegions is the differential test of the streamed
// regions: region phases (with their records, and without: the counts
// then come from a second pass), a declared tolerance over several
// instances and over one (a skip), correct and oversold keys, weighted
// requests, variants, errors and faults.
func TestStreamerMatchesRunRegions(t *testing.T) {
	tolPol := benchPolicy(t, "tolerance:\n  regions: 0.05\n")
	plain := benchPolicy(t, "")
	regional := func(h *history.History, records bool) {
		for i := range h.Events {
			e := &h.Events[i]
			e.Instance = i % 2
			e.Phase = []string{"region-us", "region-eu"}[i%2]
		}
		if records {
			h.Phases = []history.Phase{{Name: "region-us", Kind: "steady"}, {Name: "region-eu", Kind: "steady"}}
		}
	}
	for _, tc := range []struct {
		name    string
		h       func() *history.History
		pol     *policy.Policy
		verdict checks.Verdict
		every   bool // with every check too
	}{
		{"region phases, correct", func() *history.History { h := bench.Generate(2000, 20); regional(h, true); return h }, tolPol, checks.Pass, false},
		{"region phases, oversold", func() *history.History {
			h := bench.Generate(2000, 20)
			regional(h, true)
			oversold(h, 2, 1)
			return h
		}, tolPol, checks.Fail, false},
		{"region phases without records, oversold, mixed", func() *history.History {
			h := bench.Generate(3000, 30)
			regional(h, false)
			oversold(h, 2, 2)
			mixed(h)
			return h
		}, plain, checks.Fail, false},
		{"tolerance, instances, oversold, mixed", func() *history.History {
			h := bench.Generate(3000, 7)
			for i := range h.Events {
				h.Events[i].Instance = i % 3
			}
			oversold(h, 3, 3)
			mixed(h)
			return h
		}, tolPol, checks.Fail, false},
		{"one key, many admissions", func() *history.History {
			h := bench.Generate(1500, 1)
			regional(h, true)
			oversold(h, 1, 4)
			return h
		}, tolPol, checks.Fail, false},
		{"tolerance, one instance", func() *history.History { h := bench.Generate(1000, 5); oversold(h, 2, 5); return h }, tolPol, checks.Skip, false},
		{"no region data", func() *history.History { h := bench.Generate(1000, 5); mixed(h); return h }, plain, checks.Skip, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.h()
			r := requireStreamMatchesRun(t, h, tc.pol, "regions", tc.every)
			require.Equal(t, tc.verdict, r.Verdict, r.Summary)
			// The counts are gathered in the first pass when the records
			// or the policy say regions may apply, else in a second pass
			// only when an event's phase says it does.
			file := filepath.Join(t.TempDir(), "h.jsonl")
			writeHistory(t, file, h)
			_, again := streamResultsAgain(t, file, tc.pol, checks.Options{Only: []string{"regions"}})
			require.Equal(t, strings.Contains(tc.name, "without records"), again)
		})
	}
}

// calibrateInto appends to h a calibrate phase of key: a burst of K+1
// requests from a whole bucket (K=10, r=5/s) at t0, then probes around
// the next due times; wrong makes the limiter wrong: "capacity" admits
// K+1, "refill" admits probes before their token, "advice" advises 0 s,
// "remaining" reports wrong counts, "error" loses a request of the burst.
func calibrateInto(h *history.History, name, key string, t0 int64, wrong string) {
	ms := int64(time.Millisecond)
	id := uint64(len(h.Events)) + 1_000_000
	add := func(e history.Event) {
		id++
		e.ID, e.Key, e.Phase, e.Tier = id, key, name, "free"
		h.Events = append(h.Events, e)
	}
	for i := range 11 {
		sent := t0 + int64(i)*ms/4
		e := history.Event{Intended: t0, Sent: sent, Recv: sent + 2*ms, Status: 200}
		e.XLimit, e.XRemaining, e.XReset = "10", fmt.Sprint(9-i), "1"
		if i == 10 && wrong != "capacity" {
			e.Status, e.RetryAfter, e.XRemaining = 429, "1", "0"
			if wrong == "advice" {
				e.RetryAfter = "0"
			}
		}
		if wrong == "remaining" && i < 10 {
			e.XRemaining = "9"
		}
		if wrong == "error" && i == 3 {
			e.Status, e.Err = 0, "timeout"
		}
		add(e)
	}
	// Probes: just before and after each of the next 3 due times (200 ms).
	for n := 1; n <= 3; n++ {
		due := t0 + int64(n)*200*ms
		before := history.Event{Intended: due - 30*ms, Sent: due - 30*ms, Recv: due - 28*ms, Status: 429}
		before.RetryAfter = "1"
		if wrong == "refill" && n == 2 {
			before.Status, before.RetryAfter = 200, ""
		}
		add(before)
		add(history.Event{Intended: due + 10*ms, Sent: due + 10*ms, Recv: due + 12*ms, Status: 200})
	}
	h.Phases = append(h.Phases, history.Phase{Name: name, Kind: "calibrate", Start: t0, End: t0 + 700*ms, Target: t0, Requests: 17})
}

// TestStreamerMatchesRunCalibration is the differential test of the
// streamed calibration: calibrate phases among other traffic (once more
// than 10,000 events: the default tolerance samples every other), measuring the declared
// policy and each kind of mismatch, several phases, an error in a burst,
// a declared tolerance; and no calibrate phase (a skip).
func TestStreamerMatchesRunCalibration(t *testing.T) {
	plain := benchPolicy(t, "")
	declared := benchPolicy(t, "tolerance:\n  timing: 30ms\n")
	sec := int64(time.Second)
	with := func(n int, phases ...string) func() *history.History {
		return func() *history.History {
			h := bench.Generate(n, 40)
			mixed(h)
			for i, wrong := range phases {
				calibrateInto(h, fmt.Sprintf("calibrate-%d", i), fmt.Sprintf("free-cal-%d", i), int64(i+1)*5*sec+sec/3, wrong)
			}
			// The engine writes an event when it completes.
			slices.SortStableFunc(h.Events, func(a, b history.Event) int { return int(a.Recv - b.Recv) })
			return h
		}
	}
	for _, tc := range []struct {
		name    string
		h       func() *history.History
		pol     *policy.Policy
		verdict checks.Verdict
		every   bool // with every check too
	}{
		{"as declared", with(12_000, ""), plain, checks.Pass, false},
		{"as declared, tolerance declared", with(3000, ""), declared, checks.Pass, true},
		{"capacity", with(3000, "capacity"), plain, checks.Fail, false},
		{"refill", with(3000, "refill"), plain, checks.Fail, false},
		{"advice", with(3000, "advice"), plain, checks.Fail, false},
		{"remaining", with(3000, "remaining"), plain, checks.Fail, false},
		{"an error in the burst", with(3000, "error"), plain, checks.Unknown, false},
		{"several phases", with(4000, "", "refill", "remaining", "capacity"), plain, checks.Fail, true},
		{"no calibrate phase", with(3000), plain, checks.Skip, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := requireStreamMatchesRun(t, tc.h(), tc.pol, checks.CalibrationCheck, tc.every)
			require.Equal(t, tc.verdict, r.Verdict, r.Summary)
		})
	}
}

// TestStreamerCalibrationNeedsTheEventCount: without n (SetEvents) the
// default tolerance cannot be sampled: calibration is UNKNOWN saying so
// when the run has a calibrate phase, and still a skip without one.
func TestStreamerCalibrationNeedsTheEventCount(t *testing.T) {
	pol := benchPolicy(t, "")
	for _, phase := range []bool{true, false} {
		h := bench.Generate(2000, 5)
		if phase {
			calibrateInto(h, "calibrate", "free-cal", int64(time.Second), "")
		}
		file := filepath.Join(t.TempDir(), "h.jsonl")
		writeHistory(t, file, h)
		rec, _, err := readRecords(file)
		require.NoError(t, err)
		s, err := checks.NewStreamer(rec, pol, checks.Options{Only: []string{checks.CalibrationCheck}})
		require.NoError(t, err)
		whole, err := history.ReadFile(file)
		require.NoError(t, err)
		for i := range whole.Events {
			s.Add(&whole.Events[i], uint64(i))
		}
		r := s.Results()[0]
		if !phase {
			require.Equal(t, checks.Skip, r.Verdict)
			continue
		}
		require.Equal(t, checks.Unknown, r.Verdict)
		require.Contains(t, r.Summary, "SetEvents")
	}
}

// TestStreamerDelay: delay streams only as the SKIP of a policy that
// declares no delay; a policy that declares one is refused by NewStreamer
// and StreamChecks says why.
func TestStreamerDelay(t *testing.T) {
	h := bench.Generate(2000, 5)
	mixed(h)
	r := requireStreamMatchesRun(t, h, benchPolicy(t, ""), checks.DelayCheck, true)
	require.Equal(t, checks.Skip, r.Verdict)

	delaying := benchPolicy(t, "delay:\n  max_wait: 500ms\n")
	require.True(t, delaying.Delays())
	require.NotContains(t, checks.StreamableUnder(delaying), checks.DelayCheck)
	_, err := checks.NewStreamer(&history.History{}, delaying, checks.Options{Only: []string{checks.DelayCheck}})
	require.ErrorContains(t, err, "declares no delay")
	_, ok, why := checks.StreamChecks(delaying, checks.Options{})
	require.False(t, ok)
	require.True(t, strings.HasSuffix(why, "delay streams only when the policy declares no delay (this one does)"), why)
	names, ok, _ := checks.StreamChecks(delaying, checks.Options{Off: []string{checks.DelayCheck}, Only: []string{"oversell", checks.DelayCheck}})
	require.True(t, ok)
	require.Equal(t, []string{"oversell"}, names)
}

// failPolicy is bench.PolicyYAML with its failure section replaced by
// failure (none when empty) and extra appended.
func failPolicy(t *testing.T, failure, extra string) *policy.Policy {
	t.Helper()
	y := strings.Replace(bench.PolicyYAML, "failure:\n  mode: open\n  store_timeout: 50ms\n", failure, 1)
	require.NotEqual(t, bench.PolicyYAML, y+"x")
	p, err := policy.Parse("bench-fail", []byte(y+extra))
	require.NoError(t, err)
	return p
}

// TestStreamerMatchesRunFailMode is the differential test of the streamed
// fail-mode: store-down and store-slow windows (several, one that never
// ended, a stall, a slow store within the timeout), each declared mode
// (open, closed, local, queue, undeclared), requests inside the windows
// that break the mode or its latency bound, admissions after a fault
// beyond a full bucket (credit created by the downtime: the recovery
// judged as oversell is, with its second pass), rules-down windows, an
// external run whose fault did and did not take effect, failures outside
// every fault (open, closed, the target's fallback after a fault and
// without one), weighted requests, variants, errors and several
// instances; and a run without faults.
func TestStreamerMatchesRunFailMode(t *testing.T) {
	sec, ms := int64(time.Second), int64(time.Millisecond)
	open := failPolicy(t, "failure:\n  mode: open\n  store_timeout: 50ms\n", "")
	closed := failPolicy(t, "failure:\n  mode: closed\n  store_timeout: 50ms\n", "")
	local := failPolicy(t, "failure:\n  mode: local\n  store_timeout: 50ms\n  local_share: 0.3\n", "")
	queue := failPolicy(t, "failure:\n  mode: queue\n  store_timeout: 50ms\n  queue_wait: 100ms\n", "")
	undeclared := failPolicy(t, "", "")
	rules := failPolicy(t, "failure:\n  mode: open\n  store_timeout: 50ms\n", "rules_fallback: free\n")
	in := func(e *history.Event, from, to int64) bool { return e.Sent >= from && e.Recv <= to }
	// during changes the requests inside [from, to]: every every-th gets
	// what f gives it.
	during := func(h *history.History, from, to int64, every int, f func(i int, e *history.Event)) {
		j := 0
		for i := range h.Events {
			if e := &h.Events[i]; in(e, from, to) {
				if j++; j%every == 0 {
					f(j, e)
				}
			}
		}
	}
	admit := func(_ int, e *history.Event) { e.Status, e.RetryAfter = 200, "" }
	refuse := func(_ int, e *history.Event) { e.Status, e.RetryAfter = 429, "1" }
	slow := func(_ int, e *history.Event) { e.Recv = e.Sent + 400*ms }
	unavailable := func(i int, e *history.Event) {
		e.Status, e.RetryAfter = 503, ""
		if i%2 == 0 {
			e.RetryAfter = "1"
		}
	}
	headerless := func(_ int, e *history.Event) { e.XLimit, e.XRemaining, e.XReset = "", "", "" }
	gen := func(n, keys int, mut func(h *history.History)) func() *history.History {
		return func() *history.History {
			h := bench.Generate(n, keys)
			mut(h)
			// The engine writes an event when it completes.
			slices.SortStableFunc(h.Events, func(a, b history.Event) int { return cmp.Compare(a.Recv, b.Recv) })
			return h
		}
	}
	for _, tc := range []struct {
		name    string
		h       func() *history.History
		pol     *policy.Policy
		verdict checks.Verdict
		every   bool // with every check too
	}{
		{"no faults", gen(1500, 5, func(h *history.History) {}), open, checks.Skip, false},
		{"no faults, the target's fallback", gen(1500, 5, func(h *history.History) {
			during(h, 0, 1<<62, 97, func(_ int, e *history.Event) { e.Fallback = "open" })
		}), open, checks.Pass, false},
		{"open, several windows, mixed", gen(4000, 15, func(h *history.History) {
			mixed(h)
			h.Faults = append([]history.Fault{{Kind: "store-down", Start: 5 * sec, End: 6 * sec}, {Kind: "store-slow", Param: "200ms", Start: 16 * sec, End: 17 * sec},
				{Kind: "store-slow", Param: "stall", Start: 19 * sec, End: 19*sec + 500*ms}, {Kind: "store-slow", Param: "10ms", Start: 21 * sec, End: 22 * sec}}, h.Faults...)
			during(h, 5*sec, 6*sec, 3, admit)
			during(h, 5*sec, 6*sec, 7, refuse)
			during(h, 16*sec, 17*sec, 11, slow)
			during(h, 21*sec, 22*sec, 5, refuse)
			// Credit after the faults: admissions beyond a full bucket.
			during(h, 7*sec, 16*sec, 1, admit)
			during(h, 23*sec, 28*sec, 1, admit)
		}), open, checks.Fail, true},
		{"open, correct, instances", gen(3000, 10, func(h *history.History) {
			for i := range h.Events {
				h.Events[i].Instance = i % 3
			}
			h.Faults = []history.Fault{{Kind: "store-down", Start: 3 * sec, End: 4 * sec}, {Kind: "store-down", Start: 10 * sec, End: 11 * sec, Cleared: 11*sec + 200*ms}}
			during(h, 3*sec, 4*sec, 1, admit)
			during(h, 10*sec, 11*sec, 1, admit)
		}), open, checks.Pass, false},
		{"closed, a window that never ended", gen(3000, 10, func(h *history.History) {
			mixed(h)
			h.Faults = []history.Fault{{Kind: "store-down", Start: 4 * sec, End: 5 * sec}, {Kind: "store-down", Start: 15 * sec}}
			during(h, 4*sec, 5*sec, 1, unavailable)
			during(h, 4*sec, 5*sec, 9, admit)
			during(h, 15*sec, 1<<62, 1, unavailable)
			during(h, 15*sec, 1<<62, 13, admit)
		}), closed, checks.Fail, false},
		{"closed, failed closed outside the faults", gen(3000, 10, func(h *history.History) {
			h.Faults = []history.Fault{{Kind: "store-down", Start: 4 * sec, End: 5 * sec}}
			during(h, 4*sec, 5*sec, 1, unavailable)
			during(h, 8*sec, 12*sec, 17, unavailable)
		}), closed, checks.Fail, false},
		{"local, instances", gen(4000, 5, func(h *history.History) {
			for i := range h.Events {
				h.Events[i].Instance = i % 2
			}
			h.Faults = []history.Fault{{Kind: "store-down", Start: 4 * sec, End: 7 * sec}, {Kind: "store-down", Start: 12 * sec, End: 13 * sec}}
			during(h, 4*sec, 7*sec, 1, admit)
			during(h, 12*sec, 13*sec, 2, admit)
		}), local, checks.Fail, false},
		{"queue", gen(2500, 5, func(h *history.History) {
			mixed(h)
			h.Faults = []history.Fault{{Kind: "store-slow", Param: "stall", Start: 4 * sec, End: 6 * sec}}
			during(h, 4*sec, 6*sec, 5, unavailable)
			during(h, 4*sec, 6*sec, 7, slow)
		}), queue, checks.Fail, false},
		{"undeclared", gen(2000, 5, func(h *history.History) {
			h.Faults = []history.Fault{{Kind: "store-down", Start: 4 * sec, End: 6 * sec}}
			during(h, 4*sec, 6*sec, 1, admit)
		}), undeclared, checks.Unknown, false},
		{"rules-down", gen(3000, 5, func(h *history.History) {
			h.Faults = []history.Fault{{Kind: "rules-down", Start: 4 * sec, End: 6 * sec}, {Kind: "rules-down", Start: 9 * sec, End: 10 * sec}, {Kind: "store-down", Start: 12 * sec, End: 13 * sec}}
			during(h, 4*sec, 6*sec, 1, admit)
			during(h, 9*sec, 10*sec, 1, refuse)
		}), rules, checks.Fail, false},
		{"failed open outside the faults, fallback after them", gen(4000, 10, func(h *history.History) {
			mixed(h)
			h.Faults = []history.Fault{{Kind: "store-down", Start: 4 * sec, End: 5 * sec}, {Kind: "store-slow", Param: "stall", Start: 14 * sec}}
			// The target's fallback after the fault (its aftermath) and
			// long after (counted), admissions without headers (failed
			// open), the first answers without headers too.
			during(h, 6*sec, 6*sec+300*ms, 1, func(_ int, e *history.Event) { e.Fallback = "open" })
			during(h, 9*sec, 10*sec, 7, func(_ int, e *history.Event) { e.Fallback = "open" })
			during(h, 0, 300*ms, 1, headerless)
			during(h, 7*sec, 12*sec, 5, headerless)
		}), open, checks.Fail, true},
		{"external, took effect and not", gen(3000, 5, func(h *history.History) {
			h.Run.Env = "external"
			h.Faults = []history.Fault{{Kind: "store-down", Start: 4 * sec, End: 5 * sec}, {Kind: "store-down", Start: 9 * sec, End: 10 * sec}}
			during(h, 4*sec, 5*sec, 1, admit)
		}), open, checks.Unknown, false}, // the second window's: a pass would claim it was seen
		{"external, none took effect", gen(3000, 5, func(h *history.History) {
			h.Run.Env = "external"
			h.Faults = []history.Fault{{Kind: "store-down", Start: 9 * sec, End: 10 * sec}}
		}), open, checks.Unknown, false},
		{"external, a fault that never ended", gen(3000, 5, func(h *history.History) {
			h.Run.Env = "external"
			h.Faults = []history.Fault{{Kind: "store-down", Start: 12 * sec}}
			during(h, 12*sec, 1<<62, 1, admit)
		}), open, checks.Pass, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := requireStreamMatchesRun(t, tc.h(), tc.pol, "fail-mode", tc.every)
			require.Equal(t, tc.verdict, r.Verdict, r.Summary)
			causes := map[string]int{}
			for _, e := range r.Evidence {
				causes[e.Cause]++
			}
			switch {
			case strings.Contains(tc.name, "several windows"):
				require.Positive(t, causes[checks.CauseAfterFault], "the recovery's certificates must be compared")
			case strings.Contains(tc.name, "failed open"):
				require.Positive(t, causes[checks.CauseFailedOpen])
			case strings.Contains(tc.name, "failed closed"):
				require.Positive(t, causes[checks.CauseFailedClosed])
			}
		})
	}
}

// TestStreamerFailModeWithoutItsSecondPass: fail-mode's results asked for
// without the second pass Again asked for (the recovery's flagged
// segments, the signatures' spans) say it was not judged.
func TestStreamerFailModeWithoutItsSecondPass(t *testing.T) {
	sec := int64(time.Second)
	h := bench.Generate(3000, 5)
	h.Faults = []history.Fault{{Kind: "store-down", Start: 2 * sec, End: 3 * sec}}
	oversold(h, 1, 9)
	file := filepath.Join(t.TempDir(), "h.jsonl")
	writeHistory(t, file, h)
	rec, n, err := readRecords(file)
	require.NoError(t, err)
	whole, err := history.ReadFile(file)
	require.NoError(t, err)
	for _, ask := range []bool{false, true} {
		s, err := checks.NewStreamer(rec, benchPolicy(t, ""), checks.Options{Only: []string{"fail-mode"}})
		require.NoError(t, err)
		s.SetEvents(n)
		for i := range whole.Events {
			s.Add(&whole.Events[i], uint64(i))
		}
		if ask {
			require.True(t, s.Again())
		}
		r := s.Results()[0]
		require.Equal(t, checks.Unknown, r.Verdict)
		require.Contains(t, r.Summary, "second pass")
	}
}

// TestStreamerMatchesRunBypass is the differential test of the streamed
// bypass: keys probed with identity variants that a correct limiter
// counts with the plain key (a pass), variants admitted beyond the
// envelope while the plain key fits (a fail), with the plain key oversold
// as well (explained by oversell), variants the identity declares refused
// and admitted, several variants of a key, variants appearing late
// (after pauses: the union born from a closed segment), weighted
// requests, faults and errors, several instances, a sliding window; and a
// run without variants (a skip).
func TestStreamerMatchesRunBypass(t *testing.T) {
	sec := int64(time.Second)
	pol := benchPolicy(t, "identity:\n  repeated: rejected\n  max_length: 40\n  too_long: reject\n")
	sliding, err := policy.Parse("bench-sliding", []byte(strings.Replace(bench.PolicyYAML,
		"      - algorithm: token-bucket\n        capacity: 10\n        rate: 5/s\n", "      - {algorithm: sliding-log, limit: 20, window: 2s}\n", 1)))
	require.NoError(t, err)
	// probe makes every every-th request of the keys with index below
	// keys (among 0 … 9 by name's last digit) a variant of name.
	probe := func(h *history.History, every, keys int, name string) {
		j := 0
		for i := range h.Events {
			e := &h.Events[i]
			if int(e.Key[len(e.Key)-1]-'0') >= keys || e.Variant != "" {
				continue
			}
			if j++; j%every == 0 {
				e.Variant = name
			}
		}
	}
	// extra adds, after every every-th request of the probed keys, an
	// admitted request of variant name sent with it: quota bought.
	next := uint64(10_000_000)
	extra := func(h *history.History, every, keys int, name string) {
		var add []history.Event
		for i := range h.Events {
			e := h.Events[i]
			if int(e.Key[len(e.Key)-1]-'0') >= keys || e.Variant != "" || i%every != 0 {
				continue
			}
			next++
			e.ID = next
			e.Variant, e.Status, e.RetryAfter = name, 200, ""
			e.Sent++
			e.Recv++
			add = append(add, e)
		}
		h.Events = append(h.Events, add...)
	}
	// burst adds n admitted requests of variant name for each of the keys
	// free-k0 … free-k(keys−1), sent at once at at: quota bought.
	burst := func(h *history.History, at int64, keys, n int, name string) {
		for k := range keys {
			for j := range n {
				next++
				e := history.Event{ID: next, Key: fmt.Sprintf("free-k%d", k), Tier: "free", Variant: name, Phase: "bypass", Intended: at, Sent: at + int64(j)*1000, Status: 200}
				e.Recv = e.Sent + 2_000_000
				e.XLimit, e.XRemaining, e.XReset = "10", "0", "1"
				h.Events = append(h.Events, e)
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
	gen := func(n, keys int, mut func(h *history.History)) func() *history.History {
		return func() *history.History {
			h := bench.Generate(n, keys)
			mut(h)
			slices.SortStableFunc(h.Events, func(a, b history.Event) int { return cmp.Compare(a.Recv, b.Recv) })
			return h
		}
	}
	for _, tc := range []struct {
		name    string
		h       func() *history.History
		pol     *policy.Policy
		verdict checks.Verdict
		every   bool // with every check too
	}{
		{"no variants", gen(1500, 10, func(h *history.History) {}), pol, checks.Skip, false},
		{"counted with the plain key", gen(2000, 10, func(h *history.History) {
			probe(h, 3, 5, "xff:10.0.0.1")
			probe(h, 4, 3, "case")
		}), pol, checks.Pass, false},
		{"bought quota, several variants", gen(3000, 10, func(h *history.History) {
			probe(h, 5, 6, "xff:10.0.0.2")
			extra(h, 3, 4, "case")
			burst(h, 5*sec, 3, 15, "space")
			burst(h, 9*sec, 2, 12, "xff:10.0.0.3")
		}), pol, checks.Fail, true},
		{"plain key oversold too", gen(2000, 10, func(h *history.History) {
			oversold(h, 1, 5)
			extra(h, 3, 4, "case")
		}), pol, checks.Pass, false},
		{"variants never admitted, the plain key oversold", gen(2000, 10, func(h *history.History) {
			oversold(h, 1, 6)
			probe(h, 7, 4, "case")
			for i := range h.Events {
				if e := &h.Events[i]; e.Variant != "" {
					e.Status, e.RetryAfter = 429, "1"
				}
			}
		}), pol, checks.Pass, false},
		{"refused variants admitted", gen(2000, 10, func(h *history.History) {
			extra(h, 9, 5, "repeat")
			extra(h, 11, 3, "long")
			probe(h, 13, 4, "repeat")
		}), pol, checks.Fail, false},
		{"late variants after pauses, weighted, faults", gen(4000, 10, func(h *history.History) {
			paused(h, 1000, 5*sec)
			for i := range h.Events {
				if e := &h.Events[i]; i%41 == 7 {
					e.Status, e.Err = 0, "timeout"
				}
			}
			h.Faults = []history.Fault{{Kind: "store-down", Start: 3 * sec, End: 4 * sec}}
			for i := range h.Events {
				if e := &h.Events[i]; e.Sent > 20*sec && e.Variant == "" && e.Key[len(e.Key)-1] < '4' && i%3 == 0 {
					e.Variant = "path:/V1/"
				}
			}
			burst(h, 26*sec, 3, 20, "case")
		}), pol, checks.Fail, true},
		{"instances, sliding window", gen(2500, 10, func(h *history.History) {
			for i := range h.Events {
				h.Events[i].Instance = i % 2
			}
			burst(h, 4*sec, 5, 25, "case")
		}), sliding, checks.Fail, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := requireStreamMatchesRun(t, tc.h(), tc.pol, "bypass", tc.every)
			require.Equal(t, tc.verdict, r.Verdict, r.Summary)
			if strings.Contains(tc.name, "plain key oversold") {
				require.Positive(t, r.Figures["excess_explained_by_the_plain_key"])
			}
		})
	}
}

// TestJudgeStreamedGivesJudgesDiagnosis: the streamed results of every
// check that streams, on a history where fail-mode and oversell both fail
// (credit after a fault; regions declared over several instances;
// variants), give Judge's gate, verdicts and diagnosis through
// JudgeStreamed.
func TestJudgeStreamedGivesJudgesDiagnosis(t *testing.T) {
	sec := int64(time.Second)
	pol := benchPolicy(t, "tolerance:\n  regions: 0.05\n")
	h := bench.Generate(3000, 5)
	for i := range h.Events {
		e := &h.Events[i]
		e.Instance = i % 2
		if e.Sent > 5*sec && e.Sent < 8*sec {
			e.Status, e.RetryAfter = 200, "" // credit after the fault, beyond every envelope
		}
	}
	h.Faults = []history.Fault{{Kind: "store-down", Start: 3 * sec, End: 4 * sec}}
	for k := range 2 {
		for j := range 15 {
			e := history.Event{ID: uint64(100_000 + 100*k + j), Key: fmt.Sprintf("free-k%d", k), Tier: "free", Variant: "case", Phase: "bypass", Intended: 20 * sec, Sent: 20*sec + int64(j)*1000, Status: 200}
			e.Recv = e.Sent + 2_000_000
			e.XLimit, e.XRemaining, e.XReset = "10", "0", "1"
			h.Events = append(h.Events, e)
		}
	}
	slices.SortStableFunc(h.Events, func(a, b history.Event) int { return cmp.Compare(a.Recv, b.Recv) })
	file := filepath.Join(t.TempDir(), "h.jsonl")
	writeHistory(t, file, h)
	whole, err := history.ReadFile(file)
	require.NoError(t, err)
	o := checks.Options{Only: checks.StreamableUnder(pol)}
	names, ok, why := checks.StreamChecks(pol, o)
	require.True(t, ok, why)
	want := checks.Judge(whole, pol, o)
	st := whole.StatsBy(func(e *history.Event) history.Outcome { return checks.Outcome(pol, e) })
	errs, by := checks.Errors(whole, pol)
	got := checks.JudgeStreamed(streamResults(t, file, pol, checks.Options{Only: names}), st, errs, by, pol, o)
	require.Equal(t, want, got)
	for _, name := range []string{"oversell", "fail-mode"} {
		require.Equal(t, checks.Fail, resultNamed(got, name).Verdict, "%s: %s", name, resultNamed(got, name).Summary)
	}
}
