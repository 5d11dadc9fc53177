package rlverify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/reports"
	"github.com/rlverify/rlverify/service"
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

// CompareSpecs are a comparison's columns as a user writes them, each a
// variation of one base attack.
type CompareSpecs struct {
	// Limiters are NAME (a limiter of the catalog), NAME@POLICY (under
	// another declared policy: a file or a shipped name) or NAME@honest (a
	// gateway judged against its honest policy).
	Limiters []string
	// RegionSettings are MODE[/SYNC[/LATENCY]] of the reference token
	// bucket in regions; an empty part keeps the base's value.
	RegionSettings []string
	// Targets are NAME=URL[,URL…] of your own services.
	Targets []string
}

// Columns are the columns s names, each base with its implementation.
// Errors are *OptionError naming the field of s.
func (s CompareSpecs) Columns(base AttackOptions) ([]CompareColumn, error) {
	if len(s.Limiters)+len(s.Targets)+len(s.RegionSettings) < 2 {
		return nil, optionErr("compare: give at least two implementations (Limiters NAME, Targets NAME=URL, RegionSettings MODE/SYNC/LATENCY)")
	}
	if base.Env == EnvExternal {
		return nil, fieldErr("Env", "external does not apply: your own services are compared as Targets NAME=URL")
	}
	var cols []CompareColumn
	for _, l := range s.Limiters {
		o := base
		name, pol, withPolicy := strings.Cut(l, "@")
		o.Limiter = name
		switch {
		case withPolicy && pol == "honest":
			o.Honest = true
		case withPolicy && pol == "":
			return nil, fieldErr("Limiters", "%q: want NAME@POLICY with a policy file or shipped name", l)
		case withPolicy:
			p, err := LoadPolicy(pol)
			if err != nil {
				return nil, err
			}
			o.Policy = p
		}
		cols = append(cols, CompareColumn{Name: l, Attack: o})
	}
	for _, rs := range s.RegionSettings {
		o := base
		o.Limiter = DefaultLimiter
		if err := o.regionSetting(rs); err != nil {
			return nil, err
		}
		cols = append(cols, CompareColumn{Name: rs, Attack: o})
	}
	for _, t := range s.Targets {
		name, urls, ok := strings.Cut(t, "=")
		if !ok || name == "" || urls == "" {
			return nil, fieldErr("Targets", "%q: want NAME=URL[,URL…]", t)
		}
		o := base
		o.Env, o.Targets, o.Environment = EnvExternal, strings.Split(urls, ","), nil
		cols = append(cols, CompareColumn{Name: name, Attack: o})
	}
	return cols, nil
}

// regionSetting reads MODE[/SYNC[/LATENCY]] into o's region settings; an
// empty part keeps o's value.
func (o *AttackOptions) regionSetting(s string) error {
	parts := strings.Split(s, "/")
	if len(parts) > 3 || parts[0] == "" {
		return fieldErr("RegionSettings", "%q: want MODE[/SYNC[/LATENCY]], e.g. replicated/100ms/20ms", s)
	}
	if err := service.CheckRegionMode(parts[0]); err != nil {
		return fieldErr("RegionSettings", "%q: %w", s, err)
	}
	o.RegionMode = parts[0]
	for i, dst := range []*time.Duration{&o.RegionSync, &o.RegionLatency} {
		if i+1 >= len(parts) || parts[i+1] == "" {
			continue
		}
		d, err := time.ParseDuration(parts[i+1])
		if err != nil || d < 0 {
			return fieldErr("RegionSettings", "%q: %q is not a duration such as 100ms", s, parts[i+1])
		}
		*dst = d
	}
	return nil
}
