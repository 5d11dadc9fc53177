package checks

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/rlverify/rlverify/headers"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

const docUnder = "A 429 is wrong when every limit of the key provably had room at every possible decision time, even if every admitted or unknown request of the key (variants included; refused ones too for a limit that counts all) that could have been decided earlier consumed as early as possible; windows anchored at a key's first request are not assumed aligned; 503s and requests overlapping a store fault are not judged."

// maxScan bounds the backward scan per rejection; past it a rejection is
// left undecided unless a coarser bound already proves it.
const maxScan = 4096

type wrongRej struct {
	g *group
	r rec
	// why explains, per limit, the room the key provably had.
	why []string
	// room is the least provable room over the limits (tokens or slots).
	room float64
}

type underResult struct {
	wrong     []wrongRej
	judged    int
	undecided int
}

// cands is one key's possibly-consuming requests in two orders.
type cands struct {
	lo []int64 // sorted ascending (the lo of each candidate)
	hi []int64 // the hi values sorted ascending
}

// upTo returns #{candidates with lo ≤ t}.
func (c *cands) loUpTo(t int64) int {
	n, _ := slices.BinarySearch(c.lo, t+1)
	return n
}

// add appends r's interval (hi unsorted until the caller sorts).
func (c *cands) add(r rec) {
	c.lo = append(c.lo, r.lo)
	c.hi = append(c.hi, r.hi)
}

// addInst adds r to its instance's candidates in m (nil: none kept).
func addInst(m map[int16]*cands, r rec) {
	if m == nil {
		return
	}
	pc := m[r.inst]
	if pc == nil {
		pc = &cands{}
		m[r.inst] = pc
	}
	pc.add(r)
}

// hiBelow returns #{candidates with hi < t}.
func (c *cands) hiBelow(t int64) int {
	n, _ := slices.BinarySearch(c.hi, t)
	return n
}

// under computes the wrong rejections once (under-admission and isolation
// share them).
func (ix *index) under() *underResult {
	ix.underOnce.Do(ix.computeUnder)
	return ix.underRes
}

func (ix *index) computeUnder() {
	res := &underResult{}
	ix.underRes = res
	var c, all cands
	for gi := range ix.groups {
		g := &ix.groups[gi]
		if g.tier == nil {
			continue
		}
		hasRej := false
		for _, r := range g.recs {
			if r.out == history.Rejected && !r.variant {
				hasRej = true
				break
			}
		}
		if !hasRej {
			continue
		}
		c.lo, c.hi = c.lo[:0], c.hi[:0]
		all.lo, all.hi = all.lo[:0], all.hi[:0]
		// perInst: for limits declared per instance; all (allInst): for
		// limits that count refused requests too, judged over every request.
		var perInst, allInst map[int16]*cands
		countsAll := false
		for _, l := range g.tier.Limits {
			if l.PerInstance() {
				perInst, allInst = map[int16]*cands{}, map[int16]*cands{}
			}
			countsAll = countsAll || l.CountsRejected()
		}
		for _, r := range g.recs {
			if r.out != history.Rejected {
				c.add(r)
				addInst(perInst, r)
			}
			if countsAll {
				all.add(r)
				addInst(allInst, r)
			}
		}
		slices.Sort(c.hi)
		slices.Sort(all.hi)
		for _, m := range []map[int16]*cands{perInst, allInst} {
			for _, pc := range m {
				slices.Sort(pc.hi)
			}
		}
		for _, r := range g.recs {
			if r.out != history.Rejected || r.variant || !r.limit || r.fault {
				continue
			}
			res.judged++
			wrong := true
			undecided := false
			room := math.Inf(1)
			var why []string
			for li := range g.tier.Limits {
				l := &g.tier.Limits[li]
				// Among every request, the rejection itself is a candidate:
				// one more unit of room makes up for counting it.
				cc, inst, self := &c, perInst, 0.0
				if l.CountsRejected() {
					cc, inst, self = &all, allInst, 1
				}
				if l.PerInstance() {
					if cc = inst[r.inst]; cc == nil {
						cc = &cands{}
					}
				}
				v, ok, dec := ix.room(cc, r, l, self)
				if !dec {
					undecided = true
				}
				if !ok {
					wrong = false
					break
				}
				room = math.Min(room, v)
				why = append(why, roomText(l, v))
			}
			switch {
			case wrong && !undecided:
				res.wrong = append(res.wrong, wrongRej{g: g, r: r, why: why, room: room})
			case undecided && wrong:
				res.undecided++
			}
		}
	}
}

func roomText(l *policy.Limit, v float64) string {
	if l.Algorithm.Bucketed() {
		return fmt.Sprintf("%s held at least %s tokens", l.Name, fmtF(v))
	}
	return fmt.Sprintf("%s had at least %s free slots", l.Name, fmtF(v))
}

// room returns a lower bound on the room limit l had for rejection r at every
// possible decision time; ok when that is provably enough for one request;
// decided is false when the scan was cut short without an answer. self is
// added to the limit's size (1 when the candidates include r itself).
func (ix *index) room(c *cands, r rec, l *policy.Limit, self float64) (v float64, ok, decided bool) {
	P := c.loUpTo(r.hi) // candidates that could have been decided by r.hi
	N := float64(l.Count) + self
	switch l.Algorithm {
	case policy.TokenBucket, policy.GCRA:
		K, rate := l.K()+self, l.R()/1e9
		q := c.hiBelow(r.lo)
		cnt := P - q // could have been decided inside [r.lo, r.hi]
		lb := K - float64(cnt)
		if lb < 1+eps {
			return lb, false, true
		}
		// Walk back over candidates surely decided before r.lo, latest first:
		// from a = their hi, the bucket gained r·(r.lo−a) and lost at most
		// everything that could have been decided in [a, r.hi].
		steps := 0
		for j := q - 1; j >= 0; j-- {
			cnt++
			val := K + rate*float64(r.lo-c.hi[j]) - float64(cnt)
			if val < lb {
				lb = val
				if lb < 1+eps {
					return lb, false, true
				}
			}
			if steps++; steps >= maxScan {
				// For every earlier a the loss is at most P.
				rest := K + rate*float64(r.lo-c.hi[j]) - float64(P)
				if rest < 1+eps {
					return lb, false, false
				}
				return math.Min(lb, rest), true, true
			}
		}
		return lb, true, true
	case policy.SlidingLog, policy.FixedWindow:
		if l.Algorithm == policy.FixedWindow && !l.AnchoredAtFirst() {
			return ix.windowRoom(c, r, l, N)
		}
		// A sliding log, and a fixed window opened by the key's own first
		// request: the window holding r's decision opened less than W
		// before it, so only requests decided in (r.lo − W, r.hi] count.
		n := P - c.hiBelow(r.lo-int64(l.W())+1)
		v = N - float64(n)
		return v, v >= 1, true
	case policy.SlidingCounter:
		if l.Anchor == policy.AnchorFirst {
			// Periods that start at the key's own requests (HAProxy): the
			// current period and the one before it lie within 2W before the
			// decision, whatever their alignment.
			v = N - float64(P-c.hiBelow(r.lo-2*int64(l.W())+1))
			return v, v >= 1, true
		}
		return ix.windowRoom(c, r, l, N)
	}
	return 0, false, true
}

// windowRoom is room for epoch-aligned windows (fixed, and the sliding
// counter's pair of windows) of size n.
func (ix *index) windowRoom(c *cands, r rec, l *policy.Limit, n float64) (v float64, ok, decided bool) {
	W := int64(l.W())
	v = math.Inf(1)
	for k := floorDiv(ix.startNs+r.lo, W); k <= floorDiv(ix.startNs+r.hi, W); k++ {
		ws := k*W - ix.startNs
		we := min(ws+W-1, r.hi)
		from := ws
		if l.Algorithm == policy.SlidingCounter {
			from = ws - W
		}
		v = math.Min(v, n-float64(c.loUpTo(we)-c.hiBelow(from)))
	}
	return v, v >= 1, true
}

func checkUnder(ix *index) Result {
	res := ix.under()
	col := ix.collector()
	for _, w := range res.wrong {
		col.add(ix.rejEvidence(w, ""))
	}
	figs := map[string]float64{"rejections_judged": float64(res.judged), "undecided": float64(res.undecided)}
	if res.judged == 0 {
		return col.result(Skip, "no 429 rejections outside fault windows to judge", figs, "")
	}
	return col.result(Pass, fmt.Sprintf("none of %s could be shown wrong", plural(res.judged, "429", "429s")), figs,
		fmt.Sprintf("%s rejected while the key provably had room", plural(col.total, "request was", "requests were")))
}

func (ix *index) rejEvidence(w wrongRej, extra string) Evidence {
	e := ix.ev(w.r)
	msg := fmt.Sprintf("request %d of key %s got 429 although at every possible decision time %s", e.ID, w.g.key, strings.Join(w.why, " and "))
	if extra != "" {
		msg += "; " + extra
	}
	return Evidence{Key: w.g.key, Limit: limitNames(w.g.tier), From: w.r.lo, To: w.r.hi, Bound: 1, Observed: w.room,
		RequestIDs: []uint64{e.ID}, TotalIDs: 1, Message: msg}
}

func limitNames(t *policy.Tier) string {
	s := make([]string, len(t.Limits))
	for i, l := range t.Limits {
		s[i] = l.Name
	}
	return strings.Join(s, ",")
}

const docIsolation = "Keys never share quota: fails when a 429 was provably wrong counting only the key's own traffic while other keys were busy in that interval, or when a key was served another tier's limit (X-RateLimit-Limit, or the limit of the declared RateLimit generation: RateLimit-Policy q, limit=, RateLimit-Limit)."

func checkIsolation(ix *index) Result {
	col := ix.collector()
	figs := map[string]float64{}
	tiers := map[string]bool{}
	for gi := range ix.groups {
		g := &ix.groups[gi]
		if g.tier == nil {
			continue
		}
		tiers[g.tier.Name] = true
		n := 0
		for _, r := range g.recs {
			if r.out == history.Admitted && !r.variant {
				n++
			}
		}
		figs["admitted_"+g.tier.Name] += float64(n)
		figs["keys_"+g.tier.Name]++
	}
	// Wrong rejections attributable to other keys.
	res := ix.under()
	var order []int32
	for _, w := range res.wrong {
		if order == nil {
			order = ix.globalOrder()
		}
		// Another key whose admissions fell within one refill horizon
		// before this wrong rejection may have drained a shared quota.
		var horizon int64
		for _, l := range w.g.tier.Limits {
			horizon = max(horizon, int64(l.W()))
		}
		busy := ix.busyKeys(order, w.g.key, w.r.lo-horizon, w.r.hi)
		if len(busy) == 0 {
			continue
		}
		col.add(ix.rejEvidence(w, "other keys were busy then: "+strings.Join(busy, ", ")))
	}
	// Limits of another tier served to a key.
	mismatch := 0
	oc := ix.newObsCache()
	for i := range ix.hdrs {
		if len(ix.p.Tiers) < 2 {
			break
		}
		h := &ix.hdrs[i]
		g := &ix.groups[ix.gid[i]]
		if g.tier == nil || h.ev&(evVariant|evFallback) != 0 {
			continue
		}
		var v int64
		var ok bool
		switch xl := h.state(sXLimit); {
		case xl == hInt:
			v, ok = int64(h.xlim), true
		case xl == hAbsent && h.state(sRL) != hOther && h.state(sPol) != hOther:
			v, ok = int64(h.rlLim), h.hasLim()
		default:
			v, ok = observedLimit(&ix.h.Events[i], oc)
		}
		if !ok || tierHasCount(g.tier, v) {
			continue
		}
		e := &ix.h.Events[i]
		for ti := range ix.p.Tiers {
			t := &ix.p.Tiers[ti]
			if t != g.tier && tierHasCount(t, v) {
				mismatch++
				r := ix.mkRec(e, i)
				col.add(Evidence{Key: g.key, Limit: limitNames(g.tier), From: r.lo, To: r.hi, Bound: float64(g.tier.Limits[0].Count), Observed: float64(v),
					RequestIDs: []uint64{e.ID}, TotalIDs: 1,
					Message: fmt.Sprintf("key %s (tier %s, N=%d) was served limit %d, tier %s's quota", g.key, g.tier.Name, g.tier.Limits[0].Count, v, t.Name)})
				break
			}
		}
	}
	figs["tier_mismatches"] = float64(mismatch)
	if len(ix.groups) < 2 && mismatch == 0 {
		return col.result(Skip, "only one key in this run", figs, "")
	}
	names := make([]string, 0, len(tiers))
	for t := range tiers {
		names = append(names, t)
	}
	sort.Strings(names)
	return col.result(Pass, fmt.Sprintf("%s over tiers %s kept separate quotas", plural(len(ix.groups), "key", "keys"), strings.Join(names, ", ")), figs,
		fmt.Sprintf("%s of shared or wrong-tier quota", plural(col.total, "instance", "instances")))
}

func tierHasCount(t *policy.Tier, v int64) bool {
	for _, l := range t.Limits {
		if l.Count == v {
			return true
		}
	}
	return false
}

// observedLimit returns the quota a response declared: X-RateLimit-Limit,
// or the limit of the declared RateLimit generation (headers.Observed.Limit).
func observedLimit(e *history.Event, oc *obsCache) (int64, bool) {
	if e.XLimit != "" {
		v, err := headers.ParseXInt(e.XLimit)
		return v, err == nil
	}
	if oc.gen == headers.None {
		return 0, false
	}
	o := oc.read(e)
	return o.Limit.N, o.Limit.Valid()
}

// globalOrder returns event indices sorted by Sent.
func (ix *index) globalOrder() []int32 {
	ev := ix.h.Events
	order := make([]int32, len(ev))
	for i := range order {
		order[i] = int32(i)
	}
	if !slices.IsSortedFunc(ev, func(a, b history.Event) int { return cmpI64(a.Sent, b.Sent) }) {
		slices.SortStableFunc(order, func(a, b int32) int { return cmpI64(ev[a].Sent, ev[b].Sent) })
	}
	return order
}

// busyKeys lists (up to 5) other keys with admitted or unknown requests that
// could have been decided inside [lo, hi].
func (ix *index) busyKeys(order []int32, key string, lo, hi int64) []string {
	ev := ix.h.Events
	from := lo - ix.maxLat
	i := sort.Search(len(order), func(i int) bool { return ev[order[i]].Sent-ix.slack >= from })
	seen := map[string]bool{}
	var out []string
	for ; i < len(order); i++ {
		e := &ev[order[i]]
		if e.Sent-ix.slack > hi {
			break
		}
		if e.Key == key || Outcome(ix.p, e) == history.Rejected || e.Recv+ix.slack < lo || seen[e.Key] {
			continue
		}
		seen[e.Key] = true
		if len(out) < 5 {
			out = append(out, e.Key)
		}
	}
	sort.Strings(out)
	return out
}
