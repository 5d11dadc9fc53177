package checks

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// resultOf is the result of check name in rs.
func resultOf(t *testing.T, rs []Result, name string) Result {
	t.Helper()
	for _, r := range rs {
		if r.Name == name {
			return r
		}
	}
	require.Failf(t, "no result", "check %s", name)
	return Result{}
}

// causes counts rs' evidence naming cause.
func causes(rs []Result, cause string) int {
	n := 0
	for _, r := range rs {
		for _, e := range r.Evidence {
			if e.Cause == cause {
				n++
			}
		}
	}
	return n
}

// The wall-clock limiter's two symptoms (plan clock-step) are one defect
// named after the step: the forward step's overrun explains the backward
// step's wrongful refusals and the advice they gave.
func TestClockStepNamedAsCause(t *testing.T) {
	h, p, _, _ := loadFixture(t, "testdata/diagnosis/clock-step-wall.jsonl")
	rs := Judge(h, p, Options{})
	over := resultOf(t, rs, "oversell")
	require.Equal(t, Fail, over.Verdict, over.Summary)
	require.NotEmpty(t, over.Evidence)
	assert.Equal(t, CauseClockStep, over.Evidence[0].Cause)
	assert.Contains(t, over.Evidence[0].Message, "after instance 0's clock stepped forward by 3s")
	assert.Contains(t, over.Evidence[0].Message, "its Date header moved")
	under := resultOf(t, rs, "under-admission")
	require.Equal(t, Explained, under.Verdict, under.Summary)
	assert.Equal(t, "oversell", under.ExplainedBy)
	for _, e := range under.Evidence {
		assert.Equal(t, CauseClockStep, e.Cause, e.Message)
		if e.From != 0 || e.To != 0 {
			assert.Contains(t, e.Message, "stepped back by 3s")
		}
	}
}

// A limiter whose refusals cost tokens under-admits on the control key,
// which no step touched, as on the key drained during the step: the step
// is not blamed.
func TestClockStepNotBlamedWhenAControlKeyFailsToo(t *testing.T) {
	h, p, _, _ := loadFixture(t, "testdata/clockstep/deduct-on-reject.jsonl")
	rs := Judge(h, p, Options{})
	under := resultOf(t, rs, "under-admission")
	require.Equal(t, Fail, under.Verdict, under.Summary)
	assert.Contains(t, under.Summary, "which no clock step touched, fails too: not blamed on a clock step")
	assert.Zero(t, causes(rs, CauseClockStep))
	assert.Contains(t, resultOf(t, rs, "oversell").Summary, "across 2 step(s) of an instance's clock that took effect")
}

// In a run against someone else's service (a hook stepped its clock) only
// the Date headers show that the step happened: without them, or when they
// did not move, nothing is named after the step and the summaries say the
// run does not show how the limiter meets one.
func TestClockStepTookEffectOnlyWhenShown(t *testing.T) {
	for _, c := range []struct {
		name     string
		env      string
		date     func(e *history.Event, start time.Time) string
		verified bool
		why      string
	}{
		{"own environment", "embedded", nil, true, ""},
		{"external, the Date header moved", "external", nil, true, ""},
		{"external, no Date header", "external", func(*history.Event, time.Time) string { return "" }, false,
			"no answer carried a Date header both during the step and outside it: nothing shows that the step happened"},
		{"external, the Date header did not move", "external", func(e *history.Event, start time.Time) string {
			return start.Add(time.Duration(e.Recv)).UTC().Format(httpDate)
		}, false, "not 3s (median before it, during the step): the step may never have happened"},
		{"own environment, no Date header", "embedded", func(*history.Event, time.Time) string { return "" }, true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, p, _, _ := loadFixture(t, "testdata/diagnosis/clock-step-wall.jsonl")
			h.Run.Env = c.env
			if c.date != nil {
				for i := range h.Events {
					h.Events[i].Date = c.date(&h.Events[i], h.Run.Start)
				}
			}
			rs := Judge(h, p, Options{})
			over := resultOf(t, rs, "oversell")
			require.Equal(t, Fail, over.Verdict, "an overrun is an overrun whatever caused it: %s", over.Summary)
			if c.verified {
				assert.Positive(t, causes(rs, CauseClockStep))
				return
			}
			assert.Zero(t, causes(rs, CauseClockStep))
			assert.Contains(t, over.Summary, "was not shown to have taken effect")
			assert.Contains(t, over.Summary, c.why)
		})
	}
}

func TestClockStepsOfFaults(t *testing.T) {
	for _, c := range []struct {
		name  string
		fault history.Fault
		want  []clockStep
	}{
		{"forward and back on one instance", history.Fault{Kind: "clock-skew", Target: "instance 0", Param: "+3s", Start: 10, End: 20},
			[]clockStep{{inst: 0, at: 10, by: 3 * time.Second}, {inst: 0, at: 20, by: -3 * time.Second}}},
		{"back first, instance from the param, still open", history.Fault{Kind: "clock-skew", Param: "-2s@1", Start: 10},
			[]clockStep{{inst: 1, at: 10, by: -2 * time.Second}}},
		{"every instance", history.Fault{Kind: "clock-skew", Param: "500ms", Start: 10, End: 30},
			[]clockStep{{inst: -1, at: 10, by: 500 * time.Millisecond}, {inst: -1, at: 30, by: -500 * time.Millisecond}}},
		{"not a clock fault", history.Fault{Kind: "store-down", Start: 10, End: 20}, nil},
		{"an unreadable param", history.Fault{Kind: "clock-skew", Param: "soon", Start: 10, End: 20}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := &history.History{Faults: []history.Fault{c.fault}}
			ix := newIndex(h, policy.Default(), Options{})
			var got []clockStep
			for _, s := range ix.clockSteps() {
				got = append(got, clockStep{inst: s.inst, at: s.at, by: s.by})
			}
			assert.Equal(t, c.want, got)
		})
	}
}

func TestClockStepWhat(t *testing.T) {
	s := clockStep{inst: 0, at: int64(1500 * time.Millisecond), by: -3 * time.Second}
	assert.Equal(t, "instance 0's clock stepped back by 3s at 1.5s", s.what())
	s.inst = -1
	assert.True(t, strings.HasPrefix(s.what(), "every instance's clock stepped back"))
}
