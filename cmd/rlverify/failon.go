package main

import (
	"fmt"
	"strings"

	"github.com/rlverify/rlverify/checks"
)

// failOn decides which verdicts make the run exit 1. Tokens (comma
// separated): a verdict (fail, unknown) applies to every check; a check name
// means that check's fail; CHECK:VERDICT names both; "none" never fails.
// The default, "fail", is any check's fail. Unknown tokens are errors, so a
// typo can never turn a failure into a pass.
type failOn struct {
	any   map[checks.Verdict]bool
	check map[string]map[checks.Verdict]bool
	none  bool
}

func parseFailOn(specs []string) (*failOn, error) {
	f := &failOn{any: map[checks.Verdict]bool{}, check: map[string]map[checks.Verdict]bool{}}
	known := map[string]bool{checks.EvidenceCheck: true}
	for _, n := range checks.Names() {
		known[n] = true
	}
	verdict := func(s string) (checks.Verdict, bool) {
		switch s {
		case "fail", "defect":
			return checks.Fail, true
		case "unknown":
			return checks.Unknown, true
		case "explained":
			return checks.Explained, true
		}
		return "", false
	}
	if len(specs) == 0 {
		specs = []string{"fail"}
	}
	for _, spec := range specs {
		for _, tok := range strings.Split(spec, ",") {
			tok = strings.TrimSpace(tok)
			name, vs, hasV := strings.Cut(tok, ":")
			switch {
			case tok == "":
				continue
			case tok == "none":
				f.none = true
			case !hasV:
				if v, ok := verdict(tok); ok {
					f.any[v] = true
					continue
				}
				if !known[tok] {
					return nil, fmt.Errorf("--fail-on %q: not a verdict (fail, unknown), a check (%s) or none", tok, strings.Join(checks.Names(), ", "))
				}
				f.add(tok, checks.Fail)
			default:
				v, ok := verdict(vs)
				if !known[name] || !ok {
					return nil, fmt.Errorf("--fail-on %q: want CHECK:fail or CHECK:unknown with a check of %s", tok, strings.Join(checks.Names(), ", "))
				}
				f.add(name, v)
			}
		}
	}
	if f.none && (len(f.any) > 0 || len(f.check) > 0) {
		return nil, fmt.Errorf("--fail-on none cannot be combined with other values")
	}
	return f, nil
}

func (f *failOn) add(check string, v checks.Verdict) {
	if f.check[check] == nil {
		f.check[check] = map[checks.Verdict]bool{}
	}
	f.check[check][v] = true
}

// failOnUsage is the --fail-on help line.
const failOnUsage = "what makes the run exit 1: fail (= defect: a check at the root of a defect), unknown, explained (a violation another defect explains), a check name (its fail), CHECK:unknown, CHECK:explained, or none; a run that gave no evidence (the evidence gate unknown) fails under every choice but none"

// fails returns the checks whose verdicts fail the run. The evidence gate's
// unknown (a run that judged nothing, or mostly errors) fails under every
// choice but none: no verdict without evidence.
func (f *failOn) fails(rs []checks.Result) []string {
	if f.none {
		return nil
	}
	var out []string
	for _, r := range rs {
		if r.Name == checks.EvidenceCheck && r.Verdict == checks.Unknown {
			out = append(out, r.Name)
			continue
		}
		if f.any[r.Verdict] || f.check[r.Name][r.Verdict] {
			out = append(out, r.Name)
		}
	}
	return out
}
