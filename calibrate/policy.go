package calibrate

import (
	"bytes"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/rlverify/rlverify/policy"
)

// Recommend returns base with every limit of every calibrated tier set to
// the recommended count of its own family (capacity K at the declared rate
// for bucket families, limit N at the declared window for window
// families), and the policy as YAML that policy.Parse reads back to it,
// with a comment saying where the numbers come from. A limit whose search
// found nothing keeps its declared numbers (and the comment says so).
func Recommend(base *policy.Policy, r *Report) (*policy.Policy, []byte, error) {
	p := base.Clone()
	var notes []string
	for _, tr := range r.Tiers {
		tier, ok := p.Tier(tr.Tier)
		if !ok {
			return nil, nil, fmt.Errorf("calibrate: the report's tier %q is not in policy %s", tr.Tier, base.Source)
		}
		for j := range tier.Limits {
			l := &tier.Limits[j]
			count, _ := paramNames(l.Algorithm)
			found := false
			for _, rec := range tr.Recommended {
				if rec.LimitName == l.Name && rec.Algorithm == l.Algorithm && rec.Param == count && rec.Found {
					n := rec.Limit
					n.Name, n.ErrorBound, n.Scope, n.Anchor, n.Counts = l.Name, l.ErrorBound, l.Scope, l.Anchor, l.Counts
					notes = append(notes, fmt.Sprintf("tier %s, %s: %s %s (was %s), refusing %s of the legitimate requests",
						tr.Tier, l.Name, count, rec.Value, rec.Declared, Percent(rec.Refused.LegitShare)))
					*l = n
					found = true
					break
				}
			}
			if !found {
				notes = append(notes, fmt.Sprintf("tier %s, %s: kept as declared (no %s met the target)", tr.Tier, l.Name, count))
			}
		}
	}
	if err := p.Validate(); err != nil {
		return nil, nil, fmt.Errorf("calibrate: the recommended policy: %w", err)
	}
	body, err := yaml.Marshal(p)
	if err != nil {
		return nil, nil, fmt.Errorf("calibrate: the recommended policy to YAML: %w", err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Calibrated by rlverify calibrate from %d requests of %d keys (%s … %s),\n",
		r.Requests, r.Keys, r.First.Format("2006-01-02T15:04:05Z"), r.Last.Format("2006-01-02T15:04:05Z"))
	fmt.Fprintf(&b, "# starting from policy %s, target: at most %s of each tier's legitimate requests refused.\n", oneLine(base.Source), Percent(r.MaxRefused))
	for _, n := range notes {
		fmt.Fprintf(&b, "#   %s\n", oneLine(n))
	}
	b.Write(body)
	back, err := policy.Parse("recommended", b.Bytes())
	if err != nil {
		return nil, nil, fmt.Errorf("calibrate: the recommended policy does not load: %w", err)
	}
	back.Source = ""
	return back, b.Bytes(), nil
}

// oneLine keeps text from a file on one comment line.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// Percent writes a share as a percentage with enough digits.
func Percent(f float64) string {
	switch {
	case f == 0:
		return "0%"
	case f < 0.0001:
		return fmt.Sprintf("%.4f%%", f*100)
	case f < 0.01:
		return fmt.Sprintf("%.3f%%", f*100)
	}
	return fmt.Sprintf("%.2f%%", f*100)
}
