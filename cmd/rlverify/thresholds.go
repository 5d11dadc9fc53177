package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/rlverify/rlverify/attacks"
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

// planThresholds are an attack's command-line thresholds (the library adds
// the plan's own): each phase they name must be the plan's, and every
// --fail-on threshold:KEY must name one of the plan's or these.
func planThresholds(plan *attacks.Plan, f *attackFlags) ([]thresholds.Threshold, error) {
	cli, err := parseThresholds(f.thresholds)
	if err != nil {
		return nil, err
	}
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
	return cli, fo.checkThresholds(append(plan.PlanThresholds(), cli...))
}
