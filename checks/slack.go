package checks

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Slack is one allowance a check used beyond the exact arithmetic. Every
// slack a check used is named in its result (Result.Slack) and its
// summary: a PASS that only holds because of a slack says so.
type Slack struct {
	// Name is the setting: clock_quantum (policy), Checks.Slack (the
	// checks' Options.Slack, as the library's AttackOptions names it; the
	// command says its flag, --clock-skew), tolerance.timing (declared or
	// default), tolerance.regions.
	Name string `json:"name"`
	// Value is the slack as written (10s, 5%).
	Value string `json:"value"`
	// Ns is a duration slack in ns; Ratio a relative one (0.05 = 5%).
	Ns    int64   `json:"ns,omitempty"`
	Ratio float64 `json:"ratio,omitempty"`
	// Widens says what the slack widens.
	Widens string `json:"widens"`
}

// Which checks use which slack. The decision-interval slack widens every
// request's [sent, received] on both sides; the timing tolerance excuses
// refusals and advice; the regions tolerance lets admissions overrun.
var (
	intervalSlackChecks = []string{"oversell", "under-admission", "retry-after", "isolation", "instances",
		"fail-mode", "downstream", "bypass", CalibrationCheck, "regions"}
	timingSlackChecks  = []string{"under-admission", "retry-after", CalibrationCheck}
	regionsSlackChecks = []string{"regions", "downstream"}
)

// slacks returns the slacks the check name used on this run.
func (ix *index) slacks(name string) []Slack {
	var out []Slack
	if slices.Contains(intervalSlackChecks, name) {
		if q := ix.p.ClockQuantum.D(); q > 0 {
			out = append(out, Slack{Name: "clock_quantum", Value: fmtDur(q), Ns: int64(q), Widens: "every decision interval, on both sides"})
		}
		if s := ix.o.Slack; s > 0 {
			out = append(out, Slack{Name: "Checks.Slack", Value: fmtDur(s), Ns: int64(s), Widens: "every decision interval, on both sides"})
		}
	}
	if slices.Contains(timingSlackChecks, name) && ix.tol > 0 {
		what := "tolerance.timing"
		if ix.p.Tolerance.Timing.D() <= 0 {
			what += " (default)"
		}
		out = append(out, Slack{Name: what, Value: fmtDur(time.Duration(ix.tol)), Ns: ix.tol, Widens: "how late capacity may be freed before a refusal or advice counts as wrong"})
	}
	if slices.Contains(regionsSlackChecks, name) && ix.p.Tolerance.Regions > 0 {
		out = append(out, Slack{Name: "tolerance.regions", Value: fmt.Sprintf("%g%%", ix.p.Tolerance.Regions*100), Ratio: ix.p.Tolerance.Regions, Widens: "the admissions allowed over one quota"})
	}
	return out
}

// uncertainty is the run's own timing uncertainty: the widest decision
// interval (received − sent) of any request, before any slack.
func (ix *index) uncertainty() int64 { return max(0, ix.maxLat-2*ix.slack) }

// slackWarnings are the warnings about ss: a slack wider than the run's own
// uncertainty can hide what the run measured (a racy bucket's 100
// admissions where 10 fit pass under a 10s clock_quantum).
func (ix *index) slackWarnings(name string, ss []Slack) []string {
	u := ix.uncertainty()
	var out []string
	for _, s := range ss {
		if s.Ns == 0 || s.Ns <= u {
			continue
		}
		if strings.HasPrefix(s.Name, "tolerance.timing") && ix.p.Tolerance.Timing.D() <= 0 {
			continue // the default is derived from the run's own latency
		}
		out = append(out, fmt.Sprintf("%s: %s %s is wider than this run's own timing uncertainty (the slowest request took %s): it can hide violations the run measured",
			name, s.Name, s.Value, fmtDur(time.Duration(u))))
	}
	return out
}

// discloseSlack names the slacks r used in its result and summary, and
// warns about those wider than the run's uncertainty.
func (ix *index) discloseSlack(r *Result) {
	if r.Verdict == Skip {
		return
	}
	ss := ix.slacks(r.Name)
	if len(ss) == 0 {
		return
	}
	r.Slack = ss
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = s.Name + " " + s.Value
	}
	r.Summary += " (slack: " + strings.Join(parts, ", ") + ")"
	r.Warnings = append(r.Warnings, ix.slackWarnings(r.Name, ss)...)
}
