package checks

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// headerCache memoises header parsing: a run repeats few distinct values.
type headerCache struct {
	rl  map[string]parsedRL
	rlp map[string]parsedRLP
}

type parsedRL struct {
	items []RateLimitItem
	err   error
}

type parsedRLP struct {
	items []RateLimitPolicyItem
	err   error
}

func newHeaderCache() *headerCache {
	return &headerCache{rl: map[string]parsedRL{}, rlp: map[string]parsedRLP{}}
}

func (c *headerCache) rateLimit(s string) ([]RateLimitItem, error) {
	if v, ok := c.rl[s]; ok {
		return v.items, v.err
	}
	items, err := ParseRateLimit(s)
	if len(c.rl) < 1<<16 {
		c.rl[s] = parsedRL{items, err}
	}
	return items, err
}

func (c *headerCache) policy(s string) ([]RateLimitPolicyItem, error) {
	if v, ok := c.rlp[s]; ok {
		return v.items, v.err
	}
	items, err := ParseRateLimitPolicy(s)
	if len(c.rlp) < 1<<16 {
		c.rlp[s] = parsedRLP{items, err}
	}
	return items, err
}

// windowSeconds is a limit's window in whole seconds, rounded up.
func windowSeconds(l *policy.Limit) int64 {
	return int64(math.Ceil(l.W().Seconds() - 1e-9))
}

// judged reports whether e is a response whose headers are judged: an
// admission or a 429 of a tiered, non-variant request outside store faults.
func (ix *index) judgedResponse(r rec) bool {
	return !r.variant && !r.fault && (r.out == history.Admitted || r.limit)
}

const docHeaders = "Where the policy declares them, admitted and 429 responses carry RateLimit and RateLimit-Policy (draft-ietf-httpapi-ratelimit-headers-10 Structured Fields) whose q and w match a tier limit's N and W (seconds, rounded up) with r in [0, q], and X-RateLimit-Limit = N, -Remaining in [0, N], -Reset in the declared form within the window."

func checkHeaders(ix *index) Result {
	hp := ix.p.Headers
	col := ix.collector()
	figs := map[string]float64{}
	if !hp.RateLimit.Declared() && !hp.XRateLimit {
		return col.result(Skip, "the policy declares neither RateLimit nor X-RateLimit headers", figs, "")
	}
	hc := newHeaderCache()
	checked := 0
	var probs []string
	// Responses are judged one by one, in file order (sequential memory).
	maxW := map[*policy.Tier]int64{}
	for ti := range ix.p.Tiers {
		t := &ix.p.Tiers[ti]
		for li := range t.Limits {
			maxW[t] = max(maxW[t], windowSeconds(&t.Limits[li]))
		}
	}
	// The largest window of each group's tier.
	gMaxW := make([]int64, len(ix.groups))
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
		checked++
		if (!hp.RateLimit.Declared() || rateLimitOK(h, g.tier)) && (!hp.XRateLimit || ix.xRateLimitOK(h, g.tier, gMaxW[gi])) {
			continue // what the table holds shows no problem
		}
		e := &ix.h.Events[i]
		r := ix.mkRec(e, i)
		probs = probs[:0]
		if hp.RateLimit.Declared() {
			probs = ix.checkRateLimit(e, g.tier, hc, probs)
		}
		if hp.XRateLimit {
			probs = ix.checkXRateLimit(e, r, g.tier, maxW[g.tier], probs)
		}
		if len(probs) > 0 {
			col.add(Evidence{Key: g.key, Limit: limitNames(g.tier), From: r.lo, To: r.hi, RequestIDs: []uint64{e.ID}, TotalIDs: 1,
				Message: fmt.Sprintf("request %d (status %d): %s", e.ID, e.Status, strings.Join(probs, "; "))})
		}
	}
	figs["responses_checked"] = float64(checked)
	if checked == 0 {
		return col.result(Skip, "no admitted or 429 responses outside fault windows", figs, "")
	}
	var which []string
	if hp.RateLimit.Declared() {
		which = append(which, "RateLimit/RateLimit-Policy")
	}
	if hp.XRateLimit {
		which = append(which, "X-RateLimit-*")
	}
	return col.result(Pass, fmt.Sprintf("%s %s valid and consistent with the policy", plural(checked, "response's", "responses'"), strings.Join(which, " and ")), figs,
		fmt.Sprintf("%s with missing or wrong rate-limit headers", plural(col.total, "response", "responses")))
}

// rateLimitOK reports whether h shows that checkRateLimit finds no problem:
// one RateLimit-Policy item that matches a limit of t, and one RateLimit
// item naming it with r ≤ q. false means: ask checkRateLimit.
func rateLimitOK(h *hdr, t *policy.Tier) bool {
	if h.state(sPol) != hInt || h.state(sRL) != hInt || h.st&(1<<sSameName) == 0 || h.polQ < 0 || h.rlR > h.polQ {
		return false
	}
	q, w := int64(h.polQ), int64(h.polW)
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
	if ix.p.Headers.XReset != "relative" || h.state(sXLimit) != hInt || h.state(sXRemaining) != hInt || h.state(sXReset) != hInt {
		return false
	}
	limit, rem, reset := int64(h.xlim), int64(h.xrem), int64(h.xreset)
	return tierHasCount(t, limit) && rem >= 0 && rem <= limit && reset >= 0 && reset <= maxW+1
}

func (ix *index) checkRateLimit(e *history.Event, t *policy.Tier, hc *headerCache, probs []string) []string {
	var pol []RateLimitPolicyItem
	if e.RateLimitPolicy == "" {
		probs = append(probs, "RateLimit-Policy is missing")
	} else if items, err := hc.policy(e.RateLimitPolicy); err != nil {
		probs = append(probs, err.Error())
	} else {
		pol = items
		for _, it := range items {
			match := false
			for li := range t.Limits {
				l := &t.Limits[li]
				if it.Quota == l.Count && (it.Window < 0 || it.Window == windowSeconds(l)) {
					match = true
				}
			}
			if !match {
				probs = append(probs, fmt.Sprintf("RateLimit-Policy %q declares q=%d w=%d, but tier %s's limits are %s",
					it.Policy, it.Quota, it.Window, t.Name, describeLimits(t)))
			}
		}
	}
	if e.RateLimit == "" {
		return append(probs, "RateLimit is missing")
	}
	items, err := hc.rateLimit(e.RateLimit)
	if err != nil {
		return append(probs, err.Error())
	}
	for _, it := range items {
		q := int64(-1)
		for _, p := range pol {
			if p.Policy == it.Policy {
				q = p.Quota
			}
		}
		if pol != nil && q < 0 {
			probs = append(probs, fmt.Sprintf("RateLimit names policy %q, which RateLimit-Policy does not declare", it.Policy))
			continue
		}
		if q >= 0 && it.Remaining > q {
			probs = append(probs, fmt.Sprintf("RateLimit r=%d exceeds the quota q=%d", it.Remaining, q))
		}
	}
	return probs
}

func describeLimits(t *policy.Tier) string {
	s := make([]string, len(t.Limits))
	for i := range t.Limits {
		s[i] = fmt.Sprintf("q=%d w=%d", t.Limits[i].Count, windowSeconds(&t.Limits[i]))
	}
	return strings.Join(s, ", ")
}

func parseInt(s string) (int64, error) {
	return strconv.ParseInt(strings.TrimSpace(s), 10, 64)
}

func (ix *index) checkXRateLimit(e *history.Event, r rec, t *policy.Tier, maxW int64, probs []string) []string {
	limit := int64(-1)
	switch {
	case e.XLimit == "":
		probs = append(probs, "X-RateLimit-Limit is missing")
	default:
		v, err := parseInt(e.XLimit)
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
	} else if v, err := parseInt(e.XRemaining); err != nil {
		probs = append(probs, fmt.Sprintf("X-RateLimit-Remaining %q is not an integer", e.XRemaining))
	} else if v < 0 || (limit >= 0 && v > limit) {
		probs = append(probs, fmt.Sprintf("X-RateLimit-Remaining %d is outside [0, %d]", v, max(limit, 0)))
	}
	if e.XReset == "" {
		return append(probs, "X-RateLimit-Reset is missing")
	}
	// The reset must lie between the decision and one window (plus a second
	// of rounding) after it.
	var at time.Time
	switch ix.p.Headers.XReset {
	case "relative":
		v, err := parseInt(e.XReset)
		if err != nil || v < 0 {
			return append(probs, fmt.Sprintf("X-RateLimit-Reset %q is not a non-negative number of seconds", e.XReset))
		}
		if v > maxW+1 {
			return append(probs, fmt.Sprintf("X-RateLimit-Reset %ds is longer than the window (%ds)", v, maxW))
		}
		return probs
	case "epoch":
		v, err := parseInt(e.XReset)
		if err != nil || v < 0 {
			return append(probs, fmt.Sprintf("X-RateLimit-Reset %q is not epoch seconds", e.XReset))
		}
		at = time.Unix(v, 0)
	case "date":
		d, err := time.Parse(httpDates[0], strings.TrimSpace(e.XReset))
		if err != nil {
			return append(probs, fmt.Sprintf("X-RateLimit-Reset %q is not an HTTP-date", e.XReset))
		}
		at = d
	}
	lo := ix.h.Wall(r.lo).Add(-time.Second)
	hi := ix.h.Wall(r.hi).Add(time.Duration(maxW+1) * time.Second)
	if at.Before(lo) || at.After(hi) {
		probs = append(probs, fmt.Sprintf("X-RateLimit-Reset %s is not within the window after the response (%s … %s)",
			e.XReset, lo.UTC().Format(time.RFC3339), hi.UTC().Format(time.RFC3339)))
	}
	return probs
}
