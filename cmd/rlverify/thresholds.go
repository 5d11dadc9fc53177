package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/reports"
	"github.com/rlverify/rlverify/thresholds"
)

// addThresholdFlag registers --threshold (attack, check, compare).
func addThresholdFlag(fl *pflag.FlagSet, dst *[]string) {
	fl.StringArrayVar(dst, "threshold", nil, "fail the run when the history misses this criterion (repeatable): "+thresholds.Syntax)
}

// parseThresholds reads --threshold values.
func parseThresholds(specs []string) ([]thresholds.Threshold, error) {
	var out []thresholds.Threshold
	for _, s := range specs {
		t, err := thresholds.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("--threshold: %w", err)
		}
		t.Source = "--threshold"
		out = append(out, t)
	}
	return out, nil
}

// planThresholds are an attack's thresholds: the plan's, then the command
// line's; each phase they name must be the plan's, and every --fail-on
// threshold:KEY must name one of them.
func planThresholds(plan *attacks.Plan, f *attackFlags) ([]thresholds.Threshold, error) {
	cli, err := parseThresholds(f.thresholds)
	if err != nil {
		return nil, err
	}
	ts := append(plan.PlanThresholds(), cli...)
	var phases []string
	for _, ph := range plan.Phases {
		phases = append(phases, ph.Name)
	}
	if err := thresholds.CheckPhases(cli, phases); err != nil {
		return nil, fmt.Errorf("--threshold: plan %s: %w", plan.Name, err)
	}
	fo, err := parseFailOn(f.failOn)
	if err != nil {
		return nil, err
	}
	return ts, fo.checkThresholds(ts)
}

// judgeThresholds evaluates ts on h into doc. A threshold naming a phase
// that a complete history does not have is a usage error (a typo); on an
// interrupted history the phase may just not have run: unknown.
func judgeThresholds(doc *reports.Document, h *history.History, pol *policy.Policy, ts []thresholds.Threshold) error {
	if len(ts) == 0 {
		return nil
	}
	if !h.Interrupted() {
		var phases []string
		for _, ph := range h.Phases {
			phases = append(phases, ph.Name)
		}
		if err := thresholds.CheckPhases(ts, phases); err != nil {
			return usageWrap(err)
		}
	}
	doc.SetThresholds(thresholds.Evaluate(h, func(e *history.Event) history.Outcome { return checks.Outcome(pol, e) }, ts))
	return nil
}
