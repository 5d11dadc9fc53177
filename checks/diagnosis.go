package checks

import (
	"fmt"
	"slices"
	"strings"
)

// Defect is one distinct problem found: the check at its root, its
// strongest evidence, and the checks whose violations it explains.
type Defect struct {
	// Check is the root cause's check.
	Check    string     `json:"check"`
	Summary  string     `json:"summary"`
	Evidence []Evidence `json:"evidence,omitempty"`
	// Explains lists the checks whose violations this defect explains.
	Explains []string `json:"explains,omitempty"`
}

// rootOrder ranks checks as causes: of two violations that share evidence,
// the one ranked first explains the other. A fault window's behaviour, a
// measured parameter, keys sharing a quota and variants buying quota are
// causes; an envelope overrun is a cause of what it brings about (too many
// arrivals downstream, remaining counts off, advice off).
var rootOrder = []string{"fail-mode", CalibrationCheck, "isolation", "bypass", "regions", "instances", "oversell", "under-admission", DelayCheck,
	"token-bounds", "headers", "retry-after", "downstream"}

// causeRank is a check's place in rootOrder; instances ranks below
// oversell unless its evidence shows per-instance state (each instance's
// own admissions fit a quota: the race-free signature).
func causeRank(r *Result) int {
	if r.Name == "instances" && !hasCause(r, CausePerInstanceState) {
		return slices.Index(rootOrder, "oversell") + 1
	}
	// Calibration's only findings on the advice of a refusal measure no
	// parameter: they rank just after retry-after, as symptoms (of an
	// overrun, or of the advice retry-after found wrong on that refusal).
	if r.Name == CalibrationCheck && allCause(r, CauseAdvice) {
		return slices.Index(rootOrder, "retry-after") + 1
	}
	if i := slices.Index(rootOrder, r.Name); i >= 0 {
		return i
	}
	return len(rootOrder)
}

// Causes an Evidence may name.
const (
	// CausePerInstanceState: the admissions exceed one quota while each
	// instance's own fit one: state kept per instance.
	CausePerInstanceState = "per-instance-state"
	// CauseSharedQuota: keys share one quota (Evidence.Keys names them);
	// every symptom of those keys is explained by it.
	CauseSharedQuota = "shared-quota"
	// CauseSelfInflicted: the key's own refused requests consumed (a bucket
	// in debt): every symptom of the key's state is explained by it.
	CauseSelfInflicted = "self-inflicted"
	// CauseMissingHeader: a header the policy declares is absent. No
	// overrun, shared quota or per-instance state takes a header away, so
	// no other check's defect explains it: it is a defect of its own.
	CauseMissingHeader = "missing-header"
	// CauseInvalidHeader: a header the policy declares carries a value no
	// client can use (a Retry-After of -5, "abc" or a date in the past). A
	// wrong limiter state gives wrong values, not unusable ones: like a
	// missing header, it is a defect of its own.
	CauseInvalidHeader = "invalid-header"
	// CauseAfterFault: an overrun after a store fault ended (fail-mode's
	// recovery). Evidence.FaultFrom is when the fault began; an overrun of
	// the same key that oversell proved before then is the same defect (a
	// race, not credit created by the downtime).
	CauseAfterFault = "after-fault"
	// CauseAdvice: a refusal's advice measured against the exact wait
	// (calibration). The advice follows the limiter's own state, so a
	// defect of that state (oversell, under-admission) explains it.
	CauseAdvice = "advice"
)

// allCause reports whether r has evidence and every item names cause.
func allCause(r *Result, cause string) bool {
	for _, e := range r.Evidence {
		if e.Cause != cause {
			return false
		}
	}
	return len(r.Evidence) > 0
}

// raceBeforeFault reports whether every finding of fail-mode (r) is an
// overrun after a fault of a key oversell (root) proved oversold before
// that fault began: the limiter oversells with or without an outage.
func raceBeforeFault(root, r *Result) bool {
	if root.Name != "oversell" || r.Name != "fail-mode" || !allCause(r, CauseAfterFault) {
		return false
	}
	for _, e := range r.Evidence {
		ok := false
		for _, f := range root.Evidence {
			if f.Key == e.Key && f.To < e.FaultFrom && f.Cause != CausePerInstanceState {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func hasCause(r *Result, cause string) bool {
	for _, e := range r.Evidence {
		if e.Cause == cause {
			return true
		}
	}
	return false
}

// Diagnose links violations that share evidence (a request; the same key
// within horizon, one refill of its quota, of each other; any key of a
// shared quota): a failed check all of whose evidence another failed check
// of higher cause rank shares becomes Explained by it. It returns rs
// changed in place.
func Diagnose(rs []Result, horizon int64) []Result {
	var failed []*Result
	for i := range rs {
		if rs[i].Verdict == Fail && rs[i].Name != EvidenceCheck && len(rs[i].Evidence) > 0 {
			failed = append(failed, &rs[i])
		}
	}
	slices.SortStableFunc(failed, func(a, b *Result) int { return causeRank(a) - causeRank(b) })
	// A fail-mode whose overruns after the fault oversell already proved
	// before it is a symptom, though fail-mode outranks oversell.
	for _, r := range failed {
		for _, root := range failed {
			if raceBeforeFault(root, r) {
				r.Verdict, r.ExplainedBy = Explained, root.Name
				r.Summary = fmt.Sprintf("explained by %s: %s", root.Name, r.Summary)
			}
		}
	}
	for i, r := range failed {
		if r.Verdict != Fail {
			continue
		}
		for _, root := range failed[:i] {
			if root.Verdict != Fail || causeRank(root) >= causeRank(r) {
				continue
			}
			if explainsAll(root, r, horizon) {
				r.Verdict, r.ExplainedBy = Explained, root.Name
				r.Summary = fmt.Sprintf("explained by %s: %s", root.Name, r.Summary)
				break
			}
		}
	}
	return rs
}

// explainsAll reports whether every evidence item of r shares a request or
// a key and interval with some evidence of root (and none is a missing
// header, unless root found the key failing open over it).
func explainsAll(root, r *Result, horizon int64) bool {
	for _, e := range r.Evidence {
		if e.Cause == CauseInvalidHeader {
			return false
		}
		if e.Cause == CauseMissingHeader {
			// Only a limiter that let the request through undecided (it
			// failed open) takes its headers away.
			if !slices.ContainsFunc(root.Evidence, func(f Evidence) bool {
				return f.Cause == CauseFailedOpen && f.Key == e.Key && f.From <= e.From && e.To <= f.To
			}) {
				return false
			}
			continue
		}
		ok := false
		for _, f := range root.Evidence {
			if sharesEvidence(f, e, horizon) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func sharesEvidence(a, b Evidence, horizon int64) bool {
	for _, x := range a.RequestIDs {
		if slices.Contains(b.RequestIDs, x) {
			return true
		}
	}
	if (a.Cause == CauseSharedQuota || a.Cause == CauseSelfInflicted) && b.Key != "" && (b.Key == a.Key || slices.Contains(a.Keys, b.Key)) {
		return true // a key-wide cause: the key's state is wrong all along
	}
	if a.Cause == CauseClockStep && b.Cause == CauseClockStep && a.FaultFrom == b.FaultFrom {
		return true // one clock step's two symptoms: the limiter trusts the wall clock
	}
	if a.Key == "" || a.Key != b.Key {
		return false
	}
	if a.From == 0 && a.To == 0 || b.From == 0 && b.To == 0 {
		return true // a key-wide observation
	}
	return a.From <= b.To+horizon && b.From <= a.To+horizon
}

// Defects lists the distinct defects of diagnosed results: every failed
// check (but the evidence gate), strongest cause first, with the checks it
// explains.
func Defects(rs []Result) []Defect {
	var out []Defect
	var roots []*Result
	for i := range rs {
		if rs[i].Verdict == Fail && rs[i].Name != EvidenceCheck {
			roots = append(roots, &rs[i])
		}
	}
	slices.SortStableFunc(roots, func(a, b *Result) int { return causeRank(a) - causeRank(b) })
	for _, r := range roots {
		d := Defect{Check: r.Name, Summary: r.Summary}
		for i, e := range r.Evidence {
			if i == 2 {
				break
			}
			d.Evidence = append(d.Evidence, e)
		}
		for _, o := range rs {
			if o.ExplainedBy == r.Name {
				d.Explains = append(d.Explains, o.Name)
			}
		}
		out = append(out, d)
	}
	return out
}

// DefectLine is a defect in one line: "oversell: … (explains instances, downstream)".
func DefectLine(d Defect) string {
	msg := d.Summary
	if len(d.Evidence) > 0 {
		msg = d.Evidence[0].Message
	}
	s := d.Check + ": " + msg
	if len(d.Explains) > 0 {
		s += " (explains " + strings.Join(d.Explains, ", ") + ")"
	}
	return s
}
