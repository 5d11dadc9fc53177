package discover

import (
	"fmt"
	"math"
	"strconv"

	"github.com/rlverify/rlverify/policy"
)

// Comparison is one declared number or choice beside the discovered one.
// Mismatch is set only when the declared value lies outside what was
// measured (beyond its range); what was not measured is not compared.
type Comparison struct {
	Name       string
	Declared   string
	Discovered string
	Mismatch   bool
	// Evidence is how the discovered value was measured.
	Evidence string
}

// Compare puts the declared policy beside what discovery measured: per
// discovered tier (matched by name, else the declared tier its generated
// keys fall in) the family, K or N, r or W, anchoring, the cost of
// refusals and the scope; then the headers.
func Compare(declared *policy.Policy, r *Result) []Comparison {
	var out []Comparison
	for _, t := range r.Tiers {
		dt, ok := declared.Tier(t.Name)
		if !ok {
			dt, ok = declared.TierFor("")
		}
		if !ok || len(dt.Limits) == 0 {
			out = append(out, Comparison{Name: "tier " + t.Name, Declared: "no such tier", Discovered: Describe(t), Mismatch: true, Evidence: "the keys of this tier match no declared tier"})
			continue
		}
		out = append(out, compareLimit(dt.Name, dt.Limits[0], t)...)
	}
	h := r.Headers
	dh := declared.Headers
	out = append(out,
		choice("headers: Retry-After on refusals", strconv.FormatBool(dh.RetryAfter), strconv.FormatBool(h.RetryAfter), true, "every refusal seen"),
		choice("headers: RateLimit generation", orNone(string(dh.RateLimit), "none"), orNone(string(h.RateLimit), "none"), true, "the fields of the admitted responses"),
		choice("headers: X-RateLimit-*", strconv.FormatBool(dh.XRateLimit), strconv.FormatBool(h.XRateLimit), true, "the fields of the responses"),
	)
	if dh.XRateLimit && h.XReset != "" {
		out = append(out, choice("headers: X-RateLimit-Reset form", dh.XReset, h.XReset, true, "the values' form"))
	}
	for _, d := range h.Disagree {
		out = append(out, Comparison{Name: "headers against behaviour", Declared: "-", Discovered: d, Mismatch: true, Evidence: "measured by discovery"})
	}
	return out
}

func compareLimit(tier string, l policy.Limit, t Tier) []Comparison {
	p := "tier " + tier + ": "
	var out []Comparison
	same := func(a, b policy.Algorithm) bool {
		bucket := func(x policy.Algorithm) policy.Algorithm {
			if x.Bucketed() {
				return policy.TokenBucket
			}
			return x
		}
		return bucket(a) == bucket(b)
	}
	if t.Family != "" {
		out = append(out, Comparison{Name: p + "family", Declared: string(l.Algorithm), Discovered: string(t.Family), Mismatch: !same(l.Algorithm, t.Family), Evidence: t.FamilyEvidence})
	}
	num := func(name string, declared float64, n Number) {
		if n.Evidence == "" || math.IsNaN(n.Value) {
			return
		}
		c := Comparison{Name: p + name, Declared: strconv.FormatFloat(declared, 'g', 4, 64), Discovered: n.Range(), Evidence: n.Evidence}
		c.Mismatch = n.Pinned && (declared < n.Low-1e-9 || declared > n.High+1e-9)
		if !n.Pinned {
			c.Discovered += " (not pinned)"
		}
		out = append(out, c)
	}
	num("K/N", float64(l.Capacity), t.Capacity)
	if l.Algorithm.Bucketed() {
		num("r (/s)", l.R(), t.Rate)
	} else {
		num("W (s)", l.W().Seconds(), t.Window)
	}
	if t.Anchor != "" && !l.Algorithm.Bucketed() {
		out = append(out, choice(p+"anchor", orNone(l.Anchor, policy.AnchorEpoch), t.Anchor, true, t.AnchorEvidence))
	}
	if t.RefusedCost != nil {
		out = append(out, choice(p+"refused requests cost", strconv.FormatBool(l.CountsRejected()), strconv.FormatBool(*t.RefusedCost), true, t.RefusedEvidence))
	}
	if t.Scope != "" {
		out = append(out, choice(p+"scope", orNone(l.Scope, policy.ScopeCluster), t.Scope, true, t.ScopeEvidence))
	}
	return out
}

func choice(name, declared, discovered string, measured bool, evidence string) Comparison {
	return Comparison{Name: name, Declared: declared, Discovered: discovered, Mismatch: measured && declared != discovered, Evidence: evidence}
}

// String is c in one line.
func (c Comparison) String() string {
	return fmt.Sprintf("%s: declared %s, discovered %s (%s)", c.Name, c.Declared, c.Discovered, c.Evidence)
}
