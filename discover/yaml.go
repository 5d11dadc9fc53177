package discover

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rlverify/rlverify/policy"
)

// Policy writes r as a policy in rlverify's YAML format, every number
// commented with its evidence and uncertainty, and loads it back with the
// policy loader (so what is written is what rlverify reads).
func Policy(r *Result) ([]byte, *policy.Policy, error) {
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	c := func(indent, text string) { comment(&b, indent, text) }
	c("", fmt.Sprintf("Discovered by `rlverify discover` against %s in %s with %d requests.",
		strings.Join(r.Targets, " "), fmtS(r.Elapsed), r.Requests))
	c("", "A measurement, not a promise: check every number (its evidence and range are beside it), then keep it as the policy you declare for this service. See docs/discover.md.")
	w("name: discovered\nversion: v1\naction: api\ntiers:\n")
	for _, t := range r.Tiers {
		w("  - name: %s\n    key_prefix: %s\n    limits:\n", yamlStr(t.Name), yamlStr(t.KeyPrefix))
		for _, n := range t.Notes {
			c("      ", "note: "+n)
		}
		fam := t.Family
		if fam == "" {
			fam = policy.TokenBucket
			c("      ", "family NOT PINNED (written as token-bucket so the file loads): "+t.FamilyEvidence)
		} else {
			c("      ", fmt.Sprintf("family %s: %s", fam, t.FamilyEvidence))
		}
		w("      - algorithm: %s\n", fam)
		ind := "        "
		capN := t.Capacity
		if fam.Bucketed() {
			c(ind, fmt.Sprintf("K = %s%s: %s", capN.Range(), pinnedNote(capN), capN.Evidence))
			w(ind+"capacity: %d\n", atLeast1(capN.Value))
			rate := t.Rate
			if math.IsNaN(rate.Value) || rate.Value <= 0 {
				if w := t.Window.Value; w > 0 && !math.IsNaN(w) && !math.IsInf(w, 0) {
					rate = Number{Value: capN.Value / math.Max(w, 1e-3)}
					c(ind, "r NOT PINNED: "+t.Window.Evidence)
				} else {
					// No refill was watched (nothing refused): K per
					// second keeps K/r a loadable window, said open.
					rate = Number{Value: float64(atLeast1(capN.Value))}
					c(ind, "r NOT PINNED: no refill was watched; written as K per second so the file loads: declare yours")
				}
			} else {
				c(ind, fmt.Sprintf("r = %s/s%s: %s", rate.Range(), pinnedNote(rate), rate.Evidence))
			}
			// Written as K per the roundest window within the measured
			// range (limits are configured as round periods: 5 per 2s).
			rv := sig(rate.Value)
			if rate.Pinned && rate.Low > 0 {
				k := float64(atLeast1(capN.Value))
				if wr, ok := roundest(k/rate.Value, k/rate.High, k/rate.Low); ok {
					rv = k / wr
					if wr != k/rate.Value {
						c(ind, fmt.Sprintf("written as %g per %s, the roundest window within the range", k, durationOf(wr)))
					}
				}
			}
			w(ind+"rate: %s/s\n", strconv.FormatFloat(rv, 'g', 6, 64))
		} else {
			c(ind, fmt.Sprintf("N = %s%s: %s", capN.Range(), pinnedNote(capN), capN.Evidence))
			w(ind+"limit: %d\n", atLeast1(capN.Value))
			win := t.Window
			c(ind, fmt.Sprintf("W = %s s%s: %s", win.Range(), pinnedNote(win), win.Evidence))
			wv := win.Value
			if win.Pinned {
				if wr, ok := roundest(win.Value, win.Low, win.High); ok {
					wv = wr
				}
			}
			w(ind+"window: %s\n", durationOf(wv))
			if t.Anchor != "" {
				c(ind, "anchor: "+t.AnchorEvidence)
				w(ind+"anchor: %s\n", t.Anchor)
			} else if fam == policy.FixedWindow || fam == policy.SlidingCounter {
				c(ind, "anchor NOT PINNED (epoch or first: declare yours): "+t.AnchorEvidence)
			}
		}
		if t.RefusedCost != nil {
			c(ind, "counts: "+t.RefusedEvidence)
			if *t.RefusedCost {
				w("%scounts: all\n", ind)
			} else {
				w("%scounts: admitted\n", ind)
			}
		} else if t.RefusedEvidence != "" {
			c(ind, "counts not measured: "+t.RefusedEvidence)
		}
		if t.Scope != "" {
			c(ind, "scope: "+t.ScopeEvidence)
			w(ind+"scope: %s\n", t.Scope)
		} else if t.ScopeEvidence != "" {
			c(ind, "scope not measured: "+t.ScopeEvidence)
		}
	}
	if len(r.Tiers) == 1 {
		w("default_tier: %s\n", yamlStr(r.Tiers[0].Name))
	}
	h := r.Headers
	w("headers:\n")
	for _, a := range h.Agree {
		c("  ", "agrees: "+a)
	}
	for _, d := range h.Disagree {
		c("  ", "CONTRADICTS the behaviour: "+d)
	}
	if h.RetryForm != "" {
		c("  ", fmt.Sprintf("Retry-After as %s, rounded %s", h.RetryForm, orNone(h.RetryRounding, "(not compared)")))
	} else {
		c("  ", "no Retry-After on refusals")
	}
	w("  retry_after: %t\n", h.RetryAfter)
	g := string(h.RateLimit)
	if g == "" {
		g = "none"
	}
	w("  ratelimit: %s\n  x_ratelimit: %t\n", g, h.XRateLimit)
	if h.XReset != "" {
		c("  ", "X-RateLimit-Reset read as "+map[string]string{"epoch": "a Unix time (seconds)", "relative": "delta seconds", "date": "an HTTP-date"}[h.XReset])
		w("  x_ratelimit_reset: %s\n", h.XReset)
	}
	if h.AdmittedOnly {
		c("  ", "the rate-limit headers came on admitted responses only, never on a refusal")
		w("  on: admitted\n")
	}
	w("identity:\n  in: %s\n", orNone(r.Identity.In, policy.InHeader))
	if r.Identity.Name != "" {
		w("  name: %s\n", yamlStr(r.Identity.Name))
	}
	if r.PathEvidence != "" {
		c("  ", "paths: "+r.PathEvidence)
	}
	if r.PathPrefix != "" {
		w("  path_prefix: %s\n  path_variants: [sibling]\n", yamlStr(r.PathPrefix))
	}
	if len(r.Admitted) > 0 || len(r.Refused) > 0 {
		c("", "statuses: "+r.StatusEvidence)
		if r.InvalidKey != 0 {
			c("", fmt.Sprintf("a key the service never issued was answered %d", r.InvalidKey))
		}
		w("statuses:\n")
		if len(r.Admitted) > 0 {
			w("  admitted: %s\n", ints(r.Admitted))
		}
		if len(r.Refused) > 0 {
			w("  rejected: %s\n", ints(r.Refused))
		}
	}
	for _, n := range r.NotProbed {
		c("", "NOT PROBED: "+n)
	}
	p, err := policy.Parse("discovered.yaml", b.Bytes())
	if err != nil {
		return b.Bytes(), nil, fmt.Errorf("discover: the policy written does not load: %w", err)
	}
	return b.Bytes(), p, nil
}

// comment writes text as YAML comment lines of at most ~100 columns, with
// anything that could end a comment (control characters) made visible.
func comment(b *bytes.Buffer, indent, text string) {
	text = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, text)
	line := indent + "#"
	for _, word := range strings.Fields(text) {
		if len(line)+1+len(word) > 100 && len(line) > len(indent)+1 {
			b.WriteString(line + "\n")
			line = indent + "#"
		}
		line += " " + word
	}
	b.WriteString(line + "\n")
}

func yamlStr(s string) string {
	out, err := yaml.Marshal(s)
	if err != nil {
		return strconv.Quote(s)
	}
	return strings.TrimSuffix(string(out), "\n")
}

func pinnedNote(n Number) string {
	if n.Pinned {
		return ""
	}
	return " NOT PINNED"
}

func atLeast1(x float64) int64 {
	if math.IsNaN(x) || x < 1 {
		return 1
	}
	return int64(math.Round(x))
}

// sig rounds x to 3 significant digits.
func sig(x float64) float64 {
	if x <= 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return 1
	}
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'g', 3, 64), 64)
	return v
}

func durationOf(sec float64) string {
	if math.IsNaN(sec) || math.IsInf(sec, 0) || sec <= 0 {
		return "1s"
	}
	d := time.Duration(sec * float64(time.Second))
	switch {
	case d >= 10*time.Second:
		d = d.Round(100 * time.Millisecond)
	default:
		d = d.Round(10 * time.Millisecond)
	}
	return max(d, time.Millisecond).String()
}

func ints(s []int) string {
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = strconv.Itoa(v)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func orNone(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Describe is t in one line: family and numbers with their ranges.
func Describe(t Tier) string {
	var parts []string
	fam := string(t.Family)
	if fam == "" {
		fam = "family not pinned"
	}
	parts = append(parts, fam)
	if t.Family.Bucketed() {
		parts = append(parts, "K="+t.Capacity.Range(), "r="+t.Rate.Range()+"/s")
	} else {
		parts = append(parts, "N="+t.Capacity.Range(), "W="+t.Window.Range()+"s")
		if t.Anchor != "" {
			parts = append(parts, "anchor "+t.Anchor)
		}
	}
	if t.RefusedCost != nil {
		parts = append(parts, map[bool]string{true: "refusals cost", false: "refusals free"}[*t.RefusedCost])
	}
	if t.Scope != "" {
		parts = append(parts, "scope "+t.Scope)
	}
	for _, n := range []Number{t.Capacity, t.Rate, t.Window} {
		if n.Evidence != "" && !n.Pinned {
			parts = append(parts, "(not all pinned: see the file)")
			break
		}
	}
	return strings.Join(parts, ", ")
}

// Summary is r in a few lines: one per tier, then the headers.
func Summary(r *Result) []string {
	var out []string
	for _, t := range r.Tiers {
		out = append(out, fmt.Sprintf("tier %s: %s", t.Name, Describe(t)))
	}
	for _, d := range r.Headers.Disagree {
		out = append(out, "headers contradict the behaviour: "+d)
	}
	return out
}

// roundest is v rounded to the coarsest of 1s, 100ms, 10ms and 1ms that
// stays within [lo, hi] (seconds).
func roundest(v, lo, hi float64) (float64, bool) {
	if math.IsNaN(v) || math.IsInf(hi, 0) || v <= 0 {
		return v, false
	}
	for _, step := range []float64{1, 0.1, 0.01, 0.001} {
		c := math.Round(v/step) * step
		if c > 0 && c >= lo-1e-9 && c <= hi+1e-9 {
			return c, true
		}
	}
	return v, false
}
