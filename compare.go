package rlverify

import (
	"context"
	"errors"
	"fmt"

	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/reports"
)

// CompareColumn is one implementation of a comparison: its name and the
// attack that runs it.
type CompareColumn struct {
	Name   string
	Attack AttackOptions
}

// CompareOptions configure a comparison: the same plan (same seed, same
// schedule) against each column.
type CompareOptions struct {
	// Plan names the comparison (the plan every column runs).
	Plan    string
	Columns []CompareColumn
	// Log receives a line as each column starts, is skipped or stops
	// early (may be nil).
	Log func(format string, args ...any)
	// OnColumn, when set, is called with each judged column (to keep its
	// reports); an error ends the comparison.
	OnColumn func(name string, out *Outcome) error
}

// Compare runs every column in turn and lines their verdicts and figures
// up. A column whose environment cannot run here (envs.ErrUnavailable, no
// Docker) is skipped; a plan that stopped early still shows what it
// recorded, with the reason in its notes. It stops after the column during
// which ctx ended.
func Compare(ctx context.Context, o CompareOptions) (*reports.Comparison, error) {
	logf := func(format string, args ...any) {
		if o.Log != nil {
			o.Log(format, args...)
		}
	}
	seen := map[string]bool{}
	for _, c := range o.Columns {
		if seen[c.Name] {
			return nil, optionErr("compare: %q is given twice", c.Name)
		}
		seen[c.Name] = true
	}
	var cols []reports.Column
	for _, c := range o.Columns {
		logf("compare: %s …", c.Name)
		out, err := Attack(ctx, c.Attack)
		if errors.Is(err, envs.ErrUnavailable) {
			logf("compare: %s skipped: %v", c.Name, err)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("compare: %s: %w", c.Name, err)
		}
		if o.OnColumn != nil {
			if err := o.OnColumn(c.Name, out); err != nil {
				return nil, err
			}
		}
		if out.Stopped != nil && ctx.Err() == nil {
			// A plan that stopped early (a probe that needs a Retry-After
			// the implementation never sends) still judged what it
			// recorded: its column shows that, with the reason.
			why := fmt.Sprintf("the plan did not complete (%v); verdicts above cover what was recorded, history in %s", out.Stopped, out.HistoryFile)
			logf("compare: %s: %s", c.Name, why)
			out.Document.Run.Notes = append(out.Document.Run.Notes, why)
		}
		cols = append(cols, reports.Column{Name: c.Name, Document: out.Document})
		if ctx.Err() != nil {
			break
		}
	}
	return reports.Compare(o.Plan, cols), nil
}
