package checks

import (
	"fmt"
	"math"
	"sort"

	"github.com/rlverify/rlverify/headers"
	"github.com/rlverify/rlverify/history"
)

const docBounds = "Reported remaining (X-RateLimit-Remaining, or the remaining of the declared RateLimit generation: r, remaining=, RateLimit-Remaining) lies in [0, limit]; an admission never reports the full quota left; on a single-limit tier a 429 reports 0, both headers agree, and for buckets remaining never grows faster than the refill between two responses that were surely decided in order; and remaining is never lower than the whole quota less every request of the key that could have consumed by then (off by one in either direction is a finding). After a declared limit change, the changed tier is judged by the changed limits from each key's refill from empty under them, as under-admission does."

// remaining returns the remaining count a response reported, and the limit
// it reported it against (-1 when unknown): X-RateLimit-* first, then the
// RateLimit fields of the declared generation. xrem is X-RateLimit-Remaining
// (-1 when absent); rem ≠ xrem when both are given and disagree.
func remaining(e *history.Event, oc *obsCache) (rem, lim int64, xrem int64, ok bool) {
	rem, lim, xrem = -1, -1, -1
	if e.XLimit != "" {
		if v, err := headers.ParseXInt(e.XLimit); err == nil {
			lim = v
		}
	}
	if e.XRemaining != "" {
		if v, err := headers.ParseXInt(e.XRemaining); err == nil {
			rem, xrem, ok = v, v, true
		}
	}
	if oc.gen == headers.None {
		return rem, lim, xrem, ok
	}
	if o := oc.read(e); o.Remaining.Valid() {
		r := o.Remaining.N
		if !ok {
			rem, ok = r, true
		}
		if lim < 0 && o.Limit.Valid() {
			lim = o.Limit.N
		}
		if xrem >= 0 && r != xrem {
			// Signal disagreement through xrem ≠ rem.
			rem = r
		}
	}
	return rem, lim, xrem, ok
}

// remainingHdr is remaining for a hdr whose headers are all absent or
// hInt (RateLimit-Policy too when RateLimit is present).
func remainingHdr(h *hdr) (rem, lim int64, xrem int64, ok bool) {
	rem, lim, xrem = -1, -1, -1
	if h.state(sXLimit) == hInt {
		lim = int64(h.xlim)
	}
	if h.state(sXRemaining) == hInt {
		rem, xrem, ok = int64(h.xrem), int64(h.xrem), true
	}
	if h.state(sRL) == hInt {
		r := int64(h.rlR)
		if !ok {
			rem, ok = r, true
		}
		if lim < 0 && h.hasLim() {
			lim = int64(h.rlLim)
		}
		if xrem >= 0 && r != xrem {
			// Signal disagreement through xrem ≠ rem.
			rem = r
		}
	}
	return rem, lim, xrem, ok
}

// checkBounds is O(N): each response's report alone, then per key each
// report against the 8 before it.
func checkBounds(ix *index) Result {
	col := ix.collector()
	oc := ix.newObsCache()
	seen := 0
	// Pass 1, in file order: bounds of each response alone. Remember what
	// each reported for pass 2.
	// rems holds, by position in ix.recs, the remaining a response reported
	// against its tier's single limit, or -1.
	rems := make([]int32, len(ix.recs))
	for i := range rems {
		rems[i] = -1
	}
	for i := range ix.hdrs {
		h := &ix.hdrs[i]
		g := &ix.groups[ix.gid[i]]
		if g.tier == nil || (h.state(sXRemaining) == hAbsent && h.state(sRL) == hAbsent) || h.ev&evJudged == 0 {
			continue
		}
		var rem, lim, xrem int64
		var ok bool
		if h.state(sXLimit) != hOther && h.state(sXRemaining) != hOther && h.state(sRL) != hOther && (h.state(sRL) == hAbsent || h.state(sPol) != hOther) {
			rem, lim, xrem, ok = remainingHdr(h)
		} else {
			rem, lim, xrem, ok = remaining(&ix.h.Events[i], oc)
		}
		if !ok {
			continue
		}
		out := h.out()
		cost := int64(ix.recs[ix.pos[i]].tokens())
		seen++
		maxK := int64(0)
		for _, l := range g.tier.Limits {
			maxK = max(maxK, l.Count)
		}
		if lim < 0 {
			lim = maxK
		}
		single := len(g.tier.Limits) == 1
		bad := func(bound float64, format string, args ...any) {
			e := &ix.h.Events[i]
			r := ix.mkRec(e, i)
			col.add(Evidence{Key: g.key, Limit: limitNames(g.tier), From: r.lo, To: r.hi, Bound: bound, Observed: float64(rem),
				RequestIDs: []uint64{e.ID}, TotalIDs: 1, Message: fmt.Sprintf("request %d of key %s: ", e.ID, g.key) + fmt.Sprintf(format, args...)})
		}
		switch {
		case rem < 0:
			bad(0, "reported %d remaining (negative)", rem)
		case rem > lim || rem > maxK:
			bad(float64(min(lim, maxK)), "reported %d remaining, more than the limit %d", rem, min(lim, maxK))
		case out == history.Admitted && cost == 1 && rem >= lim && tierHasCount(g.tier, lim):
			bad(float64(lim-1), "was admitted yet reported the whole quota (%d) remaining; after consuming at most %d can remain", rem, lim-1)
		case out == history.Admitted && cost > 1 && rem > lim-cost && tierHasCount(g.tier, lim):
			bad(float64(lim-cost), "was admitted at cost %d yet reported %d remaining; after consuming %d of %d at most %d can remain", cost, rem, cost, lim, lim-cost)
		case single && out == history.Rejected && rem >= max(cost, 1):
			if cost > 1 {
				bad(float64(cost-1), "got 429 at cost %d while reporting %d remaining on a single-limit tier", cost, rem)
				break
			}
			bad(0, "got 429 while reporting %d remaining on a single-limit tier", rem)
		case single && xrem >= 0 && xrem != rem:
			bad(float64(xrem), "X-RateLimit-Remaining %d and %s disagree", xrem, counterName(ix.gen, "remaining", rem))
		default:
			// Only reports against the tier's single limit take part in pass 2.
			if single && lim == g.tier.Limits[0].Count && rem <= math.MaxInt32 {
				rems[ix.pos[i]] = int32(rem)
			}
		}
	}
	// Pass 2, per key: for single-limit buckets, remaining never grows faster
	// than the refill between two responses surely decided in order.
	// prev holds the positions in g.recs of the last 8 reports, by np mod 8.
	var prev [8]int
	for gi := range ix.groups {
		g := &ix.groups[gi]
		if g.tier == nil || len(g.tier.Limits) != 1 || !g.tier.Limits[0].Algorithm.Bucketed() {
			continue
		}
		bucket := &g.tier.Limits[0]
		rate := bucket.R()
		np := 0
		grems := rems[g.off : int(g.off)+len(g.recs)]
		for j, r := range g.recs {
			rem := grems[j]
			if rem < 0 {
				continue
			}
			for k := np - 1; k >= 0 && k >= np-8; k-- {
				p, prem := g.recs[prev[k%8]], grems[prev[k%8]]
				if p.hi >= r.lo {
					continue
				}
				gain := rate * float64(r.hi-p.lo) / 1e9
				bound := float64(prem) + gain
				if r.out != history.Admitted || r.tokens() == 0 {
					bound++ // r consumed nothing
				}
				if float64(rem) >= bound+eps {
					e := ix.ev(r)
					col.add(Evidence{Key: g.key, Limit: bucket.Name, From: p.lo, To: r.hi, Bound: bound, Observed: float64(rem),
						RequestIDs: []uint64{ix.ev(p).ID, e.ID}, TotalIDs: 2,
						Message: fmt.Sprintf("request %d of key %s reported %d remaining, but request %d (surely decided earlier) reported %d and the bucket can refill only %s tokens in between",
							e.ID, g.key, rem, ix.ev(p).ID, prem, fmtF(gain))})
					break
				}
			}
			prev[np%8] = j
			np++
		}
	}
	// Pass 3, per key: remaining is never lower than the whole quota less
	// every request of the key that could have consumed by the response's
	// decision (a bucket's level never drops below K − consumed, refill or
	// not; a window's count never exceeds the requests sent). A count one
	// too low is as wrong as one too high.
	for gi := range ix.groups {
		g := &ix.groups[gi]
		if g.tier == nil || len(g.tier.Limits) != 1 || g.tier.Limits[0].PerInstance() {
			continue
		}
		l := &g.tier.Limits[0]
		all := l.CountsRejected()
		grems := rems[g.off : int(g.off)+len(g.recs)]
		// his: the lo of every possibly-consuming request, sorted (recs are).
		var his []int64
		for _, x := range g.recs {
			if all || x.out != history.Rejected {
				for range x.tokens() { // a weighted request consumes its cost
					his = append(his, x.lo)
				}
			}
		}
		for j, r := range g.recs {
			rem := grems[j]
			if rem < 0 || r.fault {
				continue
			}
			c := sort.Search(len(his), func(i int) bool { return his[i] > r.hi })
			if low := l.Count - int64(c); int64(rem) < low {
				e := ix.ev(r)
				col.add(Evidence{Key: g.key, Limit: l.Name, From: g.recs[0].lo, To: r.hi, Bound: float64(low), Observed: float64(rem),
					RequestIDs: []uint64{e.ID}, TotalIDs: 1,
					Message: fmt.Sprintf("request %d of key %s reported %d remaining, but at most %d of the key's requests could have consumed by its decision from a whole quota of %d, so at least %d remained",
						e.ID, g.key, rem, c, l.Count, low)})
			}
		}
	}
	figs := map[string]float64{"responses_with_remaining": float64(seen)}
	if seen == 0 {
		return col.result(Skip, "no response reported a remaining count", figs, "")
	}
	return col.result(Pass, fmt.Sprintf("%s reported remaining counts within bounds and consistent", plural(seen, "response", "responses")), figs,
		fmt.Sprintf("%s reported impossible remaining counts", plural(col.total, "response", "responses")))
}
