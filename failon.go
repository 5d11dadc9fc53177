package rlverify

import (
	"strings"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/thresholds"
)

// FailOn decides which verdicts fail a run (the command's exit 1). Tokens (comma
// separated): a verdict (fail, unknown) applies to every check; a check name
// means that check's fail; CHECK:VERDICT names both; "threshold" is any
// threshold's fail and threshold:KEY one threshold's (KEY its key, e.g.
// latency.p99, or its expression), each with an optional :unknown; "none"
// never fails.
// The default, "fail", is any check's fail. Unknown tokens are errors, so a
// typo can never turn a failure into a pass.
type FailOn struct {
	any   map[checks.Verdict]bool
	check map[string]map[checks.Verdict]bool
	none  bool
	// threshold maps a threshold selector ("" is every threshold; else a
	// key such as latency.p99 or an expression) to its failing verdicts.
	threshold map[string]map[checks.Verdict]bool
}

// ParseFailOn reads FailOn tokens; errors are *OptionError of the field
// FailOn.
func ParseFailOn(specs []string) (*FailOn, error) {
	f := &FailOn{any: map[checks.Verdict]bool{}, check: map[string]map[checks.Verdict]bool{}, threshold: map[string]map[checks.Verdict]bool{}}
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
			case name == ThresholdToken:
				if err := f.addThreshold(tok); err != nil {
					return nil, err
				}
			case !hasV:
				if v, ok := verdict(tok); ok {
					f.any[v] = true
					continue
				}
				if !known[tok] {
					return nil, fieldErr("FailOn", "%q: not a verdict (fail, unknown), a check (%s) or none", tok, strings.Join(checks.Names(), ", "))
				}
				f.add(tok, checks.Fail)
			default:
				v, ok := verdict(vs)
				if !known[name] || !ok {
					return nil, fieldErr("FailOn", "%q: want CHECK:fail or CHECK:unknown with a check of %s", tok, strings.Join(checks.Names(), ", "))
				}
				f.add(name, v)
			}
		}
	}
	if f.none && (len(f.any) > 0 || len(f.check) > 0 || len(f.threshold) > 0) {
		return nil, fieldErr("FailOn", "none cannot be combined with other values")
	}
	return f, nil
}

func (f *FailOn) add(check string, v checks.Verdict) {
	if f.check[check] == nil {
		f.check[check] = map[checks.Verdict]bool{}
	}
	f.check[check][v] = true
}

// Fails returns the checks whose verdicts fail the run. The evidence gate's
// unknown (a run that judged nothing, or mostly errors) fails under every
// choice but none: no verdict without evidence.
func (f *FailOn) Fails(rs []checks.Result) []string {
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

// ThresholdToken is the FailOn token of thresholds.
const ThresholdToken = "threshold"

// addThreshold reads threshold[:SELECTOR][:VERDICT].
func (f *FailOn) addThreshold(tok string) error {
	parts := strings.Split(tok, ":")[1:]
	v := checks.Fail
	if n := len(parts); n > 0 && (parts[n-1] == "fail" || parts[n-1] == "unknown") {
		v = checks.Verdict(parts[n-1])
		parts = parts[:n-1]
	}
	if len(parts) > 1 {
		return fieldErr("FailOn", "%q: want threshold, threshold:KEY, threshold:unknown or threshold:KEY:unknown", tok)
	}
	sel := strings.Join(parts, "")
	if f.threshold[sel] == nil {
		f.threshold[sel] = map[checks.Verdict]bool{}
	}
	f.threshold[sel][v] = true
	return nil
}

// CheckThresholds refuses a threshold selector that names none of ts, so a
// typo never turns a failure into a pass.
func (f *FailOn) CheckThresholds(ts []thresholds.Threshold) error {
	for sel := range f.threshold {
		if sel == "" {
			continue
		}
		found := false
		var keys []string
		for _, t := range ts {
			found = found || t.Key() == sel || t.Expr == sel || t.Key() == sel+"."+t.Stat
			keys = append(keys, t.Key())
		}
		if !found {
			if len(keys) == 0 {
				return fieldErr("FailOn", "threshold:%s: the run has no thresholds (give a threshold, or a plan's thresholds:)", sel)
			}
			return fieldErr("FailOn", "threshold:%s: no such threshold (the run's: %s)", sel, strings.Join(keys, ", "))
		}
	}
	return nil
}

// ThresholdFails returns "threshold EXPR" for each threshold whose verdict
// fails the run: a verdict token (fail, unknown) applies to thresholds as
// to checks.
func (f *FailOn) ThresholdFails(rs []thresholds.Result) []string {
	if f.none {
		return nil
	}
	var out []string
	for _, r := range rs {
		v := checks.Verdict(r.Verdict)
		hit := f.any[v] || f.threshold[""][v] || f.threshold[r.Key][v] || f.threshold[r.Expr][v] ||
			f.threshold[strings.TrimSuffix(r.Key, "."+r.Stat)][v]
		if hit {
			out = append(out, "threshold "+r.Expr)
		}
	}
	return out
}

// FailOnTokens are the tokens FailOn reads (for completion): the verdicts,
// none, the thresholds', and each check with and without :unknown.
func FailOnTokens() []string {
	out := []string{"fail", "unknown", "none", ThresholdToken, ThresholdToken + ":unknown"}
	for _, n := range checks.Names() {
		out = append(out, n, n+":unknown")
	}
	return out
}
