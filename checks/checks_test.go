package checks

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// loadFixture reads testdata/name.jsonl and the policy its run header names.
// A note "expect 1 2 3" lists request ids the evidence must name; "expect
// skip" says the check does not apply.
func loadFixture(t *testing.T, file string) (*history.History, *policy.Policy, []uint64, bool) {
	t.Helper()
	h, err := history.ReadFile(file)
	require.NoError(t, err)
	require.NotEmpty(t, h.Run.Policy, "%s: the run header must name its policy", file)
	p, err := policy.Load(filepath.Join("testdata", h.Run.Policy))
	require.NoError(t, err)
	var want []uint64
	skip := false
	for _, n := range h.Run.Notes {
		rest, ok := strings.CutPrefix(n, "expect")
		if !ok {
			continue
		}
		for _, f := range strings.Fields(rest) {
			if f == "skip" {
				skip = true
				continue
			}
			id, err := strconv.ParseUint(f, 10, 64)
			require.NoError(t, err, "%s: note %q", file, n)
			want = append(want, id)
		}
	}
	return h, p, want, skip
}

func TestFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/*.jsonl")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	covered := map[string][2]bool{}
	for _, file := range files {
		base := strings.TrimSuffix(filepath.Base(file), ".jsonl")
		var name string
		var bad bool
		for _, n := range Names() {
			if strings.HasPrefix(base, n+"-ok") {
				name = n
			} else if strings.HasPrefix(base, n+"-bad") {
				name, bad = n, true
			}
		}
		require.NotEmpty(t, name, "%s: name fixtures <check>-ok-* or <check>-bad-*", file)
		c := covered[name]
		c[btoi(bad)] = true
		covered[name] = c
		t.Run(base, func(t *testing.T) {
			h, p, want, skip := loadFixture(t, file)
			rs := Run(h, p, Options{Only: []string{name}})
			require.Len(t, rs, 1)
			r := rs[0]
			assert.Equal(t, name, r.Name)
			assert.NotEmpty(t, r.Summary)
			switch {
			case bad:
				require.Equal(t, Fail, r.Verdict, "%s: %s", r.Summary, dump(r))
				require.NotEmpty(t, r.Evidence)
				var got []uint64
				for _, e := range r.Evidence {
					assert.NotEmpty(t, e.Message)
					got = append(got, e.RequestIDs...)
				}
				for _, id := range want {
					assert.Contains(t, got, id, "evidence must name request %d: %s", id, dump(r))
				}
				assert.Equal(t, float64(r.Figures["violations"]) > 0, true)
			case skip:
				assert.Equal(t, Skip, r.Verdict, "%s", dump(r))
			default:
				assert.Equal(t, Pass, r.Verdict, "%s", dump(r))
				assert.Empty(t, r.Evidence)
			}
		})
	}
	for _, n := range Names() {
		assert.Equal(t, [2]bool{true, true}, covered[n], "check %s needs an -ok and a -bad fixture", n)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func dump(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

func TestFixtureFigures(t *testing.T) {
	h, p, _, _ := loadFixture(t, "testdata/oversell-ok-fixed-boundary.jsonl")
	r := Run(h, p, Options{Only: []string{"oversell"}})[0]
	assert.Equal(t, Pass, r.Verdict)
	assert.Equal(t, 11.0, r.Figures["worst_rolling_window"], "10 sent in 150ms around the boundary plus the straddler")
	assert.InDelta(t, 2.2, r.Figures["boundary_ratio"], 1e-9)

	h, p, _, _ = loadFixture(t, "testdata/instances-bad.jsonl")
	r = Run(h, p, Options{Only: []string{"instances"}})[0]
	require.Equal(t, Fail, r.Verdict)
	assert.Contains(t, r.Evidence[0].Message, "key free-a admitted 30 across 3 instances where one quota allows 10")
	assert.Contains(t, r.Evidence[0].Message, "(3.0×); each instance's own admissions fit one quota: state kept per instance")
	assert.Equal(t, CausePerInstanceState, r.Evidence[0].Cause)
	assert.Equal(t, 3.0, r.Figures["instances"])

	// An instance that charges its refused requests refuses with room left
	// by its admissions alone: per-instance state still, not shared state.
	h, p, _, _ = loadFixture(t, "testdata/instances-bad-refusals-cost.jsonl")
	r = Run(h, p, Options{Only: []string{"instances"}})[0]
	require.Equal(t, Fail, r.Verdict)
	assert.Equal(t, CausePerInstanceState, r.Evidence[0].Cause)
	assert.Contains(t, r.Evidence[0].Message, "state kept per instance")

	h, p, _, _ = loadFixture(t, "testdata/oversell-bad-burst.jsonl")
	r = Run(h, p, Options{Only: []string{"oversell"}, MaxEvidence: 1})[0]
	assert.Equal(t, "12 requests admitted in 5ms; a bucket of K=10 refilling at 5/s allows at most 10", r.Evidence[0].Message)
	assert.InDelta(t, 1.2, r.Figures["max_overrun"], 0.01)
}

func TestRunAllOnFixtures(t *testing.T) {
	// Every check runs on every fixture without panicking, and returns a
	// known verdict with a summary.
	files, _ := filepath.Glob("testdata/*.jsonl")
	for _, file := range files {
		h, p, _, _ := loadFixture(t, file)
		rs := Run(h, p, Options{})
		require.Len(t, rs, len(Names()))
		for i, r := range rs {
			assert.Equal(t, Names()[i], r.Name)
			assert.Contains(t, []Verdict{Pass, Fail, Unknown, Skip}, r.Verdict)
			assert.NotEmpty(t, r.Summary, "%s %s", file, r.Name)
			assert.LessOrEqual(t, len(r.Evidence), DefaultMaxEvidence)
		}
	}
}

func TestValidateAndNames(t *testing.T) {
	require.NoError(t, Validate([]string{"oversell", "regions"}))
	err := Validate([]string{"oversell", "overcell"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"overcell"`)
	assert.Contains(t, err.Error(), "under-admission")
	assert.Equal(t, []string{"oversell", "under-admission", "token-bounds", "retry-after", "headers", "isolation",
		"instances", "fail-mode", "downstream", "bypass", "calibration", "regions", "delay"}, Names())
	all := All()
	require.Len(t, all, len(Names()))
	for i, c := range all {
		assert.Equal(t, Names()[i], c.Name)
		assert.NotEmpty(t, c.Doc)
	}
	h, p, _, _ := loadFixture(t, "testdata/oversell-bad-burst.jsonl")
	assert.Equal(t, Fail, all[0].Check(h, p, Options{}).Verdict)
	rs := Run(h, p, Options{Only: []string{"nope"}})
	require.Len(t, rs, 1)
	assert.Equal(t, Unknown, rs[0].Verdict)
}

func TestEvidenceCap(t *testing.T) {
	// 50 keys each oversold: 5 evidence items, 50 violations counted.
	p := policy.Default()
	h := &history.History{}
	id := uint64(0)
	for k := 0; k < 50; k++ {
		for i := 0; i < 12; i++ {
			id++
			h.Events = append(h.Events, history.Event{ID: id, Key: "free-" + strconv.Itoa(k), Sent: 0, Recv: 1e6, Status: 200})
		}
	}
	r := Run(h, p, Options{Only: []string{"oversell"}})[0]
	assert.Equal(t, Fail, r.Verdict)
	assert.Len(t, r.Evidence, 5)
	assert.Equal(t, 50.0, r.Figures["violations"])
	r = Run(h, p, Options{Only: []string{"oversell"}, MaxEvidence: 2})[0]
	assert.Len(t, r.Evidence, 2)
}

func TestSlackHidesViolation(t *testing.T) {
	// 11 admitted 100ms apart from a burst of 10: with 200ms slack the 11th
	// could have come at 200ms.
	p := policy.Default()
	h := &history.History{}
	for i := 0; i < 10; i++ {
		h.Events = append(h.Events, history.Event{ID: uint64(i + 1), Key: "free-a", Sent: 0, Recv: 1e6, Status: 200})
	}
	h.Events = append(h.Events, history.Event{ID: 11, Key: "free-a", Sent: 100e6, Recv: 101e6, Status: 200})
	assert.Equal(t, Fail, Run(h, p, Options{Only: []string{"oversell"}})[0].Verdict)
	assert.Equal(t, Pass, Run(h, p, Options{Only: []string{"oversell"}, Slack: 100e6})[0].Verdict)
}

func TestInterruptedHistoryStillJudged(t *testing.T) {
	h, p, _, _ := loadFixture(t, "testdata/oversell-bad-burst.jsonl")
	h.End = nil
	require.True(t, h.Interrupted())
	assert.Equal(t, Fail, Run(h, p, Options{Only: []string{"oversell"}})[0].Verdict)
}

func TestGolden(t *testing.T) {
	for _, c := range []struct{ fixture, check string }{
		{"oversell-bad-burst", "oversell"},
		{"retry-after-bad", "retry-after"},
		{"instances-bad", "instances"},
		{"fail-mode-bad", "fail-mode"},
		{"headers-bad", "headers"},
	} {
		t.Run(c.fixture, func(t *testing.T) {
			h, p, _, _ := loadFixture(t, filepath.Join("testdata", c.fixture+".jsonl"))
			r := Run(h, p, Options{Only: []string{c.check}})[0]
			got, err := json.MarshalIndent(r, "", "  ")
			require.NoError(t, err)
			got = append(got, '\n')
			file := filepath.Join("testdata", "golden", c.fixture+".json")
			if *update {
				require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
				require.NoError(t, os.WriteFile(file, got, 0o644))
			}
			want, err := os.ReadFile(file)
			require.NoError(t, err, "run go test ./checks -run TestGolden -update to create it")
			assert.Equal(t, string(want), string(got))
		})
	}
}

func TestMergeOrder(t *testing.T) {
	assert.Equal(t, Fail, Merge(Pass, Fail))
	assert.Equal(t, Unknown, Merge(Unknown, Pass))
	assert.Equal(t, Pass, Merge(Skip, Pass))
	assert.True(t, slices.Contains([]Verdict{Pass}, Overall([]Result{{Verdict: Skip}})))
}

// TestMissingHeadersAreMarked: the evidence of a response without a
// declared header names CauseMissingHeader (the diagnosis never explains
// it away); a present header with a wrong value does not.
func TestMissingHeadersAreMarked(t *testing.T) {
	h, p, _, _ := loadFixture(t, filepath.Join("testdata", "headers-bad.jsonl"))
	r := Run(h, p, Options{Only: []string{"headers"}})[0]
	require.Equal(t, Fail, r.Verdict)
	causes := map[uint64]string{}
	for _, e := range r.Evidence {
		causes[e.RequestIDs[0]] = e.Cause
	}
	// Request 2 has no RateLimit field; 1, 3 and 4 have wrong ones.
	assert.Equal(t, map[uint64]string{1: "", 2: CauseMissingHeader, 3: "", 4: ""}, causes)
}

// Issue 26 item 7: a downstream counter that went backwards (a restart
// reset it) passed as "saw 0 arrivals". Each fixture under
// testdata/unknown/downstream-reset-* (downstream-ok-readings with its
// counter reset) must give UNKNOWN naming the reset; the intact run still
// passes and downstream-bad-* still fail (TestFixtures).
func TestDownstreamCounterResetIsUnknown(t *testing.T) {
	files, err := filepath.Glob("testdata/unknown/downstream-reset-*.jsonl")
	require.NoError(t, err)
	require.Len(t, files, 2)
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			h, p, _, _ := loadFixture(t, file)
			r := Run(h, p, Options{Only: []string{"downstream"}})[0]
			require.Equal(t, Unknown, r.Verdict, dump(r))
			require.Contains(t, r.Summary, "counter went backwards")
			require.NotEmpty(t, r.Evidence)
			require.Equal(t, "counter-reset", r.Evidence[0].Cause)
			require.Contains(t, r.Evidence[0].Message, "a counter reset")
			require.NotContains(t, r.Summary, "saw")
		})
	}
}

// Issue 26 item 8: every slack a check used is named in its result, and a
// slack wider than the run's own timing uncertainty warns. Without one,
// nothing is named and nothing warns.
func TestSlackIsNamed(t *testing.T) {
	h, p, _, _ := loadFixture(t, "testdata/oversell-bad-burst.jsonl")
	r := Run(h, p, Options{Only: []string{"oversell"}})[0]
	require.Equal(t, Fail, r.Verdict)
	require.Empty(t, r.Slack, "no clock_quantum, no Checks.Slack: no slack to name")
	require.Empty(t, r.Warnings)

	wide := *p
	wide.ClockQuantum = policy.Duration(10 * time.Second)
	r = Run(h, &wide, Options{Only: []string{"oversell"}, Slack: 2 * time.Millisecond})[0]
	require.Contains(t, r.Summary, "(slack: clock_quantum 10s, Checks.Slack 2ms)")
	require.Equal(t, []string{"clock_quantum", "Checks.Slack"}, []string{r.Slack[0].Name, r.Slack[1].Name})
	require.Len(t, r.Warnings, 1, "the 2ms skew is within the run's uncertainty; the 10s quantum is not: %v", r.Warnings)
	require.Contains(t, r.Warnings[0], "oversell: clock_quantum 10s is wider than this run's own timing uncertainty")

	h, p, _, _ = loadFixture(t, "testdata/under-admission-ok.jsonl")
	u := Run(h, p, Options{Only: []string{"under-admission"}})[0]
	require.Equal(t, Pass, u.Verdict)
	require.Contains(t, u.Summary, "tolerance.timing (default)", "the default timing tolerance is named too")
	require.Empty(t, u.Warnings, "a default derived from the run's own latency does not warn")
}

// Issue 26 item 6: in an external run (a hook or proxy on someone else's
// service) a store fault whose window shows no change of behaviour is not
// evidence about the failure mode: UNKNOWN, where the old check said FAIL
// ("fail-closed must reject"). The same run with the outage visible (503s
// where 429s were) is judged, and passes.
func TestFailModeNeedsAFaultThatTookEffect(t *testing.T) {
	h, p, _, _ := loadFixture(t, "testdata/unknown/fail-mode-noeffect.jsonl")
	r := Run(h, p, Options{Only: []string{"fail-mode"}})[0]
	require.Equal(t, Unknown, r.Verdict, dump(r))
	require.Contains(t, r.Summary, "the fault hook ran but no behaviour changed")
	require.Contains(t, r.Summary, "the fault may never have happened")

	h, p, _, _ = loadFixture(t, "testdata/unknown/fail-mode-effect.jsonl")
	r = Run(h, p, Options{Only: []string{"fail-mode"}})[0]
	require.Equal(t, Pass, r.Verdict, dump(r))

	h, p, _, _ = loadFixture(t, "testdata/unknown/fail-mode-noeffect.jsonl")
	h.Run.Env = "embedded" // a store rlverify runs: the fault is real
	r = Run(h, p, Options{Only: []string{"fail-mode"}})[0]
	require.Equal(t, Fail, r.Verdict, dump(r))
}

// Admissions after a fault's recovery that the target marks as decided by
// its failure mode (X-RateLimit-Fallback: its store still too slow under
// load) are judged by no envelope: they are not "credit created by the
// downtime". Unmarked, the same admissions are.
func TestRecoveryLeavesFallbackDecisionsUnjudged(t *testing.T) {
	h, p, _, _ := loadFixture(t, "testdata/diagnosis/outage-credit.jsonl")
	r := Run(h, p, Options{Only: []string{"fail-mode"}})[0]
	require.Equal(t, Fail, r.Verdict, dump(r))
	require.Equal(t, CauseAfterFault, r.Evidence[0].Cause)

	for i := range h.Events {
		if h.Events[i].Phase == "after" {
			h.Events[i].Fallback = "store-timeout"
		}
	}
	r = Run(h, p, Options{Only: []string{"fail-mode"}})[0]
	require.NotEqual(t, Fail, r.Verdict, dump(r))
	for _, e := range r.Evidence {
		require.NotEqual(t, CauseAfterFault, e.Cause, e.Message)
	}
}
