package checks

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// diagnosisWant is a fixture's expected diagnosis: the root check that
// fails, the checks it explains; every other check passes or skips.
type diagnosisWant struct {
	root      string
	explained []string
	// mayExplain pass or are explained by root.
	mayExplain []string
}

// parseDiagnoseNote reads "diagnose ROOT: EXPLAINED…".
func parseDiagnoseNote(notes []string) (diagnosisWant, bool) {
	for _, n := range notes {
		rest, ok := strings.CutPrefix(n, "diagnose ")
		if !ok {
			continue
		}
		root, expl, _ := strings.Cut(rest, ":")
		return diagnosisWant{root: strings.TrimSpace(root), explained: strings.Fields(strings.ReplaceAll(expl, ",", " "))}, true
	}
	return diagnosisWant{}, false
}

// diagnosisProblems lists how rs depart from want.
func diagnosisProblems(rs []Result, want diagnosisWant) []string {
	var out []string
	for _, r := range rs {
		if r.Name == EvidenceCheck {
			if r.Verdict != Pass {
				out = append(out, fmt.Sprintf("the evidence gate is %s (%s)", r.Verdict, r.Summary))
			}
			continue
		}
		ok := []Verdict{Pass, Skip}
		switch {
		case r.Name == want.root:
			ok = []Verdict{Fail}
		case slices.Contains(want.explained, r.Name):
			ok = []Verdict{Explained}
		case slices.Contains(want.mayExplain, r.Name):
			ok = []Verdict{Pass, Skip, Explained}
		}
		if !slices.Contains(ok, r.Verdict) {
			out = append(out, fmt.Sprintf("%s is %s, want %s (%s)", r.Name, r.Verdict, ok[0], r.Summary))
		} else if r.Verdict == Explained && r.ExplainedBy != want.root {
			out = append(out, fmt.Sprintf("%s is explained by %s, want %s", r.Name, r.ExplainedBy, want.root))
		}
	}
	return out
}

// TestDiagnosisFixtures runs every check on testdata/diagnosis/*.jsonl and
// compares the diagnosis with the fixture's "diagnose ROOT: EXPLAINED" note.
// The fixtures come in pairs: the same symptom with and without the cause
// that explains it (outage-race / outage-credit, refusals-cost /
// short-advice).
func TestDiagnosisFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/diagnosis/*.jsonl")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 4)
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".jsonl"), func(t *testing.T) {
			h, p, _, _ := loadFixture(t, file)
			want, ok := parseDiagnoseNote(h.Run.Notes)
			require.True(t, ok, "%s needs a note \"diagnose ROOT: EXPLAINED…\"", file)
			rs := Judge(h, p, Options{})
			require.Empty(t, diagnosisProblems(rs, want), brief(rs))
		})
	}
}

// simSharedOpts is a run of keys against buckets a limiter keeps.
type simSharedOpts struct {
	rates map[string]float64 // requests per second per key (Poisson)
	// bucketOf maps a key to the bucket the limiter charges (a shared
	// bucket: every key to one).
	bucketOf func(key string) string
	// chargeRefused: a refusal costs a token too (the bucket goes into
	// debt, down to −K).
	chargeRefused bool
	K             float64
	r             float64
	dur           time.Duration
}

// simulateShared runs a token bucket per bucketOf(key), each request
// decided at an instant uniform in [Sent, Recv] (latency 0.2–3 ms), and
// answers with Retry-After the limiter would give.
func simulateShared(rng *rand.Rand, o simSharedOpts) *history.History {
	h := &history.History{Run: history.Run{T: history.TypeRun, Version: 1, ID: "sim-shared", Start: time.Unix(1_700_000_000, 0)}}
	type req struct {
		i int
		d int64
	}
	var evs []history.Event
	keys := make([]string, 0, len(o.rates))
	for k := range o.rates {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for t := int64(rng.ExpFloat64() * 1e9 / o.rates[k]); t < int64(o.dur); t += int64(rng.ExpFloat64() * 1e9 / o.rates[k]) {
			lat := 200_000 + rng.Int64N(2_800_000)
			evs = append(evs, history.Event{T: history.TypeEvent, Key: k, Sent: t, Intended: t, Recv: t + lat, Phase: "sim"})
		}
	}
	slices.SortStableFunc(evs, func(a, b history.Event) int { return cmpI64(a.Sent, b.Sent) })
	reqs := make([]req, len(evs))
	for i := range evs {
		evs[i].ID = uint64(i + 1)
		reqs[i] = req{i, evs[i].Sent + rng.Int64N(evs[i].Recv-evs[i].Sent+1)}
	}
	slices.SortStableFunc(reqs, func(a, b req) int { return cmpI64(a.d, b.d) })
	type bucket struct {
		level float64
		last  int64
	}
	state := map[string]*bucket{}
	for _, q := range reqs {
		e := &evs[q.i]
		id := o.bucketOf(e.Key)
		b := state[id]
		if b == nil {
			b = &bucket{level: o.K, last: q.d}
			state[id] = b
		}
		b.level = math.Min(o.K, b.level+o.r*float64(q.d-b.last)/1e9)
		b.last = q.d
		e.Status = 200
		if b.level >= 1-1e-9 {
			b.level--
			continue
		}
		if o.chargeRefused && b.level > -o.K {
			b.level--
		}
		e.Status = 429
		e.RetryAfter = strconv.FormatInt(int64(math.Ceil((1-b.level)/o.r)), 10)
	}
	h.Events = evs
	h.End = &history.End{T: history.TypeEnd, Requests: int64(len(evs))}
	return h
}

// TestDiagnosisIsStableAcrossRuns: the same defect simulated with other
// timings (20 seeds each) gets the same diagnosis every time — keys that
// collide in one bucket are an isolation defect (under-admission and
// retry-after explained by it), a limiter whose refusals cost tokens an
// under-admission one (retry-after explained by it), and a correct bucket
// passes.
func TestDiagnosisIsStableAcrossRuns(t *testing.T) {
	p, err := policy.Load(filepath.Join("testdata", "diagnosis", "bucket-open.yaml"))
	require.NoError(t, err)
	one := func(string) string { return "all" }
	own := func(k string) string { return k }
	for _, tc := range []struct {
		name string
		o    simSharedOpts
		want diagnosisWant
	}{
		{"shared bucket", simSharedOpts{rates: map[string]float64{"free-noisy": 40, "free-quiet-1": 2, "free-quiet-2": 2, "free-quiet-3": 2}, bucketOf: one},
			diagnosisWant{root: "isolation", mayExplain: []string{"under-admission", "retry-after"}}},
		// Both keys over the rate: their own refusals, had they cost,
		// would explain their refusals as well as the other's admissions
		// do; the admissions taken together fit one quota, so it is shared.
		{"shared bucket, two busy keys", simSharedOpts{rates: map[string]float64{"free-a": 25, "free-b": 25}, bucketOf: one},
			diagnosisWant{root: "isolation", mayExplain: []string{"under-admission", "retry-after"}}},
		{"refusals cost tokens", simSharedOpts{rates: map[string]float64{"free-a": 15}, bucketOf: own, chargeRefused: true},
			diagnosisWant{root: "under-admission", mayExplain: []string{"retry-after"}}},
		{"refusals cost tokens, beside quiet keys", simSharedOpts{rates: map[string]float64{"free-a": 15, "free-b": 12, "free-quiet": 2}, bucketOf: own, chargeRefused: true},
			diagnosisWant{root: "under-admission", mayExplain: []string{"retry-after"}}},
		{"a correct bucket", simSharedOpts{rates: map[string]float64{"free-a": 15, "free-b": 3}, bucketOf: own},
			diagnosisWant{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.K, o.r, o.dur = 10, 5, 6*time.Second
			for seed := range uint64(20) {
				h := simulateShared(rand.New(rand.NewPCG(seed, 27)), o)
				rs := Judge(h, p, Options{})
				require.Empty(t, diagnosisProblems(rs, tc.want), "seed %d: %s", seed, brief(rs))
			}
		})
	}
}

// brief is rs in a few lines: each check's verdict and summary, and its
// first evidence.
func brief(rs []Result) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "\n%s %s: %s", r.Name, r.Verdict, r.Summary)
		if len(r.Evidence) > 0 {
			fmt.Fprintf(&b, "\n    %s", r.Evidence[0].Message)
		}
	}
	return b.String()
}

// TestFailModeNotDeclared: a policy without a failure section promises no
// failure mode, so a fault's behaviour is measured, not judged as "open".
func TestFailModeNotDeclared(t *testing.T) {
	h, err := history.ReadFile(filepath.Join("testdata", "diagnosis", "undeclared-mode.jsonl.txt"))
	require.NoError(t, err)
	p, err := policy.Load(filepath.Join("testdata", h.Run.Policy))
	require.NoError(t, err)
	require.True(t, p.Failure.Undeclared)
	r := Run(h, p, Options{Only: []string{"fail-mode"}})[0]
	require.Equal(t, Unknown, r.Verdict, r.Summary)
	require.Contains(t, r.Summary, "declares no failure mode")
	require.Empty(t, r.Evidence)

	// The same run under a policy that declares open: the 429 during the
	// outage departs from it.
	p, err = policy.Load(filepath.Join("testdata", "diagnosis", "bucket-open.yaml"))
	require.NoError(t, err)
	require.False(t, p.Failure.Undeclared)
	r = Run(h, p, Options{Only: []string{"fail-mode"}})[0]
	require.Equal(t, Fail, r.Verdict, r.Summary)
}

// TestRetryAfterUntestedIsUnknown: when every probe a plan aimed at the
// advice ended in an error (a server's header-read timeout answering 400),
// retry-after says the advice was not tried instead of passing on the
// header's presence; a probe that was answered is judged.
func TestRetryAfterUntestedIsUnknown(t *testing.T) {
	p, err := policy.Load(filepath.Join("testdata", "diagnosis", "bucket-open.yaml"))
	require.NoError(t, err)
	run := func(probeStatus int) Result {
		h := &history.History{Run: history.Run{T: history.TypeRun, Version: 1, ID: "probe", Start: time.Unix(1_700_000_000, 0)},
			Phases: []history.Phase{{T: history.TypePhase, Name: "drain", Kind: "burst"}, {T: history.TypePhase, Name: "probe", Kind: "probe"}}}
		for i := range 11 {
			e := history.Event{T: history.TypeEvent, ID: uint64(i + 1), Key: "free-a", Phase: "drain", Sent: int64(i) * 1e6, Recv: int64(i)*1e6 + 5e5, Status: 200}
			if i == 10 {
				e.Status, e.RetryAfter = 429, "1"
			}
			h.Events = append(h.Events, e)
		}
		h.Events = append(h.Events, history.Event{T: history.TypeEvent, ID: 12, Key: "free-a", Phase: "probe", Sent: 1_200_000_000, Recv: 1_201_000_000, Status: probeStatus})
		h.End = &history.End{T: history.TypeEnd, Requests: int64(len(h.Events))}
		return Run(h, p, Options{Only: []string{"retry-after"}})[0]
	}
	r := run(400)
	require.Equal(t, Unknown, r.Verdict, r.Summary)
	require.Contains(t, r.Summary, "all 1 probe aimed at the advice ended in an error (status 400)")
	r = run(200)
	require.Equal(t, Pass, r.Verdict, r.Summary)
	require.Contains(t, r.Summary, "1 of 1 followed at the advised time")
}

// TestFallbackAfterAnInjectedFaultIsItsAftermath: answers the target marks
// X-RateLimit-Fallback after an injected store fault, until its store
// decides again (a breaker probing when traffic resumes), belong to that
// fault; the same answers with no fault injected are counted in a figure
// (the target says what decided them; the built-in services do so when a
// loaded machine slows a store call past its timeout), not failed.
func TestFallbackAfterAnInjectedFaultIsItsAftermath(t *testing.T) {
	p, err := policy.Load(filepath.Join("testdata", "diagnosis", "bucket-open.yaml"))
	require.NoError(t, err)
	mk := func(faulted bool) *history.History {
		h := &history.History{Run: history.Run{T: history.TypeRun, Version: 1, ID: "fb", Start: time.Unix(1_700_000_000, 0)}}
		if faulted {
			h.Faults = []history.Fault{{T: history.TypeFault, Kind: "store-down", Start: 1e9, End: 2e9}}
		}
		for i := range 5 {
			e := history.Event{T: history.TypeEvent, ID: uint64(i + 1), Key: "free-a", Phase: "after", Sent: 3_500_000_000 + int64(i)*1e6, Recv: 3_500_500_000 + int64(i)*1e6, Status: 200}
			if i < 3 {
				e.Fallback = "open" // the breaker still open: one probe first
			}
			h.Events = append(h.Events, e)
		}
		h.End = &history.End{T: history.TypeEnd, Requests: 5}
		return h
	}
	r := Run(mk(true), p, Options{Only: []string{"fail-mode"}})[0]
	require.Equal(t, Pass, r.Verdict, r.Summary)
	require.Zero(t, r.Figures["uninjected_fallback"])
	r = Run(mk(false), p, Options{Only: []string{"fail-mode"}})[0]
	require.Equal(t, Pass, r.Verdict, r.Summary)
	require.Equal(t, 3.0, r.Figures["uninjected_fallback"])
}
