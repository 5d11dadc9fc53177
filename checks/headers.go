package checks

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rlverify/rlverify/headers"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// windowSeconds is a limit's window in whole seconds, rounded up as the
// headers carry it.
func windowSeconds(l *policy.Limit) int64 { return headers.Seconds(l.W()) }

// judged reports whether e is a response whose headers are judged: an
// admission or a 429 of a tiered, non-variant request outside store faults.
func (ix *index) judgedResponse(r rec) bool {
	return !r.variant && !r.fault && (r.out == history.Admitted || r.limit)
}

const docHeaders = "Where the policy declares them, admitted and 429 responses (admitted ones only with headers.on: admitted) carry the RateLimit fields of the declared generation — structured (RateLimit and RateLimit-Policy lists, draft 08+), dictionary (RateLimit: limit=, remaining=, reset=, draft 07) or split (RateLimit-Limit/-Remaining/-Reset, drafts 00–06) — that parse, whose quota is a tier limit's N with window W (seconds, rounded up), remaining in [0, N] and reset within the window; and X-RateLimit-Limit = N, -Remaining in [0, N], -Reset in the declared form within the window. While a declared limit change is in force (made plus tolerance.propagation), the changed tier's answers carry the changed limits; when the limiter is shown to decide by other limits too, the summary names that defect instead."

// checkHeaders is O(N): one pass over the headers parsed by the index.
func checkHeaders(ix *index) Result {
	hp := ix.p.Headers
	col := ix.collector()
	figs := map[string]float64{}
	if !hp.RateLimit.Declared() && !hp.XRateLimit {
		return col.result(Skip, "the policy declares neither RateLimit nor X-RateLimit headers", figs, "")
	}
	checked := 0
	oc := ix.newObsCache()
	var probs []string
	// Responses are judged one by one, in file order (sequential memory).
	maxW := map[*policy.Tier]int64{}
	for ti := range ix.p.Tiers {
		t := &ix.p.Tiers[ti]
		for li := range t.Limits {
			maxW[t] = max(maxW[t], windowSeconds(&t.Limits[li]))
		}
	}
	// The largest window of each group's tier, and the last policy item
	// it matched.
	gMaxW := make([]int64, len(ix.groups))
	gPol := make([]polMemo, len(ix.groups))
	for gi := range ix.groups {
		if t := ix.groups[gi].tier; t != nil {
			gMaxW[gi] = maxW[t]
		}
	}
	for i := range ix.hdrs {
		h := &ix.hdrs[i]
		gi := ix.gid[i]
		g := &ix.groups[gi]
		if g.tier == nil || h.ev&evJudged == 0 {
			continue
		}
		if hp.On == policy.HeadersOnAdmitted && history.Outcome(h.ev&evOutMask) != history.Admitted {
			continue // declared: refusals carry no rate-limit headers
		}
		checked++
		if (!hp.RateLimit.Declared() || ix.rateLimitOK(h, g.tier, gMaxW[gi], &gPol[gi])) && (!hp.XRateLimit || ix.xRateLimitOK(h, g.tier, gMaxW[gi])) {
			continue // what the table holds shows no problem
		}
		e := &ix.h.Events[i]
		r := ix.mkRec(e, i)
		probs = probs[:0]
		if hp.RateLimit.Declared() {
			probs = checkRateLimit(oc.read(e), g.tier, gMaxW[gi], probs)
		}
		if hp.XRateLimit {
			probs = ix.checkXRateLimit(e, r, g.tier, gMaxW[gi], probs)
		}
		if len(probs) > 0 {
			ev := Evidence{Key: g.key, Limit: limitNames(g.tier), From: r.lo, To: r.hi, RequestIDs: []uint64{e.ID}, TotalIDs: 1,
				Message: fmt.Sprintf("request %d (status %d): %s", e.ID, e.Status, strings.Join(probs, "; "))}
			if slices.ContainsFunc(probs, func(p string) bool { return strings.HasSuffix(p, " is missing") }) {
				ev.Cause = CauseMissingHeader
			}
			col.add(ev)
		}
	}
	figs["responses_checked"] = float64(checked)
	if checked == 0 {
		return col.result(Skip, "no admitted or 429 responses outside fault windows", figs, "")
	}
	return col.result(Pass, fmt.Sprintf("%s %s valid and consistent with the policy", plural(checked, "response's", "responses'"), strings.Join(headerKinds(ix), " and ")), figs,
		fmt.Sprintf("%s with missing or wrong rate-limit headers", plural(col.total, "response", "responses")))
}

// headerKinds names the header sets the policy declares, for a summary.
func headerKinds(ix *index) []string {
	var which []string
	switch ix.gen {
	case headers.Structured:
		which = append(which, "RateLimit/RateLimit-Policy")
	case headers.Dictionary:
		which = append(which, "RateLimit (dictionary)")
	case headers.Split:
		which = append(which, "RateLimit-Limit/-Remaining/-Reset")
	}
	if ix.p.Headers.XRateLimit {
		which = append(which, "X-RateLimit-*")
	}
	return which
}

// rateLimitOK reports whether h shows that checkRateLimit finds no problem;
// false means: ask checkRateLimit. The counters are present in the common
// form with their limit known, remaining ≤ limit and reset ≤ the window
// (+1 s of rounding); structured: one RateLimit-Policy item that matches a
// limit of t and names the RateLimit item; dictionary and split: the limit
// is a limit of t and RateLimit-Policy is absent or one item that matches.
func (ix *index) rateLimitOK(h *hdr, t *policy.Tier, maxW int64, m *polMemo) bool {
	if h.state(sRL) != hInt || !h.hasLim() || h.rlR > h.rlLim || int64(h.rlT) > maxW+1 {
		return false
	}
	switch h.state(sPol) {
	case hInt:
		return m.matches(t, h.polQ, h.polW) && (ix.gen == headers.Structured || tierHasCount(t, int64(h.rlLim)))
	case hAbsent:
		return ix.gen != headers.Structured && tierHasCount(t, int64(h.rlLim))
	}
	return false
}

// polMemo remembers the last answer of policyMatches for one key: its
// responses repeat one policy item.
type polMemo struct {
	set  bool
	q, w int32
	ok   bool
}

func (m *polMemo) matches(t *policy.Tier, q, w int32) bool {
	if !m.set || m.q != q || m.w != w {
		*m = polMemo{set: true, q: q, w: w, ok: policyMatches(t, int64(q), int64(w))}
	}
	return m.ok
}

// policyMatches reports whether a quota policy of q per w seconds (w < 0:
// not stated) is a limit of t.
func policyMatches(t *policy.Tier, q, w int64) bool {
	for li := range t.Limits {
		l := &t.Limits[li]
		if q == l.Count && (w < 0 || w == windowSeconds(l)) {
			return true
		}
	}
	return false
}

// xRateLimitOK reports whether h shows that checkXRateLimit finds no
// problem (relative resets only). false means: ask checkXRateLimit.
func (ix *index) xRateLimitOK(h *hdr, t *policy.Tier, maxW int64) bool {
	if ix.p.Headers.XReset != string(headers.ResetRelative) || h.state(sXLimit) != hInt || h.state(sXRemaining) != hInt || h.state(sXReset) != hInt {
		return false
	}
	limit, rem, reset := int64(h.xlim), int64(h.xrem), int64(h.xreset)
	return tierHasCount(t, limit) && rem >= 0 && rem <= limit && reset >= 0 && reset <= maxW+1
}

// checkRateLimit judges the RateLimit fields of the declared generation,
// as o holds them.
func checkRateLimit(o headers.Observed, t *policy.Tier, maxW int64, probs []string) []string {
	structured := o.Generation == headers.Structured
	// The policies a response declares must each be a limit of the tier.
	switch o.Policy.State {
	case headers.Absent:
		if structured {
			probs = append(probs, "RateLimit-Policy is missing")
		}
	case headers.Invalid:
		probs = append(probs, o.Policy.Err.Error())
	}
	for _, it := range o.Policies {
		if !policyMatches(t, it.Quota, it.Window) {
			name := ""
			if structured {
				name = fmt.Sprintf(" %q", it.Name)
			}
			probs = append(probs, fmt.Sprintf("RateLimit-Policy%s declares q=%d w=%d, but tier %s's limits are %s",
				name, it.Quota, it.Window, t.Name, describeLimits(t)))
		}
	}
	if structured {
		return checkStructured(o, maxW, probs)
	}
	return checkCounters(o, t, maxW, probs)
}

// checkStructured judges every item of a structured RateLimit against the
// RateLimit-Policy item it names.
func checkStructured(o headers.Observed, maxW int64, probs []string) []string {
	switch o.Remaining.State {
	case headers.Absent:
		return append(probs, "RateLimit is missing")
	case headers.Invalid:
		return append(probs, o.Remaining.Err.Error())
	}
	for _, it := range o.Items {
		q := int64(-1)
		for _, p := range o.Policies {
			if p.Name == it.Name {
				q = p.Quota
				break
			}
		}
		switch {
		case o.Policy.Valid() && q < 0:
			probs = append(probs, fmt.Sprintf("RateLimit names policy %q, which RateLimit-Policy does not declare", it.Name))
		case q >= 0 && it.Remaining > q:
			probs = append(probs, fmt.Sprintf("RateLimit r=%d exceeds the quota q=%d", it.Remaining, q))
		}
		if it.Reset > maxW+1 {
			probs = append(probs, fmt.Sprintf("RateLimit t=%ds is longer than the window (%ds)", it.Reset, maxW))
		}
	}
	return probs
}

// checkCounters judges the limit, remaining and reset of the dictionary
// and split generations.
func checkCounters(o headers.Observed, t *policy.Tier, maxW int64, probs []string) []string {
	split := o.Generation == headers.Split
	name := func(key string, n int64) string { return counterName(o.Generation, key, n) }
	var errs []string
	for _, c := range []struct {
		key      string
		v        headers.Value
		required bool
	}{{"limit", o.Limit, true}, {"remaining", o.Remaining, false}, {"reset", o.Reset, true}} {
		switch c.v.State {
		case headers.Absent:
			if !c.required {
				continue
			}
			field := headers.RateLimit
			if split {
				field = "RateLimit-" + strings.ToUpper(c.key[:1]) + c.key[1:]
			}
			if !slices.Contains(probs, field+" is missing") {
				probs = append(probs, field+" is missing")
			}
		case headers.Invalid:
			if msg := c.v.Err.Error(); !slices.Contains(errs, msg) {
				errs = append(errs, msg)
			}
		}
	}
	probs = append(probs, errs...)
	if o.Limit.Valid() && !tierHasCount(t, o.Limit.N) {
		probs = append(probs, fmt.Sprintf("%s is not a limit of tier %s (%s)", name("limit", o.Limit.N), t.Name, describeLimits(t)))
	}
	if o.Limit.Valid() && o.Remaining.Valid() && o.Remaining.N > o.Limit.N {
		probs = append(probs, fmt.Sprintf("%s exceeds the limit %d", name("remaining", o.Remaining.N), o.Limit.N))
	}
	if o.Reset.Valid() && o.Reset.N > maxW+1 {
		probs = append(probs, fmt.Sprintf("%ss is longer than the window (%ds)", name("reset", o.Reset.N), maxW))
	}
	return probs
}

// counterName says a counter (limit, remaining or reset) with its value as
// generation g spells it: "RateLimit r=3", "RateLimit remaining=3",
// "RateLimit-Remaining 3".
func counterName(g headers.Generation, key string, n int64) string {
	switch g {
	case headers.Structured:
		param := map[string]string{"limit": "RateLimit-Policy q", "remaining": "RateLimit r", "reset": "RateLimit t"}[key]
		return fmt.Sprintf("%s=%d", param, n)
	case headers.Split:
		return fmt.Sprintf("RateLimit-%s %d", strings.ToUpper(key[:1])+key[1:], n)
	}
	return fmt.Sprintf("RateLimit %s=%d", key, n)
}

func describeLimits(t *policy.Tier) string {
	s := make([]string, len(t.Limits))
	for i := range t.Limits {
		s[i] = fmt.Sprintf("q=%d w=%d", t.Limits[i].Count, windowSeconds(&t.Limits[i]))
	}
	return strings.Join(s, ", ")
}

func (ix *index) checkXRateLimit(e *history.Event, r rec, t *policy.Tier, maxW int64, probs []string) []string {
	limit := int64(-1)
	switch {
	case e.XLimit == "":
		probs = append(probs, "X-RateLimit-Limit is missing")
	default:
		v, err := headers.ParseXInt(e.XLimit)
		if err != nil {
			probs = append(probs, fmt.Sprintf("X-RateLimit-Limit %q is not an integer", e.XLimit))
		} else if !tierHasCount(t, v) {
			probs = append(probs, fmt.Sprintf("X-RateLimit-Limit %d is not a limit of tier %s (%s)", v, t.Name, describeLimits(t)))
		} else {
			limit = v
		}
	}
	if e.XRemaining == "" {
		probs = append(probs, "X-RateLimit-Remaining is missing")
	} else if v, err := headers.ParseXInt(e.XRemaining); err != nil {
		probs = append(probs, fmt.Sprintf("X-RateLimit-Remaining %q is not an integer", e.XRemaining))
	} else if v < 0 || (limit >= 0 && v > limit) {
		probs = append(probs, fmt.Sprintf("X-RateLimit-Remaining %d is outside [0, %d]", v, max(limit, 0)))
	}
	if e.XReset == "" {
		return append(probs, "X-RateLimit-Reset is missing")
	}
	reset, err := headers.ParseXReset(e.XReset, headers.ResetForm(ix.p.Headers.XReset))
	if err != nil {
		return append(probs, err.Error())
	}
	// The reset must lie between the decision and one window (plus a second
	// of rounding) after it.
	if !reset.Absolute() {
		if reset.Delta > maxW+1 {
			return append(probs, fmt.Sprintf("X-RateLimit-Reset %ds is longer than the window (%ds)", reset.Delta, maxW))
		}
		return probs
	}
	lo := ix.h.Wall(r.lo).Add(-time.Second)
	hi := ix.h.Wall(r.hi).Add(time.Duration(maxW+1) * time.Second)
	if reset.At.Before(lo) || reset.At.After(hi) {
		probs = append(probs, fmt.Sprintf("X-RateLimit-Reset %s is not within the window after the response (%s … %s)",
			e.XReset, lo.UTC().Format(time.RFC3339), hi.UTC().Format(time.RFC3339)))
	}
	return probs
}
