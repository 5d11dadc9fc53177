package checks

import (
	"fmt"
	"time"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// Verdict of one check.
type Verdict string

// Verdicts, merged as Fail > Unknown > Pass.
const (
	Pass    Verdict = "pass"
	Fail    Verdict = "fail"
	Unknown Verdict = "unknown"
	// Skip: the check does not apply to this run (e.g. no sink data). It
	// never fails a run and merges below Pass.
	Skip Verdict = "skip"
	// Explained: the check's violations are all explained by another
	// check's defect (Result.ExplainedBy): a symptom, not a cause. It
	// merges above Pass and below Unknown; the defect itself fails.
	Explained Verdict = "explained"
	// Interrupted and Incomplete are verdicts of a whole run, never of one
	// check: a signal or a kill cut the run (Interrupted), or a step of the
	// plan could not be carried out, such as a fault that never happened
	// (Incomplete). The checks judged only part of what the plan promised,
	// so neither is ever shown as a pass; both merge below Fail (a
	// violation in what was recorded is proven whatever came after).
	Interrupted Verdict = "interrupted"
	Incomplete  Verdict = "incomplete"
	// Modified is the verdict of a history edited after the run (its end
	// record's digest does not match): no verdict drawn from it stands,
	// so it merges above Fail.
	Modified Verdict = "modified"
)

func (v Verdict) rank() int {
	switch v {
	case Modified:
		return 7
	case Fail:
		return 6
	case Interrupted:
		return 5
	case Incomplete:
		return 4
	case Unknown:
		return 3
	case Explained:
		return 2
	case Pass:
		return 1
	}
	return 0
}

// Merge returns the more severe verdict: modified > fail > interrupted > incomplete >
// unknown > explained > pass > skip.
func Merge(a, b Verdict) Verdict {
	if b.rank() > a.rank() {
		return b
	}
	return a
}

// MaxIDs caps the request ids listed in one piece of evidence.
const MaxIDs = 20

// Evidence is what proves (or explains) a verdict, enough for a reader to
// find the requests in the history.
type Evidence struct {
	Key string `json:"key,omitempty"`
	// Limit names the limit of the key's tier that was judged.
	Limit string `json:"limit,omitempty"`
	// From and To bound the interval, in ns since the run start.
	From int64 `json:"from"`
	To   int64 `json:"to"`
	// Bound is what the policy allows there; Observed what happened.
	Bound    float64 `json:"bound"`
	Observed float64 `json:"observed"`
	// RequestIDs are some of the requests involved (at most MaxIDs);
	// TotalIDs how many there were.
	RequestIDs []uint64 `json:"request_ids,omitempty"`
	TotalIDs   int      `json:"total_ids,omitempty"`
	Message    string   `json:"message"`
	// Cause is a machine-readable hint at the cause the evidence points to
	// (e.g. "per-instance-state"), read by the diagnosis.
	Cause string `json:"cause,omitempty"`
	// Keys are the other keys involved (e.g. the keys sharing a quota).
	Keys []string `json:"keys,omitempty"`
	// FaultFrom is, for evidence after a fault (Cause "after-fault"), when
	// that fault began: the diagnosis asks whether the same overrun was
	// proven before it.
	FaultFrom int64 `json:"fault_from,omitempty"`
}

// Result is one check's verdict.
type Result struct {
	Name    string  `json:"name"`
	Verdict Verdict `json:"verdict"`
	// Summary is one line for a table.
	Summary  string     `json:"summary"`
	Evidence []Evidence `json:"evidence,omitempty"`
	// Figures are measurements worth reporting whatever the verdict
	// (e.g. "worst_rolling_window": 19).
	Figures map[string]float64 `json:"figures,omitempty"`
	// Measured are the limiter's parameters as the check measured them,
	// beside the declared ones (calibration).
	Measured []Measurement `json:"measured,omitempty"`
	// ExplainedBy names the check whose defect explains this check's
	// violations (Verdict Explained).
	ExplainedBy string `json:"explained_by,omitempty"`
	// Slack names every allowance the check used beyond the exact
	// arithmetic (clock_quantum, Checks.Slack, tolerances); its summary
	// names them too.
	Slack []Slack `json:"slack,omitempty"`
	// Warnings say where a slack is wider than the run's own timing
	// uncertainty: the verdict may hold only because of it.
	Warnings []string `json:"warnings,omitempty"`
}

// MaxSlack bounds Options.Slack: the shards of one run start within
// history.MaxShardSpread of each other, and a clock difference beyond that
// would widen every interval past anything a check could judge (2562047h
// overflowed the interval arithmetic).
const MaxSlack = history.MaxShardSpread

// ValidateSlack refuses a slack outside [0, MaxSlack].
func ValidateSlack(d time.Duration) error {
	if d < 0 || d > MaxSlack {
		return fmt.Errorf("checks: slack %s: want 0 … %s", d, MaxSlack)
	}
	return nil
}

// Options tune the checks.
type Options struct {
	// Slack widens every request's decision interval on both sides: clock
	// skew between merged shards plus the limiter's clock quantum.
	Slack time.Duration
	// Only runs just these checks (by name); empty runs all.
	Only []string
	// MaxEvidence caps evidence items per check (default 5).
	MaxEvidence int
	// MaxErrorRate is the share of requests that may end in an error before
	// the evidence gate says the run proves nothing (default 1%).
	MaxErrorRate float64
	// Off turns checks off (besides the policy's checks_off): their result
	// is a skip that says so.
	Off []string
}

// Checker is one named invariant.
type Checker struct {
	Name string
	// Doc is one sentence on what the check proves.
	Doc   string
	Check func(h *history.History, p *policy.Policy, o Options) Result
}

// ids returns at most MaxIDs of the given ids and their total.
func ids(all []uint64) ([]uint64, int) {
	if len(all) > MaxIDs {
		return append([]uint64(nil), all[:MaxIDs]...), len(all)
	}
	return all, len(all)
}

// Overall merges the verdicts of rs.
func Overall(rs []Result) Verdict {
	v := Skip
	for _, r := range rs {
		v = Merge(v, r.Verdict)
	}
	if v == Skip {
		return Pass
	}
	return v
}
