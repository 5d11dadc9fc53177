package checks

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rlverify/rlverify/headers"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

const docUnder = "A 429 is wrong when every limit of the key provably had room at every possible decision time, even if every admitted or unknown request of the key (variants included; refused ones too for a limit that counts all) that could have been decided earlier consumed as early as possible; windows anchored at a key's first request are not assumed aligned; 503s and requests overlapping a store fault are not judged. A key of an exempt class (policy exempt) is never to be refused: each refusal outside a fault window is wrong. Weighted requests (policy cost) need room for their whole cost, and a refused cost-0 peek is wrong; an answer the policy declares refunded (refund_on) holds its tokens only while it may be being decided. After a declared limit change (changes), the changed tier is judged by the changed limits from each key's first request after a refill from empty under them (their longest W plus the timing tolerance after both the change is in force and the key's last consumption); its requests before that point are not judged, and the summary says so."

// maxScan bounds the backward scan per rejection of room's linear walk
// (candidates without a walkMin: attribution's, oversell's); past it a
// rejection is left undecided unless a coarser bound already proves it.
// A walkMin answers over every earlier candidate at once and needs no
// bound (under-admission's candidates: its refusals are always decided).
const maxScan = 4096

type wrongRej struct {
	g *group
	r rec
	// id is the request's id when the event is not at hand (the
	// streaming check; Run reads it from the history).
	id uint64
	// why explains, per limit, the room the key provably had.
	why []string
	// room is the least provable room over the limits (tokens or slots).
	room float64
	// margin is how much later than the arithmetic allows the refusal
	// came at least (the timing tolerance plus the room's refill time).
	margin time.Duration
	// self: the refusal is explained if the key's own refused requests
	// consumed too (a limiter that deducts on refusal starves itself).
	self bool
	// sharedWith lists other keys whose admissions, had they come out of
	// this key's quota, explain the refusal.
	sharedWith []string
	// ambiguous: both the key's own refusals and sharedWith explain it.
	ambiguous bool
}

type underResult struct {
	wrong     []wrongRej
	judged    int
	undecided int
	// unattributed counts wrong refusals past maxAttributed of a key, whose
	// cause isolation did not weigh.
	unattributed int
}

// cands is one key's possibly-consuming requests in two orders.
type cands struct {
	lo []int64 // sorted ascending (the lo of each candidate)
	hi []int64 // the hi values sorted ascending
	// loBase, hiBase count the candidates before lo[0] and hi[0]: the
	// streaming check keeps only those that can still matter, and every
	// index below is absolute (0 for Run, which keeps them all).
	loBase, hiBase int
	// sorted: hi[:sorted] is in order (the streaming check inserts).
	sorted int
	// stream: the walks cover hi[:final] only, the candidates no later
	// one can come before (the streaming check's), and grow with it.
	stream bool
	final  int
	// indexed: room may answer its backward walk from a walkMin per rate
	// (built on first use, for cands queried once per refusal of a key).
	indexed bool
	walks   []walkMin
	nwalks  int // walks[:nwalks] are built for the current hi
	// gone summarises, per walk rate, the candidates by hi that the
	// streaming check dropped (hi[:0] starts at hiBase): the leftmost
	// least walkV among them, all a walk reads of them.
	gone []walkLeast
	// nearLo, nearHi: the last answers of loUpTo and hiBelow, where the
	// next search starts (successive refusals of a key ask nearby).
	nearLo, nearHi int
	// anch bounds the anchors of the key's windows under anchAt, a fixed
	// window opened by the key's first request (nil: none known).
	anch   *anchors
	anchAt *policy.Limit
}

// anchors bounds where a key's first-anchored windows opened under the
// declared policy: window j opened at some a_j ∈ [L[j], H[j]]. Every
// request counts (the first one decided after a window closes opens the
// next, whatever the limiter answered): a_1 is the key's first decision;
// a_{j+1}, the first decision at or after a_j + W, is at least L_j + W and
// at least the earliest lo of a request that can have been decided then,
// and at most the earliest hi of a request surely decided by the limiter
// (admitted or refused) and sent after H_j + W.
type anchors struct{ L, H []int64 }

// anchorsOf bounds the windows of limit l for the key's requests rs
// (sorted by lo); nil when the first window cannot be placed.
func anchorsOf(rs []rec, l *policy.Limit) *anchors {
	W := int64(l.W())
	var a anchors
	L, H := int64(math.MaxInt64), int64(math.MaxInt64)
	for _, r := range rs {
		if r.variant {
			continue
		}
		L = min(L, r.lo)
		if r.out != history.Unknown {
			H = min(H, r.hi)
		}
	}
	if H == math.MaxInt64 {
		return nil
	}
	span := int64(0)
	for _, r := range rs {
		span = max(span, r.hi-r.lo)
	}
	from := func(t int64) int { return sort.Search(len(rs), func(i int) bool { return rs[i].lo >= t }) }
	for len(a.L) < 1<<20 {
		a.L, a.H = append(a.L, L), append(a.H, H)
		nextL, nextH := int64(math.MaxInt64), int64(math.MaxInt64)
		// By lo: the first request that can be decided at L+W or later
		// has the least lo of them.
		for i := from(L + W - span); i < len(rs) && rs[i].lo < nextL; i++ {
			if !rs[i].variant && rs[i].hi >= L+W {
				nextL = rs[i].lo
			}
		}
		for i := from(H + W); i < len(rs) && rs[i].lo <= nextH; i++ {
			if !rs[i].variant && rs[i].out != history.Unknown {
				nextH = min(nextH, rs[i].hi)
			}
		}
		if nextL == math.MaxInt64 || nextH == math.MaxInt64 {
			break
		}
		L, H = max(L+W, nextL), nextH
	}
	return &a
}

// openedFrom is the earliest the window holding a decision in [lo, …] can
// have opened: at or after a_j for the last j whose a_j ≤ H_j ≤ lo, and
// after window j' closed for the last j' with H_j' + W ≤ lo (so at or after
// L_{j'+1}).
func (a *anchors) openedFrom(lo, W int64) int64 {
	from := int64(math.MinInt64)
	if j := sort.Search(len(a.H), func(i int) bool { return a.H[i] > lo }) - 1; j >= 0 {
		from = a.L[j]
	}
	if j := sort.Search(len(a.H), func(i int) bool { return a.H[i]+W > lo }) - 1; j >= 0 && j+1 < len(a.L) {
		from = max(from, a.L[j+1])
	}
	return from
}

// grow makes room for n more candidates at once.
func (c *cands) grow(n int) {
	c.lo, c.hi = slices.Grow(c.lo, n), slices.Grow(c.hi, n)
}

// reset empties c for another key, keeping its buffers.
func (c *cands) reset() {
	c.lo, c.hi = c.lo[:0], c.hi[:0]
	c.loBase, c.hiBase, c.sorted = 0, 0, 0
	c.nwalks = 0
	c.gone = c.gone[:0]
}

// walkLeast is a candidate of absolute index j (in hi order) with its hi
// and walkV at a rate.
type walkLeast struct {
	rate float64
	j    int
	hi   int64
	v    float64
}

// walkV is what a bucket's backward walk minimises over candidates j (hi
// order) at rate: j − rate·hi[j]. One expression for every caller, so
// equal inputs give equal floats.
func walkV(j int, hi int64, rate float64) float64 {
	return float64(j) - rate*float64(hi)
}

// least returns the candidate among the first q by hi (absolute; q >
// 0) with the least walkV at w's rate, the leftmost of equals: over
// those dropped (gone) and those w covers.
func (c *cands) least(w *walkMin, q int) (j int, hi int64) {
	j, v := -1, 0.0
	if g := c.goneAt(w.rate); g != nil {
		j, hi, v = g.j, g.hi, g.v
	}
	if q > c.hiBase {
		if k := w.min(c.hiBase, q-1); j < 0 || w.v[k-w.base] < v {
			j, hi = k, c.hiAt(k)
		}
	}
	return j, hi
}

// goneAt is c.gone's candidate at rate (nil: none dropped yet).
func (c *cands) goneAt(rate float64) *walkLeast {
	for i := range c.gone {
		if c.gone[i].rate == rate {
			return &c.gone[i]
		}
	}
	return nil
}

// hiAt is the candidate of absolute index j in hi order.
func (c *cands) hiAt(j int) int64 { return c.hi[j-c.hiBase] }

// walk returns the walkMin of c's hi at rate (tokens per ns), or nil when c
// is not indexed.
func (c *cands) walk(rate float64) *walkMin {
	if !c.indexed {
		return nil
	}
	for i := range c.nwalks {
		if w := &c.walks[i]; w.rate == rate {
			if c.stream && len(w.v) < c.final {
				w.extend(c.hi[:c.final])
			}
			return w
		}
	}
	if c.nwalks == len(c.walks) {
		c.walks = append(c.walks, walkMin{})
	}
	w := &c.walks[c.nwalks]
	c.nwalks++
	if c.stream {
		w.build(c.hi[:0], c.hiBase, rate)
		w.extend(c.hi[:c.final])
		return w
	}
	w.build(c.hi, c.hiBase, rate)
	return w
}

// walkBlock is the block size of walkMin.
const walkBlock = 64

// walkMin answers, in O(1) after O(n) work, which j in a range minimises
// j − rate·hi[j]: room's backward walk over a bucket's candidates looks for
// the least K + rate·(r.lo − hi[j]) − (P − j), which is that plus a term of
// the refusal alone. Within blocks of walkBlock it keeps the arg min of
// every prefix and suffix, across blocks a sparse table of block arg mins.
type walkMin struct {
	rate     float64
	base     int       // the absolute index of v[0]
	v        []float64 // j − rate·hi[j]
	pre, suf []int32   // arg min of v over j's block up to j, from j
	sparse   [][]int32 // sparse[k][b]: arg min over blocks b … b+2^k−1
}

func (w *walkMin) build(hi []int64, base int, rate float64) {
	n := len(hi)
	w.rate, w.base = rate, base
	w.v = slices.Grow(w.v[:0], n)[:n]
	w.pre = slices.Grow(w.pre[:0], n)[:n]
	w.suf = slices.Grow(w.suf[:0], n)[:n]
	for j, h := range hi {
		w.v[j] = walkV(base+j, h, rate)
	}
	nb := (n + walkBlock - 1) / walkBlock
	if len(w.sparse) == 0 {
		w.sparse = append(w.sparse, nil)
	}
	w.sparse[0] = slices.Grow(w.sparse[0][:0], nb)[:nb]
	for b := range nb {
		s, e := b*walkBlock, min(n, (b+1)*walkBlock)
		w.pre[s] = int32(s)
		for j := s + 1; j < e; j++ {
			w.pre[j] = w.argMin(w.pre[j-1], int32(j))
		}
		w.suf[e-1] = int32(e - 1)
		for j := e - 2; j >= s; j-- {
			w.suf[j] = w.argMin(int32(j), w.suf[j+1])
		}
		w.sparse[0][b] = w.pre[e-1]
	}
	k := 1
	for ; 1<<k <= nb; k++ {
		if len(w.sparse) == k {
			w.sparse = append(w.sparse, nil)
		}
		m := nb - 1<<k + 1
		prev := w.sparse[k-1]
		cur := slices.Grow(w.sparse[k][:0], m)[:m]
		for b := range m {
			cur[b] = w.argMin(prev[b], prev[b+1<<(k-1)])
		}
		w.sparse[k] = cur
	}
	w.sparse = w.sparse[:k]
}

// extend appends hi[len(w.v):] to a walk built on a prefix of hi (the
// streaming check's candidates, once no earlier one can come): each block
// they complete gets its suffix minima and its sparse rows. A query reads
// only complete blocks but its right end's, and of that one the prefix
// minima, so it gets build's answer over the whole hi.
func (w *walkMin) extend(hi []int64) {
	for j := len(w.v); j < len(hi); j++ {
		w.v = append(w.v, walkV(w.base+j, hi[j], w.rate))
		if j%walkBlock == 0 {
			w.pre = append(w.pre, int32(j))
		} else {
			w.pre = append(w.pre, w.argMin(w.pre[j-1], int32(j)))
		}
		w.suf = append(w.suf, int32(j))
		if (j+1)%walkBlock != 0 {
			continue
		}
		for i := j - 1; i > j-walkBlock; i-- {
			w.suf[i] = w.argMin(int32(i), w.suf[i+1])
		}
		b := j / walkBlock
		w.sparse[0] = append(w.sparse[0], w.pre[j])
		for k := 1; 1<<k <= b+1; k++ {
			if len(w.sparse) == k {
				w.sparse = append(w.sparse, nil)
			}
			bb := b - 1<<k + 1
			w.sparse[k] = append(w.sparse[k], w.argMin(w.sparse[k-1][bb], w.sparse[k-1][bb+1<<(k-1)]))
		}
	}
}

// argMin is the one of i, j with the smaller v, i on a tie.
func (w *walkMin) argMin(i, j int32) int32 {
	if w.v[j] < w.v[i] {
		return j
	}
	return i
}

// min returns an arg min of v over the absolute indices [l, r] (l ≤ r).
func (w *walkMin) min(l, r int) int {
	l, r = l-w.base, r-w.base
	bl, br := l/walkBlock, r/walkBlock
	if bl == br {
		m := int32(l)
		for j := l + 1; j <= r; j++ {
			m = w.argMin(m, int32(j))
		}
		return int(m) + w.base
	}
	// Left to right, so that of equals the leftmost wins (the streaming
	// check's dropped candidates, left of every block, rely on it).
	m := w.suf[l]
	if bl+1 < br {
		k := bits.Len(uint(br-bl-1)) - 1
		m = w.argMin(m, w.argMin(w.sparse[k][bl+1], w.sparse[k][br-1<<k]))
	}
	return int(w.argMin(m, w.pre[r])) + w.base
}

// upTo returns #{candidates with lo ≤ t}.
func (c *cands) loUpTo(t int64) int {
	c.nearLo = gallop(c.lo, c.nearLo, t+1, i64)
	return c.loBase + c.nearLo
}

func i64(x int64) int64 { return x }

// add appends r's interval (hi unsorted until the caller sorts).
func (c *cands) add(r rec) {
	for range r.tokens() { // a weighted request is that many candidates
		c.lo = append(c.lo, r.lo)
		c.hi = append(c.hi, r.hi)
	}
}

// addInst adds r to its instance's candidates in m (nil: none kept).
func addInst(m map[int16]*cands, r rec) {
	if m == nil {
		return
	}
	pc := m[r.inst]
	if pc == nil {
		pc = &cands{indexed: true}
		m[r.inst] = pc
	}
	pc.add(r)
}

// hiBelow returns #{candidates with hi < t}.
func (c *cands) hiBelow(t int64) int {
	c.nearHi = gallop(c.hi, c.nearHi, t, i64)
	return c.hiBase + c.nearHi
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
	var u underCands
	src := memAttr{ix}
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
		u.reset(ix, g.tier)
		c, all := &u.c, &u.all
		for li := range g.tier.Limits {
			if l := &g.tier.Limits[li]; l.AnchoredAtFirst() && !l.PerInstance() && c.anch == nil {
				c.anch, c.anchAt = anchorsOf(g.recs, l), l
				all.anch, all.anchAt = c.anch, l
			}
		}
		c.grow(len(g.recs))
		if u.countsAll {
			all.grow(len(g.recs))
		}
		for _, r := range g.recs {
			u.add(ix, r)
		}
		slices.Sort(c.hi)
		slices.Sort(all.hi)
		for _, m := range []map[int16]*cands{u.perInst, u.allInst} {
			for _, pc := range m {
				slices.Sort(pc.hi)
			}
		}
		var a underAttr
		first := len(res.wrong) // this key's wrong refusals are res.wrong[first:]
		for _, r := range g.recs {
			if !underJudged(r) {
				continue
			}
			res.judged++
			w, v := ix.judgeRefusal(g.tier, &u, r)
			switch v {
			case refusalUndecided:
				res.undecided++
				continue
			case refusalFine:
				continue
			}
			w.g = g
			if v == refusalWrong && !ix.attribute(src, int32(gi), g.tier, &w, &a) {
				res.unattributed++
			}
			res.wrong = append(res.wrong, w)
		}
		// A shared quota explains every refusal of a key that its own
		// charged refusals explain; one it cannot explain means the key's
		// refusals cost, and so do the ambiguous ones (a key in debt beside
		// a quiet neighbour whose admissions happen to fill the gap).
		if a.ambiguous && a.selfOnly {
			for i := first; i < len(res.wrong); i++ {
				a.settle(&res.wrong[i])
			}
		}
	}
}

// underJudged reports whether under-admission judges r: a refusal by the
// limit itself, not a variant, outside fault windows.
func underJudged(r rec) bool {
	return r.out == history.Rejected && !r.variant && r.limit && !r.fault
}

// underCands is what under-admission judges a key's refusals by: its
// possibly consuming requests (c), every request for limits that count
// refusals too (all), both per instance for limits declared per instance,
// and the answers the policy declares refunded. Run holds a key's whole
// run in it; the streaming check holds the requests that can still matter
// (underStream).
type underCands struct {
	c, all cands
	// perInst, allInst: c and all per instance (nil: no limit per instance).
	perInst, allInst map[int16]*cands
	countsAll        bool
	// rates are the tier's bucket rates (tokens per ns): the walks room
	// asks for (the streaming check's dropped candidates keep theirs).
	rates []float64
	// refunded: answers after which the service gave the tokens back
	// (policy refund_on); each holds its tokens only while decided.
	refunded []rec
}

// reset empties u for a key of tier t, keeping its buffers.
func (u *underCands) reset(ix *index, t *policy.Tier) {
	u.c.reset()
	u.all.reset()
	u.c.indexed, u.all.indexed = true, true
	u.c.anch, u.c.anchAt, u.all.anch, u.all.anchAt = nil, nil, nil, nil
	u.perInst, u.allInst, u.countsAll = nil, nil, false
	u.refunded = u.refunded[:0]
	u.rates = u.rates[:0]
	for _, l := range t.Limits {
		if l.PerInstance() {
			u.perInst, u.allInst = map[int16]*cands{}, map[int16]*cands{}
		}
		u.countsAll = u.countsAll || l.CountsRejected()
		if l.Algorithm == policy.TokenBucket || l.Algorithm == policy.GCRA {
			u.rates = append(u.rates, l.R()/1e9)
		}
	}
}

// add takes r, the key's next request by lo, among the candidates (their
// hi unsorted: the caller sorts or inserts).
func (u *underCands) add(ix *index, r rec) {
	if r.out == history.Unknown && len(ix.p.RefundOn) > 0 && ix.p.RefundOn.Has(int(r.status)) {
		u.refunded = append(u.refunded, r)
	} else if r.out != history.Rejected {
		u.c.add(r)
		addInst(u.perInst, r)
	}
	if u.countsAll {
		u.all.add(r)
		addInst(u.allInst, r)
	}
}

// What judgeRefusal found of one refusal.
const (
	refusalFine      = iota // some limit provably had no room
	refusalUndecided        // wrong as far as the scan went, cut short
	refusalWrong            // provably wrong
	refusalPeek             // a refused cost-0 peek: wrong by the policy
)

// judgeRefusal is under-admission's decision on refusal r of a key of
// tier t whose candidates are u (every one that could have been decided
// by r.hi among them): whether every limit provably had room, and if so
// how much (w, without its key). Run and the streaming check both ask it.
func (ix *index) judgeRefusal(t *policy.Tier, u *underCands, r rec) (wrongRej, int) {
	// A refusal up to the timing tolerance later than the exact
	// arithmetic is a conservative guard, not a defect: judge it as
	// if decided tol earlier.
	rt := ix.tolerant(r)
	if r.tokens() == 0 && ix.p.Cost.Peeks() {
		// A cost-0 peek consumes nothing: the policy says it is
		// never refused, whatever the bucket holds.
		return wrongRej{r: r, why: []string{"a cost-0 request (a peek) consumes nothing and is never to be refused"},
			margin: time.Duration(ix.tol)}, refusalPeek
	}
	undecided := false
	room := math.Inf(1)
	var why []string
	for li := range t.Limits {
		l := &t.Limits[li]
		// Among every request, the rejection itself is a candidate:
		// one more unit of room makes up for counting it.
		cc, inst, self := &u.c, u.perInst, 0.0
		if l.CountsRejected() {
			cc, inst, self = &u.all, u.allInst, float64(r.tokens())
		}
		if l.PerInstance() {
			if cc = inst[r.inst]; cc == nil {
				cc = &cands{}
			}
		}
		// A refunded request decided while r may have been held
		// its tokens then: one less unit of room for each.
		v, ok, dec := ix.room(cc, rt, l, self-heldBy(u.refunded, rt))
		if !dec {
			undecided = true
		}
		if !ok {
			return wrongRej{}, refusalFine
		}
		room = math.Min(room, v)
		why = append(why, roomText(l, v))
	}
	if undecided {
		return wrongRej{}, refusalUndecided
	}
	w := wrongRej{r: r, why: why, room: room}
	rate := t.Limits[0].R()
	w.margin = time.Duration(ix.tol) + time.Duration((room-float64(max(r.tokens(), 1)))/rate*float64(time.Second))
	return w, refusalWrong
}

// underAttr is a key's attribution so far: how many of its wrong refusals
// were weighed (at most maxAttributed), and whether some fit both a shared
// quota and charged refusals (ambiguous) or charged refusals alone.
type underAttr struct {
	attributed          int
	ambiguous, selfOnly bool
}

// attribute weighs the cause of wrong refusal w of key gid (tier t), the
// key's first maxAttributed only: false when past them. src gives the
// requests around it.
func (ix *index) attribute(src attrSource, gid int32, t *policy.Tier, w *wrongRej, a *underAttr) bool {
	if a.attributed >= maxAttributed {
		return false
	}
	a.attributed++
	rt := ix.tolerant(w.r)
	own := src.own(gid)
	w.self = ix.explainsRefusal(own, t, rt, nil, true)
	if !w.self {
		w.sharedWith = ix.sharingKeys(src, gid, t, rt)
	} else if w.sharedWith = ix.sharingUnrefuted(src, gid, t, rt); len(w.sharedWith) > 0 {
		w.self, w.ambiguous, a.ambiguous = false, true, true // both fit: see sharingUnrefuted
	} else {
		a.selfOnly = true
	}
	return true
}

// settle is the key's end for w, once both an ambiguous refusal and one
// only charged refusals explain were found: a refusal sharing was found
// for that charged refusals explain too (the ambiguous ones: attribute
// found it so) is the key's own.
func (a *underAttr) settle(w *wrongRej) {
	if a.ambiguous && a.selfOnly && w.ambiguous {
		w.self, w.sharedWith = true, nil
	}
}

// heldBy counts the tokens of refunded requests that may have been held
// while r was decided (their intervals overlap r's).
func heldBy(refunded []rec, r rec) float64 {
	n := 0
	for _, x := range refunded {
		if x.lo <= r.hi && x.hi >= r.lo {
			n += x.tokens()
		}
	}
	return float64(n)
}

// tolerant is refusal r judged as if decided the timing tolerance earlier.
func (ix *index) tolerant(r rec) rec {
	r.lo -= ix.tol
	return r
}

func roomText(l *policy.Limit, v float64) string {
	if l.Algorithm.Bucketed() {
		return fmt.Sprintf("%s held at least %s tokens", l.Name, fmtF(v))
	}
	return fmt.Sprintf("%s had at least %s free slots", l.Name, fmtF(v))
}

// room returns a lower bound on the room limit l had for rejection r at every
// possible decision time; ok when that is provably enough for r's cost (one
// token for an unweighted request);
// decided is false when the scan was cut short without an answer. self is
// added to the limit's size (1 when the candidates include r itself).
func (ix *index) room(c *cands, r rec, l *policy.Limit, self float64) (v float64, ok, decided bool) {
	P := c.loUpTo(r.hi) // candidates that could have been decided by r.hi
	N := float64(l.Count) + self
	// need is the room r asked for: its cost (at least one; a refused
	// peek is judged before room is asked).
	need := float64(max(r.tokens(), 1))
	switch l.Algorithm {
	case policy.TokenBucket, policy.GCRA:
		K, rate := l.K()+self, l.R()/1e9
		q := c.hiBelow(r.lo)
		cnt := P - q // could have been decided inside [r.lo, r.hi]
		lb := K - float64(cnt)
		// One token is room for one request (a full bucket of K = 1
		// must admit); eps only absorbs float error in the refill terms.
		if lb < need-eps {
			return lb, false, true
		}
		// Walk back over candidates surely decided before r.lo, latest first:
		// from a = their hi, the bucket gained r·(r.lo−a) and lost at most
		// everything that could have been decided in [a, r.hi]. The walk
		// only needs its least value, which a walkMin finds at once over
		// every earlier candidate.
		if w := c.walk(rate); w != nil && q > walkBlock {
			j, h := c.least(w, q)
			lb = math.Min(lb, K+rate*float64(r.lo-h)-float64(P-j))
			return lb, lb >= need-eps, true
		}
		steps := 0
		for j := q - 1; j >= 0; j-- {
			cnt++
			val := K + rate*float64(r.lo-c.hiAt(j)) - float64(cnt)
			if val < lb {
				lb = val
				if lb < need-eps {
					return lb, false, true
				}
			}
			if steps++; steps >= maxScan {
				// For every earlier a the loss is at most P.
				rest := K + rate*float64(r.lo-c.hiAt(j)) - float64(P)
				if rest < need-eps {
					return lb, false, false
				}
				return math.Min(lb, rest), true, true
			}
		}
		return lb, true, true
	case policy.SlidingLog, policy.FixedWindow:
		if l.Algorithm == policy.FixedWindow && !l.AnchoredAtFirst() {
			return ix.windowRoom(c, r, l, N, need)
		}
		// A sliding log, and a fixed window opened by the key's own first
		// request: the window holding r's decision opened less than W
		// before it, so only requests decided in (r.lo − W, r.hi] count —
		// and, first-anchored, none decided before that window opened.
		from := r.lo - int64(l.W()) + 1
		if c.anch != nil && c.anchAt == l {
			from = max(from, c.anch.openedFrom(r.lo, int64(l.W())))
		}
		n := P - c.hiBelow(from)
		v = N - float64(n)
		return v, v >= need, true
	case policy.SlidingCounter:
		if l.Anchor == policy.AnchorFirst {
			// Periods that start at the key's own requests (HAProxy): the
			// current period and the one before it lie within 2W before the
			// decision, whatever their alignment.
			v = N - float64(P-c.hiBelow(r.lo-2*int64(l.W())+1))
			return v, v >= need, true
		}
		return ix.windowRoom(c, r, l, N, need)
	}
	return 0, false, true
}

// windowRoom is room for epoch-aligned windows (fixed, and the sliding
// counter's pair of windows) of size n.
func (ix *index) windowRoom(c *cands, r rec, l *policy.Limit, n, need float64) (v float64, ok, decided bool) {
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
	return v, v >= need, true
}

// selfInflictedNote ends a wrongful refusal's message when the key's own
// refusals, had they consumed, explain it.
const selfInflictedNote = "; the key's own refused requests, had they consumed, explain the refusal: refusals cost tokens"

// checkUnder reads computeUnder: per key of n events, its candidates
// sorted by hi (O(n log n)), then per refusal O(1) for a bucket's backward
// walk (walkMin, built in O(n) per rate) plus galloping searches from the
// previous refusal's answers, and for windows O(windows touched); the
// refusals it attributes (at most maxAttributed per key) rebuild their
// attribution window. O(N log N) over N events.
func checkUnder(ix *index) Result {
	res := ix.under()
	col := ix.collector()
	for _, w := range res.wrong {
		col.add(underEvidence(ix.rejEvidence(w, ""), w.self))
	}
	exemptN, exemptRefused := ix.exemptRefusals(col)
	return underVerdict(col, res.judged, res.undecided, exemptN, exemptRefused, selfInflictedKeys(res))
}

// underEvidence is under-admission's evidence of a wrong refusal: ev, and
// the cause when the key's own refusals explain it (self).
func underEvidence(ev Evidence, self bool) Evidence {
	if self {
		ev.Message += selfInflictedNote
		ev.Cause = CauseSelfInflicted
	}
	return ev
}

// underVerdict is under-admission's result from its evidence (col), the
// refusals judged and left undecided, the requests of exempt keys judged
// and refused, and the keys (sorted, at most 50) whose own refusals
// explain some wrong refusal.
func underVerdict(col *collector, judged, undecided, exemptN, exemptRefused int, selfKeys []string) Result {
	figs := map[string]float64{"rejections_judged": float64(judged), "undecided": float64(undecided)}
	if exemptN > 0 {
		figs["exempt_requests"], figs["exempt_refused"] = float64(exemptN), float64(exemptRefused)
	}
	if judged == 0 && exemptN == 0 {
		return col.result(Skip, "no 429 rejections outside fault windows to judge", figs, "")
	}
	sum := fmt.Sprintf("none of %s could be shown wrong", plural(judged, "429", "429s"))
	if exemptN > 0 {
		sum += fmt.Sprintf("; %s of exempt keys, none refused", plural(exemptN, "request", "requests"))
	}
	r := col.result(Pass, sum, figs,
		fmt.Sprintf("%s rejected while the key provably had room", plural(col.total, "request was", "requests were")))
	// Every key found paying for its refusals, beyond the evidence cap, so
	// each of its symptoms (advice it could never honour while it kept
	// sending, remaining counts and resets of a bucket in debt) is traced
	// to this defect whichever key the capped evidence shows.
	if len(selfKeys) > 0 && r.Verdict == Fail {
		r.Evidence = append(r.Evidence, Evidence{Key: selfKeys[0], Keys: selfKeys, Cause: CauseSelfInflicted,
			Message: fmt.Sprintf("keys whose own refused requests cost tokens: %s", strings.Join(selfKeys, ", "))})
	}
	return r
}

// exemptRefusals adds, for each key of an exempt class, the evidence of
// its refusals outside fault windows (every one is wrong: the class is
// never limited) and returns how many requests of exempt keys were judged
// and how many of them refused. O(N).
func (ix *index) exemptRefusals(col *collector) (n, refused int) {
	for gi := range ix.groups {
		g := &ix.groups[gi]
		if g.exempt == nil {
			continue
		}
		var x exemptTally
		for _, r := range g.recs {
			x.add(r, ix.ev(r).ID)
		}
		n += x.n
		if x.refused > 0 {
			refused += x.refused
			col.add(x.evidence(g.key, g.exempt))
		}
	}
	return n, refused
}

// exemptTally is what under-admission keeps of an exempt key's requests.
type exemptTally struct {
	n, refused int
	// ids: of the first MaxIDs+1 refusals; first, last: the first and last
	// refusal (first's id in ids[0]).
	ids         []uint64
	first, last rec
}

// add counts r (request id) of the key, in the key's order.
func (x *exemptTally) add(r rec, id uint64) {
	if r.variant || r.fault || r.out == history.Unknown {
		return
	}
	x.n++
	if r.out != history.Rejected {
		return
	}
	if x.refused == 0 {
		x.first = r
	}
	x.refused++
	x.last = r
	if len(x.ids) <= MaxIDs {
		x.ids = append(x.ids, id)
	}
}

// evidence is the key's evidence (refused > 0).
func (x *exemptTally) evidence(key string, ex *policy.Exempt) Evidence {
	got, _ := ids(x.ids)
	return Evidence{Key: key, Limit: "exempt", From: x.first.lo, To: x.last.hi, Bound: 0, Observed: float64(x.refused),
		RequestIDs: got, TotalIDs: x.refused,
		Message: fmt.Sprintf("key %s is of the exempt class %s (never limited), yet %d of its requests were refused (first: request %d, status %d)",
			key, ex.Name, x.refused, x.ids[0], x.first.status)}
}

// selfInflictedKeys lists (up to 50, sorted) the keys with a wrong refusal
// their own refused requests explain.
func selfInflictedKeys(res *underResult) []string {
	seen := map[string]bool{}
	var keys []string
	for _, w := range res.wrong {
		if w.self && !seen[w.g.key] {
			seen[w.g.key] = true
			keys = append(keys, w.g.key)
		}
	}
	sort.Strings(keys)
	if len(keys) > 50 {
		keys = keys[:50]
	}
	return keys
}

func (ix *index) rejEvidence(w wrongRej, extra string) Evidence {
	return ix.refusalEvidence(w.g.key, w.g.tier, ix.ev(w.r).ID, w, extra)
}

// refusalEvidence is the evidence of wrong refusal w (request id) of key
// of tier t.
func (ix *index) refusalEvidence(key string, t *policy.Tier, id uint64, w wrongRej, extra string) Evidence {
	msg := fmt.Sprintf("request %d of key %s got %d although at every possible decision time %s (wrong by at least %s, beyond the timing tolerance %s)",
		id, key, w.r.status, strings.Join(w.why, " and "), fmtDur(w.margin), fmtDur(time.Duration(ix.tol)))
	if extra != "" {
		msg += "; " + extra
	}
	return Evidence{Key: key, Limit: limitNames(t), From: w.r.lo, To: w.r.hi, Bound: 1, Observed: w.room,
		RequestIDs: []uint64{id}, TotalIDs: 1, Message: msg}
}

func limitNames(t *policy.Tier) string {
	s := make([]string, len(t.Limits))
	for i, l := range t.Limits {
		s[i] = l.Name
	}
	return strings.Join(s, ",")
}

const docIsolation = "Keys never share quota: fails when a refusal was provably wrong counting only the key's own traffic, is not explained by the key's own refused requests consuming too (that is self-inflicted: under-admission), and is explained once other keys' admissions in that interval are counted as if they shared the key's quota (the message names them); or when a key was served another tier's limit (X-RateLimit-Limit, or the limit of the declared RateLimit generation: RateLimit-Policy q, limit=, RateLimit-Limit)."

// checkIsolation reads computeUnder's wrong refusals (see checkUnder) and
// the tiers the headers reported (O(N)); each attributed refusal weighs the
// other keys' admissions in its attribution window, O(w log w) for w
// requests in it.
func checkIsolation(ix *index) Result {
	iso := newIsolationTally()
	for gi := range ix.groups {
		g := &ix.groups[gi]
		if g.tier == nil {
			continue
		}
		n := 0
		for _, r := range g.recs {
			if r.out == history.Admitted && !r.variant {
				n++
			}
		}
		iso.addKey(g.tier, n)
	}
	// Wrong rejections attributable to other keys.
	col := ix.collector()
	res := ix.under()
	for _, w := range res.wrong {
		if iso.addWrong(w.g.key, w) {
			col.add(sharedEvidence(ix.rejEvidence(w, sharedExtra(w)), w))
		}
	}
	// Limits of another tier served to a key.
	mismatch := 0
	oc := ix.newObsCache()
	for i := range ix.hdrs {
		if len(ix.p.Tiers) < 2 {
			break
		}
		e := &ix.h.Events[i]
		if ev, ok := ix.tierMismatch(e, ix.mkRec(e, i), &ix.hdrs[i], ix.groups[ix.gid[i]].tier, oc); ok {
			mismatch++
			col.add(ev)
		}
	}
	return iso.result(col, len(ix.groups), mismatch, res.unattributed)
}

// isolationTally is what isolation gathers besides its evidence, on
// either path: the tiers, their keys and admissions, the refusals the
// keys' own refusals explain and the keys found sharing a quota.
type isolationTally struct {
	figs          map[string]float64
	tiers         map[string]bool
	selfInflicted int
	sharing       map[string]bool
}

func newIsolationTally() *isolationTally {
	return &isolationTally{figs: map[string]float64{}, tiers: map[string]bool{}, sharing: map[string]bool{}}
}

// addKey counts a key of tier t that admitted n requests (not variants).
func (iso *isolationTally) addKey(t *policy.Tier, n int) {
	iso.tiers[t.Name] = true
	iso.figs["admitted_"+t.Name] += float64(n)
	iso.figs["keys_"+t.Name]++
}

// addWrong counts under-admission's wrong refusal w of key, and reports
// whether it is isolation's evidence (a shared quota explains it).
func (iso *isolationTally) addWrong(key string, w wrongRej) bool {
	switch {
	case w.self:
		iso.selfInflicted++
	case len(w.sharedWith) > 0:
		iso.sharing[key] = true
		for _, k := range w.sharedWith {
			iso.sharing[k] = true
		}
		return true
	}
	return false
}

// sharedExtra is what isolation adds to the evidence of refusal w.
func sharedExtra(w wrongRej) string {
	return "counting the admissions of " + strings.Join(w.sharedWith, ", ") + " as if they came out of this key's quota explains the refusal: the keys share a quota"
}

// sharedEvidence is isolation's evidence of refusal w (ev: its refusal
// evidence with sharedExtra).
func sharedEvidence(ev Evidence, w wrongRej) Evidence {
	ev.Cause, ev.Keys = CauseSharedQuota, w.sharedWith
	return ev
}

// tierMismatch is the evidence of a response of a key of tier t (nil: none)
// that declared the quota of another tier (h: its parsed headers, r its
// record).
func (ix *index) tierMismatch(e *history.Event, r rec, h *hdr, t *policy.Tier, oc *obsCache) (Evidence, bool) {
	if t == nil || h.ev&(evVariant|evFallback) != 0 {
		return Evidence{}, false
	}
	var v int64
	var ok bool
	switch xl := h.state(sXLimit); {
	case xl == hInt:
		v, ok = int64(h.xlim), true
	case xl == hAbsent && h.state(sRL) != hOther && h.state(sPol) != hOther:
		v, ok = int64(h.rlLim), h.hasLim()
	default:
		v, ok = observedLimit(e, oc)
	}
	if !ok || tierHasCount(t, v) {
		return Evidence{}, false
	}
	for ti := range ix.p.Tiers {
		if o := &ix.p.Tiers[ti]; o != t && tierHasCount(o, v) {
			return Evidence{Key: e.Key, Limit: limitNames(t), From: r.lo, To: r.hi, Bound: float64(t.Limits[0].Count), Observed: float64(v),
				RequestIDs: []uint64{e.ID}, TotalIDs: 1,
				Message: fmt.Sprintf("key %s (tier %s, N=%d) was served limit %d, tier %s's quota", e.Key, t.Name, t.Limits[0].Count, v, o.Name)}, true
		}
	}
	return Evidence{}, false
}

// result is isolation's result from its evidence (col), the run's keys,
// the responses of another tier's quota and the refusals not attributed.
func (iso *isolationTally) result(col *collector, keys, mismatch, unattributed int) Result {
	figs := iso.figs
	if iso.selfInflicted > 0 {
		figs["self_inflicted_refusals"] = float64(iso.selfInflicted)
	}
	if unattributed > 0 {
		figs["refusals_not_attributed"] = float64(unattributed)
	}
	figs["tier_mismatches"] = float64(mismatch)
	if keys < 2 && mismatch == 0 {
		return col.result(Skip, "only one key in this run", figs, "")
	}
	names := make([]string, 0, len(iso.tiers))
	for t := range iso.tiers {
		names = append(names, t)
	}
	sort.Strings(names)
	// Every key found sharing a quota, beyond the evidence cap, so each of
	// their symptoms is traced to this defect.
	if len(iso.sharing) > 0 && col.total > 0 {
		keys := make([]string, 0, len(iso.sharing))
		for k := range iso.sharing {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if len(keys) > 50 {
			keys = keys[:50]
		}
		r := col.result(Pass, "", figs, fmt.Sprintf("%s of shared or wrong-tier quota", plural(col.total, "instance", "instances")))
		r.Evidence = append(r.Evidence, Evidence{Key: keys[0], Keys: keys, Cause: CauseSharedQuota,
			Message: fmt.Sprintf("keys found sharing a quota: %s", strings.Join(keys, ", "))})
		return r
	}
	return col.result(Pass, fmt.Sprintf("%s over tiers %s kept separate quotas", plural(keys, "key", "keys"), strings.Join(names, ", ")), figs,
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

// maxAttributed bounds the refusals per key whose cause isolation weighs
// (each costs a pass over one refill horizon of requests); past it the
// remaining ones are counted as not attributed.
const maxAttributed = 32

// attributionWindow is the span before a refusal whose requests decide its
// cause: two refill horizons and the longest request.
func (ix *index) attributionWindow(t *policy.Tier, r rec) int64 {
	var horizon int64
	for _, l := range t.Limits {
		horizon = max(horizon, int64(l.W()))
	}
	return r.lo - 2*horizon - ix.maxLat
}

// windowRecs returns the recs of rs (sorted by lo) with lo in [from, to].
func windowRecs(rs []rec, from, to int64) []rec {
	i, _ := slices.BinarySearchFunc(rs, from, func(x rec, t int64) int { return cmpI64(x.lo, t) })
	j := i
	for j < len(rs) && rs[j].lo <= to {
		j++
	}
	return rs[i:j]
}

// attrSource gives attribution the requests around a refusal: Run's index
// (memAttr) or the streaming check's recent requests (underStream). Keys
// are named by an id of the source; rs are sorted by cmpRec.
type attrSource interface {
	// own is key gid's requests sorted by lo, those of every attribution
	// window still to be weighed among them.
	own(gid int32) []rec
	// othersAdmitted returns the admissions (not variants) of keys other
	// than gid with lo in [from, to], and how many each key admitted.
	othersAdmitted(gid int32, from, to int64) ([]rec, map[int32]int)
	// admittedOf returns key gid's admissions (not variants, outside
	// fault windows) with lo in [from, to].
	admittedOf(gid int32, from, to int64) []rec
	keyName(gid int32) string
}

// memAttr is Run's attrSource: the groups of the index.
type memAttr struct{ ix *index }

func (m memAttr) own(gid int32) []rec      { return m.ix.groups[gid].recs }
func (m memAttr) keyName(gid int32) string { return m.ix.groups[gid].key }
func (m memAttr) admittedOf(gid int32, from, to int64) []rec {
	var out []rec
	for _, x := range windowRecs(m.ix.groups[gid].recs, from, to) {
		if x.out == history.Admitted && !x.variant && !x.fault {
			out = append(out, x)
		}
	}
	return out
}

func (m memAttr) othersAdmitted(gid int32, from, to int64) ([]rec, map[int32]int) {
	ix := m.ix
	var extra []rec
	seen := map[int32]int{}
	for _, x := range windowRecs(ix.admittedByStart(), from, to) {
		if og := ix.gid[x.idx]; og != gid {
			extra = append(extra, x)
			seen[og]++
		}
	}
	return extra, seen
}

// explainsRefusal reports whether refusal r of a key of tier t, whose
// requests are own (sorted by lo), had no room under some limit of its
// tier if, besides the key's admitted and unknown requests of the
// attribution window, extra (other keys' admissions) and, with
// withRefused, the key's own refused requests (but r) had consumed.
func (ix *index) explainsRefusal(own []rec, t *policy.Tier, r rec, extra []rec, withRefused bool) bool {
	c := &ix.attrCands // attribution runs on one goroutine
	c.lo, c.hi = c.lo[:0], c.hi[:0]
	for _, x := range windowRecs(own, ix.attributionWindow(t, r), r.hi) {
		if x.variant && x.out == history.Rejected {
			continue
		}
		if x.out != history.Rejected || (withRefused && x.idx != r.idx) {
			c.add(x)
		}
	}
	for _, x := range extra {
		c.add(x)
	}
	slices.Sort(c.lo)
	slices.Sort(c.hi)
	for li := range t.Limits {
		if _, ok, _ := ix.room(c, r, &t.Limits[li], 0); !ok {
			return true
		}
	}
	return false
}

// admittedByStart is every key's admitted requests sorted by lo, built once.
func (ix *index) admittedByStart() []rec {
	ix.admOnce.Do(func() {
		for _, r := range ix.recs {
			if r.out == history.Admitted && !r.variant {
				ix.admByLo = append(ix.admByLo, r)
			}
		}
		slices.SortFunc(ix.admByLo, cmpRec)
	})
	return ix.admByLo
}

// sharingKeys lists (up to 5) other keys whose admissions in the
// attribution window explain refusal r of key gid, had they shared its
// quota.
func (ix *index) sharingKeys(src attrSource, gid int32, t *policy.Tier, r rec) []string {
	extra, seen := src.othersAdmitted(gid, ix.attributionWindow(t, r), r.hi)
	if len(extra) == 0 || !ix.explainsRefusal(src.own(gid), t, r, extra, false) {
		return nil
	}
	return keysOf(src, seen)
}

// keysOf names (up to 5, sorted) the keys of seen.
func keysOf(src attrSource, seen map[int32]int) []string {
	keys := make([]string, 0, len(seen))
	for og := range seen {
		keys = append(keys, src.keyName(og))
	}
	sort.Strings(keys)
	if len(keys) > 5 {
		keys = keys[:5]
	}
	return keys
}

// maxSharingPartners bounds the other keys sharingUnrefuted weighs (those
// that admitted most in the window).
const maxSharingPartners = 8

// sharingUnrefuted is sharingKeys for a refusal the key's own charged
// refusals explain as well: both hypotheses fit, and the admissions decide.
// Keys that share one quota admit together no more than it allows, so a
// key whose admissions, taken with g's, overrun one quota in the window
// does not share it; the refusal is a shared quota's when the remaining
// keys' admissions (consumption that happened, where charged refusals are
// only a hypothesis) explain it. The rule depends on the history alone,
// not on which hypothesis is tried first, so a run that fits both gets
// the same attribution whatever its timing.
func (ix *index) sharingUnrefuted(src attrSource, gid int32, t *policy.Tier, r rec) []string {
	from := ix.attributionWindow(t, r)
	_, seen := src.othersAdmitted(gid, from, r.hi)
	partners := make([]int32, 0, len(seen))
	for og := range seen {
		partners = append(partners, og)
	}
	// Most admissions first, then by key name.
	slices.SortFunc(partners, func(a, b int32) int {
		if seen[a] != seen[b] {
			return seen[b] - seen[a]
		}
		return strings.Compare(src.keyName(a), src.keyName(b))
	})
	if len(partners) > maxSharingPartners {
		partners = partners[:maxSharingPartners]
	}
	sc := &ix.attrScratch
	own := src.admittedOf(gid, from, r.hi)
	var extra []rec
	kept := map[int32]int{}
	for _, og := range partners {
		theirs := src.admittedOf(og, from, r.hi)
		union := append(append(sc.recs[:0], own...), theirs...)
		slices.SortFunc(union, cmpRec)
		sc.recs = union
		refuted := false
		for li := range t.Limits {
			if st := ix.judgeLimit(union, &t.Limits[li], sc); len(st.certs) > 0 {
				refuted = true
				break
			}
		}
		if !refuted {
			extra = append(extra, theirs...)
			kept[og] = seen[og]
		}
	}
	if len(extra) == 0 || !ix.explainsRefusal(src.own(gid), t, r, extra, false) {
		return nil
	}
	return keysOf(src, kept)
}
