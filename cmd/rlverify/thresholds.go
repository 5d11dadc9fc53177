package main

import (
	"fmt"

	"github.com/spf13/pflag"

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

// failOnUsage is the --fail-on help line.
const failOnUsage = "what makes the run exit 1: fail (= defect: a check at the root of a defect), unknown, explained (a violation another defect explains), a check name (its fail), CHECK:unknown, CHECK:explained, threshold (any threshold's fail), threshold:KEY (e.g. threshold:latency.p99), threshold[:KEY]:unknown, or none; a run that gave no evidence (the evidence gate unknown) fails under every choice but none"
