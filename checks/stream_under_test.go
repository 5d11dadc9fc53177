package checks_test

import (
	"cmp"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// underSim is a run against a token bucket that may differ from the
// policy's: smaller (over-refusing), one for every key (a shared quota),
// charging refusals, one per instance.
type underSim struct {
	keys, n int
	// K, r: the limiter's bucket (tokens, per second); load the offered
	// rate per key as a multiple of the policy's 5/s.
	K, r, load float64
	maxLat     int64
	shared     bool // one bucket for every key
	charge     bool // refusals consume a token too
	insts      int  // instances, each with its own bucket (0: one)
	seed       uint64
	// edit changes event i after the run (faults, variants, costs, …).
	edit func(i int, e *history.Event)
}

// run simulates o; the events are in completion order (as the engine
// writes them).
func (o underSim) run() *history.History {
	rng := rand.New(rand.NewPCG(o.seed, 29))
	h := &history.History{Run: history.Run{T: history.TypeRun, Version: 1, ID: "under", Start: time.Unix(1_700_000_000, 300_000_000)}}
	type dec struct {
		i int
		d int64
	}
	evs := make([]history.Event, o.n)
	ds := make([]dec, o.n)
	t := int64(0)
	meanGap := 1e9 / (5 * o.load * float64(o.keys))
	for i := range evs {
		if rng.Float64() >= 0.3 {
			t += int64(rng.ExpFloat64() * meanGap)
		}
		lat := int64(100_000) + rng.Int64N(o.maxLat+1)
		e := history.Event{T: history.TypeEvent, ID: uint64(i + 1), Key: "k" + strconv.Itoa(rng.IntN(o.keys)), Sent: t, Intended: t, Recv: t + lat, Phase: "run"}
		if o.insts > 0 {
			e.Instance = rng.IntN(o.insts)
		}
		evs[i] = e
		ds[i] = dec{i, t + rng.Int64N(lat+1)}
	}
	slices.SortStableFunc(ds, func(a, b dec) int { return cmp.Compare(a.d, b.d) })
	type bucket struct {
		level float64
		last  int64
		seen  bool
	}
	state := map[string]*bucket{}
	for _, d := range ds {
		e := &evs[d.i]
		id := e.Key
		if o.shared {
			id = ""
		}
		id += "/" + strconv.Itoa(e.Instance)
		b := state[id]
		if b == nil {
			b = &bucket{level: o.K, last: d.d}
			state[id] = b
		}
		b.level = math.Min(o.K, b.level+o.r*float64(d.d-b.last)/1e9)
		b.last = d.d
		if b.level >= 1 {
			b.level--
			e.Status = 200
		} else {
			e.Status, e.RetryAfter = 429, "1"
			if o.charge {
				b.level = math.Max(-o.K, b.level-1)
			}
		}
	}
	if o.edit != nil {
		for i := range evs {
			o.edit(i, &evs[i])
		}
	}
	slices.SortStableFunc(evs, func(a, b history.Event) int { return cmp.Compare(a.Recv, b.Recv) })
	h.Events = evs
	h.End = &history.End{T: "end", Elapsed: t + o.maxLat + 1e6, Requests: int64(o.n)}
	return h
}

// underPolicy is a policy of one tier (every key) of limits, plus extra.
func underPolicy(t *testing.T, limits, extra string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse("under", []byte("name: under\ntiers:\n  - name: free\n    key_prefix: \"\"\n    limits:\n"+limits+extra))
	require.NoError(t, err)
	return p
}

// TestStreamerMatchesRunUnderAdmission is under-admission's differential
// test: the streamed judgement (a first pass for the tolerance, the
// anchors and which keys have refusals, a second judging each refusal
// once the stream has passed it) gives Run's result — verdict, summary,
// figures, every piece of evidence and its order — on buckets, sliding
// logs and counters, fixed windows (epoch and first-anchored), limits per
// instance and counting refusals, correct and over-refusing limiters,
// quotas shared between keys, refusals that cost, global guards, faults,
// fallbacks, variants, errors, weighted requests and peeks, refunds and a
// calibrate phase; long enough runs that the check forgets most of each
// key's candidates; with the default cap on evidence and with all of it,
// alone and beside every streaming check.
func TestStreamerMatchesRunUnderAdmission(t *testing.T) {
	sec := int64(time.Second)
	bucket := "      - {algorithm: token-bucket, capacity: 10, rate: 5/s}\n"
	messy := func(i int, e *history.Event) {
		switch {
		case i%11 == 3:
			e.Variant = "xff"
		case i%23 == 4:
			e.Status, e.Err, e.RetryAfter = 0, "timeout", ""
		case i%29 == 9:
			e.Fallback = "open"
		case i%31 == 7 && e.Status == 429:
			e.Scope = "global"
		case i%37 == 5:
			e.Status = 503
		}
	}
	for _, tc := range []struct {
		name     string
		limits   string
		extra    string
		sim      underSim
		faults   []history.Fault
		phases   []history.Phase
		verdict  checks.Verdict
		wantCaus string // a cause the evidence must show
	}{
		{"correct bucket, one key, long", bucket, "", underSim{keys: 1, n: 15_000, K: 10, r: 5, load: 1.5, maxLat: 3e6, seed: 1}, nil, nil, checks.Pass, ""},
		{"over-refusing bucket, many keys", bucket, "", underSim{keys: 30, n: 4000, K: 6, r: 3, load: 1.2, maxLat: 5e6, seed: 2}, nil, nil, checks.Fail, ""},
		{"over-refusing bucket, one key, long", bucket, "", underSim{keys: 1, n: 15_000, K: 8, r: 4.5, load: 1.3, maxLat: 2e6, seed: 3}, nil, nil, checks.Fail, ""},
		{"shared quota", bucket, "", underSim{keys: 6, n: 4000, K: 10, r: 5, load: 0.5, maxLat: 2e6, shared: true, seed: 4}, nil, nil, checks.Fail, checks.CauseSharedQuota},
		{"two tiers, another tier's quota served", bucket + "  - name: paid\n    key_prefix: \"p\"\n    limits:\n      - {algorithm: token-bucket, capacity: 100, rate: 50/s}\n", "",
			underSim{keys: 5, n: 4000, K: 8, r: 4, load: 1.2, maxLat: 2e6, seed: 18, edit: func(i int, e *history.Event) {
				e.XLimit = []string{"10", "100", "", "ten", "100"}[i%5]
				if i%7 == 0 {
					e.Variant = "xff"
				}
			}}, nil, nil, checks.Fail, ""},
		{"refusals cost", bucket, "", underSim{keys: 3, n: 4000, K: 10, r: 5, load: 1.6, maxLat: 2e6, charge: true, seed: 5}, nil, nil, checks.Fail, checks.CauseSelfInflicted},
		{"refusals cost, shared", bucket, "", underSim{keys: 4, n: 4000, K: 10, r: 5, load: 0.6, maxLat: 2e6, charge: true, shared: true, seed: 6}, nil, nil, checks.Fail, ""},
		{"sliding log, declared tolerance", "      - {algorithm: sliding-log, limit: 10, window: 2s}\n", "tolerance:\n  timing: 30ms\n", underSim{keys: 5, n: 4000, K: 8, r: 4, load: 1.3, maxLat: 4e6, seed: 7}, nil, nil, checks.Fail, ""},
		{"fixed window, epoch", "      - {algorithm: fixed-window, limit: 10, window: 2s}\n", "", underSim{keys: 5, n: 4000, K: 10, r: 5, load: 1.3, maxLat: 4e6, seed: 8}, nil, nil, "", ""},
		{"fixed window, first-anchored", "      - {algorithm: fixed-window, limit: 10, window: 2s, anchor: first}\n", "", underSim{keys: 5, n: 4000, K: 10, r: 5, load: 1.3, maxLat: 4e6, seed: 9}, nil, nil, "", ""},
		{"sliding counter, epoch, one key, long", "      - {algorithm: sliding-counter, limit: 10, window: 2s}\n", "", underSim{keys: 1, n: 15_000, K: 6, r: 3, load: 1.3, maxLat: 4e6, seed: 10}, nil, nil, "", ""},
		{"sliding counter, first-anchored, counts all", "      - {algorithm: sliding-counter, limit: 10, window: 1s, anchor: first, counts: all}\n", "", underSim{keys: 1, n: 12_000, K: 6, r: 5, load: 1.5, maxLat: 2e6, charge: true, seed: 11}, nil, nil, "", ""},
		{"bucket counting refusals, long", "      - {algorithm: token-bucket, capacity: 10, rate: 5/s, counts: all}\n", "", underSim{keys: 1, n: 13_000, K: 10, r: 5, load: 1.4, maxLat: 2e6, charge: true, seed: 12}, nil, nil, "", ""},
		{"bucket and sliding log", bucket + "      - {algorithm: sliding-log, limit: 30, window: 10s}\n", "", underSim{keys: 4, n: 4000, K: 7, r: 3, load: 1.2, maxLat: 3e6, seed: 13}, nil, nil, checks.Fail, ""},
		{"per instance", "      - {algorithm: token-bucket, capacity: 3, rate: 1/s, scope: instance}\n", "", underSim{keys: 4, n: 4000, K: 2, r: 0.8, load: 0.5, maxLat: 3e6, insts: 3, seed: 14}, nil, nil, checks.Fail, ""},
		{"faults, guards, variants, errors, calibrate", bucket, "", underSim{keys: 8, n: 4000, K: 4, r: 2, load: 1.3, maxLat: 6e6, insts: 2, seed: 15, edit: messy},
			[]history.Fault{{Kind: "store-down", Start: 20 * sec, End: 40 * sec}, {Kind: "store-slow", Start: 90 * sec, End: 100 * sec}},
			[]history.Phase{{T: "phase", Name: "run", Kind: "calibrate", Start: 0, End: 10 * sec}}, checks.Fail, ""},
		{"weighted and peeks", bucket, "cost:\n  name: X-Cost\n  min: 0\n  max: 20\n", underSim{keys: 6, n: 4000, K: 7, r: 4, load: 1.2, maxLat: 3e6, seed: 16, edit: func(i int, e *history.Event) {
			if i%5 == 0 {
				e.Cost = history.CostOf(int64(i / 5 % 4))
			}
		}}, nil, nil, checks.Fail, ""},
		{"refunds", bucket, "refund_on: [502]\n", underSim{keys: 6, n: 4000, K: 7, r: 4, load: 1.2, maxLat: 3e6, seed: 17, edit: func(i int, e *history.Event) {
			if i%13 == 0 && e.Status == 200 {
				e.Status = 502
			}
		}}, nil, nil, checks.Fail, ""},
	} {
		pol := underPolicy(t, tc.limits, tc.extra)
		h := tc.sim.run()
		h.Faults, h.Phases = tc.faults, tc.phases
		file := filepath.Join(t.TempDir(), "h.jsonl")
		writeHistory(t, file, h)
		whole, err := history.ReadFile(file)
		require.NoError(t, err)
		for _, maxEv := range []int{0, 1 << 20} {
			t.Run(tc.name+"/evidence "+strconv.Itoa(maxEv), func(t *testing.T) {
				// Each alone with the default cap, beside every streaming
				// check with all evidence.
				onlys := [][]string{{"under-admission"}, {"isolation"}}
				if maxEv > 0 {
					onlys = [][]string{checks.Streamable()}
				}
				var got []checks.Result
				var again bool
				for _, only := range onlys {
					o := checks.Options{Only: only, MaxEvidence: maxEv}
					want := checks.Run(whole, pol, o)
					var rs []checks.Result
					rs, again = streamResultsAgain(t, file, pol, o)
					require.Equal(t, want, rs)
					got = append(got, rs...)
				}
				if tc.wantCaus == checks.CauseSharedQuota {
					iso := resultNamed(got, "isolation")
					require.Equal(t, checks.Fail, iso.Verdict)
					require.True(t, slices.ContainsFunc(iso.Evidence, func(e checks.Evidence) bool { return e.Cause == tc.wantCaus }))
				}
				if strings.HasPrefix(tc.name, "two tiers") {
					require.Positive(t, resultNamed(got, "isolation").Figures["tier_mismatches"])
				}
				r := resultNamed(got, "under-admission")
				if tc.verdict != "" {
					require.Equal(t, tc.verdict, r.Verdict, r.Summary)
				}
				require.Positive(t, r.Figures["rejections_judged"], r.Summary)
				require.True(t, again, "refusals to judge take the second pass")
				if tc.wantCaus == checks.CauseSelfInflicted {
					require.True(t, slices.ContainsFunc(r.Evidence, func(e checks.Evidence) bool { return e.Cause == tc.wantCaus }), "cause %s", tc.wantCaus)
				}
				if strings.Contains(tc.name, "long") {
					require.Greater(t, len(h.Events), 3*4096)
				}
			})
		}
	}
}

// TestStreamerUnderAdmissionNeedsTheEventCount: without the number of
// events (SetEvents) the default tolerance cannot be sampled as Run
// samples it: under-admission and isolation are UNKNOWN, saying why; with
// the count, Run's results.
func TestStreamerUnderAdmissionNeedsTheEventCount(t *testing.T) {
	pol := underPolicy(t, "      - {algorithm: token-bucket, capacity: 10, rate: 5/s}\n", "")
	file := filepath.Join(t.TempDir(), "h.jsonl")
	writeHistory(t, file, underSim{keys: 3, n: 600, K: 6, r: 3, load: 1.2, maxLat: 2e6, seed: 20}.run())
	rec, n, err := readRecords(file)
	require.NoError(t, err)
	o := checks.Options{Only: []string{"under-admission", "isolation"}}
	s, err := checks.NewStreamer(rec, pol, o)
	require.NoError(t, err)
	streamInto(t, file, s.Add)
	require.False(t, s.Again())
	for _, r := range s.Results() {
		require.Equal(t, checks.Unknown, r.Verdict, r.Name)
		require.Contains(t, r.Summary, "SetEvents", r.Name)
	}
	whole, err := history.ReadFile(file)
	require.NoError(t, err)
	s, err = checks.NewStreamer(rec, pol, o)
	require.NoError(t, err)
	s.SetEvents(n)
	streamInto(t, file, s.Add)
	require.True(t, s.Again())
	streamInto(t, file, s.AddAgain)
	require.Equal(t, checks.Run(whole, pol, o), s.Results())
}
