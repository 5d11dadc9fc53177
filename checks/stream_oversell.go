package checks

import (
	"cmp"
	"math"
	"slices"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// oversellStream is checkOversell as a stream, in two passes over the
// events.
//
// Pass 1 (Add) splits each key's admissions the envelope judges (admitted,
// outside fault windows, not a variant) into segments, cut where every
// limit of the key's tier judges what comes before and what comes after
// apart:
//   - a token bucket or GCRA splits its admissions into clusters separated
//     by a full refill (judgeBucket); a gap of ⌈K/r⌉ after the latest
//     decision so far starts a new cluster;
//   - a sliding log or counter groups requests within less than W, and an
//     epoch-aligned fixed window counts per window: a gap of W between the
//     latest decision so far and the next send separates every group and
//     every window (judgeSliding's greedy scan restarts there);
//   - a fixed window anchored at the key's first request carries its
//     anchors' bounds through the whole run: never cut.
//
// The gap of a key is the largest of its limits'. A segment is screened
// as it streams by, limit by limit (limitScreen): a bucket (and GCRA) by
// forward EDF on each cluster (edfScreen, the same arithmetic as edf), a
// sliding log or counter by judgeSliding's own test (slideScreen), an
// epoch-aligned fixed window by its count per window (fixedScreen, which
// also measures the worst rolling window). A segment every screen clears
// is one judgeScope reports nothing for: it is not kept. Any other
// segment — and every segment of a tier with a per-instance limit or an
// anchored window, which are not screened — is flagged by its range of
// send times. State per key in pass 1: the screens' (EDF's requests in
// flight and pending a token, the windows' admissions sent within W) and
// the flagged ranges.
//
// Pass 2 (AddAgain), when Again, collects the admissions of the flagged
// segments only and judges each by the in-memory functions (judgeLimit),
// exactly as Run judges them among the key's others. State: a flagged
// segment's admissions — a key that breaks its envelope, or whose tier has
// a per-instance or anchored limit, holds the admissions of its segment,
// which for a key that never pauses for its gap (steady overload, an
// anchored window) is its admissions over the run (of the order of the
// limit's rate × the run's length, not of the requests sent). Evidence:
// each certificate with its position in Run's order (key, limit,
// instance, then time), the MaxEvidence first kept.
type oversellStream struct {
	ix  *index
	col orderedCollector
	sc  scratch
	// open are the keys with an open segment (pass 1) or collected
	// admissions (pass 2); sweep closes those whose gap has passed.
	open       []*oversellKey
	sinceSweep int
	again      bool // in pass 2
	flagged    int  // segments flagged for pass 2
	certs      uint64
	maxOver    float64
	unknown    int
	infeasible int
	// fallback counts the events the failure mode decided, unexplained
	// those outside every injected fault window.
	fallback, unexplained int
	// pass is the evidence's pass in the collector's order, evidence the
	// evidence of a certificate (nil: oversell's): fail-mode's recovery
	// judges its admissions with the same segments (failStream).
	pass     int
	evidence func(key string, ct *cert, idl []uint64, total int) Evidence
}

// oversellKey is what oversellStream keeps of one key.
type oversellKey struct {
	key      string
	tier     *policy.Tier
	admitted int
	// gap is the key's cut (-1: never).
	gap    int64
	isOpen bool
	// Pass 1: the open segment's first and last send (lo), latest hi and
	// flag; screens screen its clusters, one per limit (nil: the tier
	// cannot be screened, every segment is flagged); flagged are the
	// ranges of lo of the segments pass 2 judges.
	segN           int
	segLo, segLast int64
	segHi          int64
	flag           bool
	screens        []limitScreen
	flagged        []loRange
	// Pass 2: pos is the flagged range being collected into seg.
	pos int
	seg []segRec
	// worst is each limit's worst rolling window (fixed windows).
	worst []int
	// certs counts the certificates found per limit (pass 2; nil: none).
	certs []int
}

type loRange struct{ from, to int64 }

// segRec is an admission of a flagged segment, with what the evidence
// needs of its event.
type segRec struct {
	r   rec
	id  uint64
	seq uint64
}

// sweepAfter is how many events beyond the open keys pass between two
// sweeps (amortised O(1) an event; tests lower it).
var sweepAfter = 1024

// compactAfter is how many dropped admissions a window screen keeps before
// it compacts its queue (tests lower it).
var compactAfter = 1024

func newOversellStream(ix *index) *oversellStream {
	return &oversellStream{ix: ix, col: orderedCollector{max: ix.o.MaxEvidence}}
}

// cutGap is the gap between the latest decision of a key's admissions and
// the next admission's earliest one that separates their judgements under
// every limit of t; -1 when no gap does.
func cutGap(t *policy.Tier) int64 {
	g := int64(1)
	for li := range t.Limits {
		l := &t.Limits[li]
		switch {
		case l.AnchoredAtFirst():
			return -1
		case l.Algorithm.Bucketed():
			if r := l.R() / 1e9; r > 0 {
				g = max(g, int64(math.Ceil(l.K()/r)))
			} else {
				return -1
			}
		default:
			g = max(g, int64(l.W()))
		}
	}
	return g
}

// screensFor are the screens of tier t's limits, nil when one cannot be
// screened: a per-instance limit (its judgement splits by instance) or a
// fixed window anchored at the key's first request.
func screensFor(t *policy.Tier, startNs int64) []limitScreen {
	out := make([]limitScreen, len(t.Limits))
	for li := range t.Limits {
		l := &t.Limits[li]
		if l.PerInstance() {
			return nil
		}
		switch l.Algorithm {
		case policy.TokenBucket, policy.GCRA:
			r := l.R() / 1e9
			if !(r > 0) {
				return nil
			}
			out[li].edf = &edfScreen{K: l.K(), r: r, refill: int64(math.Ceil(l.K() / r))}
		case policy.SlidingLog, policy.SlidingCounter:
			limit := float64(l.Count)
			if l.Algorithm == policy.SlidingCounter {
				limit = math.Floor(float64(l.Count)*(1+l.ErrorBound) + eps)
			}
			out[li].slide = &slideScreen{M: int(limit) + 1, W: int64(l.W())}
		case policy.FixedWindow:
			if l.AnchoredAtFirst() || l.W() <= 0 {
				return nil
			}
			out[li].fixed = &fixedScreen{W: int64(l.W()), N: int(l.Count), startNs: startNs}
		default:
			return nil
		}
	}
	return out
}

// limitScreen screens one limit's admissions of a segment: it reports a
// segment whose judgement (judgeScope) may find a certificate or an
// undecided cluster, and clears every other.
type limitScreen struct {
	edf   *edfScreen
	slide *slideScreen
	fixed *fixedScreen
}

func (s *limitScreen) add(lo, hi int64) bool {
	switch {
	case s.edf != nil:
		return s.edf.add(lo, hi)
	case s.slide != nil:
		return s.slide.add(lo, hi)
	}
	return s.fixed.add(lo, hi)
}

func (s *limitScreen) end() bool {
	if s.edf != nil {
		return s.edf.end()
	}
	return false
}

func (s *limitScreen) reset() {
	switch {
	case s.edf != nil:
		s.edf.reset()
	case s.slide != nil:
		s.slide.reset()
	default:
		s.fixed.reset()
	}
}

// worst is the worst rolling window the screen measured (fixed windows).
func (s *limitScreen) worst() int {
	if s.fixed != nil {
		return s.fixed.worst
	}
	return 0
}

// slideScreen is judgeSliding's test without its groups: some M = limit+1
// consecutive admissions (in Run's order, which orders the stream's ties
// of equal lo and hi alike) all decided within less than W. It keeps the
// admissions sent within W of the latest, at most M (a deque of their
// his' maximum beside them).
type slideScreen struct {
	M    int
	W    int64
	q    []loHi
	head int
	dq   []int // indices into q of decreasing hi, from q[head:]
	dh   int
}

func (s *slideScreen) add(lo, hi int64) bool {
	s.q = append(s.q, loHi{lo, hi})
	n := len(s.q) - 1
	for len(s.dq) > s.dh && s.q[s.dq[len(s.dq)-1]].hi <= hi {
		s.dq = s.dq[:len(s.dq)-1]
	}
	s.dq = append(s.dq, n)
	// A group ending here or later starts after lo − W, and holds M.
	for s.head < len(s.q) && (s.q[s.head].lo <= lo-s.W || len(s.q)-s.head > s.M) {
		s.head++
	}
	for s.dh < len(s.dq) && s.dq[s.dh] < s.head {
		s.dh++
	}
	bad := len(s.q)-s.head == s.M && s.q[s.dq[s.dh]].hi-s.q[s.head].lo < s.W
	if s.head > compactAfter && 2*s.head > len(s.q) {
		// Compact: drop what no later group can hold.
		m := copy(s.q, s.q[s.head:])
		s.q = s.q[:m]
		d := copy(s.dq, s.dq[s.dh:])
		s.dq = s.dq[:d]
		for i := range s.dq {
			s.dq[i] -= s.head
		}
		s.head, s.dh = 0, 0
	}
	return bad
}

func (s *slideScreen) reset() { s.q, s.dq, s.head, s.dh = s.q[:0], s.dq[:0], 0, 0 }

// fixedScreen is judgeFixed's test without its certificates: more than N
// admissions decided inside one epoch-aligned window; and judgeFixed's
// worst rolling window by send time, from the sends within W of the
// latest.
type fixedScreen struct {
	W, startNs int64
	N          int
	have       bool
	k          int64 // the window of the latest send, cnt its admissions inside
	cnt        int
	los        []int64
	head       int
	worst      int
}

func (s *fixedScreen) add(lo, hi int64) bool {
	if k := floorDiv(s.startNs+lo, s.W); !s.have || k != s.k {
		s.have, s.k, s.cnt = true, k, 0
	}
	bad := false
	if floorDiv(s.startNs+hi, s.W) == s.k {
		s.cnt++
		bad = s.cnt > s.N
	}
	s.los = append(s.los, lo)
	for lo-s.los[s.head] >= s.W {
		s.head++
	}
	s.worst = max(s.worst, len(s.los)-s.head)
	if s.head > compactAfter && 2*s.head > len(s.los) {
		m := copy(s.los, s.los[s.head:])
		s.los, s.head = s.los[:m], 0
	}
	return bad
}

func (s *fixedScreen) reset() { s.have, s.los, s.head = false, s.los[:0], 0 }

func (o *oversellStream) add(e *history.Event, seq uint64, r rec, sk *streamKey) {
	if e.Fallback != "" {
		o.fallback++
		if !o.ix.fallbackExplained(e) {
			o.unexplained++
		}
	}
	o.tick(r.lo)
	t := sk.tier
	if t == nil || r.out != history.Admitted || r.fault || r.variant || r.tokens() == 0 {
		return // (a cost-0 peek consumes nothing)
	}
	k := sk.oversell
	if k == nil {
		k = o.newKey(e.Key, t)
		sk.oversell = k
	}
	o.admit(k, r, r.tokens()) // a weighted admission is that many (checkOversell's admitted)
}

// tick counts an event of the stream (pass 1 or 2) sent at lo, sweeping
// now and then.
func (o *oversellStream) tick(lo int64) {
	if o.sinceSweep++; o.sinceSweep > len(o.open)+sweepAfter {
		o.sweep(lo)
	}
}

// newKey is the state of key, of tier t.
func (o *oversellStream) newKey(key string, t *policy.Tier) *oversellKey {
	return &oversellKey{key: key, tier: t, gap: cutGap(t), worst: make([]int, len(t.Limits)), screens: screensFor(t, o.ix.startNs)}
}

// admit adds r, an admission of k judged as tokens unit admissions in its
// interval, in pass 1.
func (o *oversellStream) admit(k *oversellKey, r rec, tokens int) {
	k.admitted += tokens
	if k.segN > 0 && k.gap >= 0 && r.lo-k.segHi >= k.gap {
		o.close(k)
	}
	if k.segN == 0 {
		k.segLo, k.segHi, k.flag = r.lo, r.hi, k.screens == nil
		if !k.isOpen {
			k.isOpen = true
			o.open = append(o.open, k)
		}
	}
	k.segN++
	k.segLast = r.lo
	k.segHi = max(k.segHi, r.hi)
	if !k.flag {
		for i := range k.screens {
			for range tokens {
				if k.screens[i].add(r.lo, r.hi) {
					k.flag = true
				}
			}
		}
	}
}

// close ends k's open segment in pass 1: its clusters are screened to the
// end, and the segment flagged for pass 2 unless every one was scheduled.
func (o *oversellStream) close(k *oversellKey) {
	if !k.flag {
		for i := range k.screens {
			if k.screens[i].end() {
				k.flag = true
			}
		}
	}
	for i := range k.screens {
		k.worst[i] = max(k.worst[i], k.screens[i].worst())
		k.screens[i].reset()
	}
	if k.flag {
		k.flagged = append(k.flagged, loRange{k.segLo, k.segLast})
		o.flagged++
	}
	k.segN, k.flag = 0, false
}

// needAgain ends pass 1 and reports whether pass 2 is needed: some
// segment was flagged.
func (o *oversellStream) needAgain() bool {
	for _, k := range o.open {
		o.close(k)
		k.isOpen = false
	}
	o.open = o.open[:0]
	return o.flagged > 0
}

// addAgain collects, in pass 2, the admissions of the flagged segments.
func (o *oversellStream) addAgain(e *history.Event, seq uint64, r rec, sk *streamKey) {
	o.tick(r.lo)
	k := sk.oversell
	if k == nil || k.tier == nil || r.out != history.Admitted || r.fault || r.variant || r.tokens() == 0 {
		return
	}
	o.collect(k, e.ID, seq, r, r.tokens())
}

// collect adds r (the event id at seq), an admission of k judged as tokens
// unit admissions, in pass 2: kept when a flagged segment holds it.
func (o *oversellStream) collect(k *oversellKey, id, seq uint64, r rec, tokens int) {
	for k.pos < len(k.flagged) && r.lo > k.flagged[k.pos].to {
		if len(k.seg) > 0 {
			o.judge(k)
		}
		k.pos++
	}
	if k.pos == len(k.flagged) || r.lo < k.flagged[k.pos].from {
		return
	}
	if len(k.seg) == 0 && !k.isOpen {
		k.isOpen = true
		o.open = append(o.open, k)
	}
	for range tokens { // as admitted() expands a weighted admission
		k.seg = append(k.seg, segRec{r: r, id: id, seq: seq})
	}
}

// edfScreen is edf run forward on one limit's clusters as their
// admissions arrive in send order: judgeBucket reports nothing for a
// cluster of at most K admissions or one EDF schedules, and edfScreen
// says which clusters it cannot clear. It holds the requests released and
// not yet served (heap, their hi) and those not yet released (next): a
// step of edf that depends on the next release waits for it.
type edfScreen struct {
	K, r   float64
	refill int64
	// The open cluster: n admissions from base, the latest hi maxHi.
	n      int
	base   int64
	maxHi  int64
	failed bool
	L, t   float64
	heap   []int64
	next   []loHi
	ni     int // next[:ni] are released
}

type loHi struct{ lo, hi int64 }

// add takes the next admission and reports whether a cluster it closed
// (this admission starts a new one) is not cleared.
func (s *edfScreen) add(lo, hi int64) bool {
	bad := false
	if s.n > 0 && lo-s.maxHi >= s.refill {
		bad = s.end()
		s.reset()
	}
	if s.n == 0 {
		s.base, s.maxHi, s.L, s.t = lo, hi, s.K, 0
	}
	s.n++
	s.maxHi = max(s.maxHi, hi)
	if !s.failed {
		s.next = append(s.next, loHi{lo, hi})
		s.run(false)
	}
	return bad
}

// end runs the open cluster's EDF to its end and reports whether the
// cluster is not cleared.
func (s *edfScreen) end() bool {
	if s.n == 0 || float64(s.n) <= s.K {
		return false
	}
	if !s.failed {
		s.run(true)
	}
	return s.failed
}

func (s *edfScreen) reset() {
	s.n, s.failed = 0, false
	s.heap, s.next, s.ni = s.heap[:0], s.next[:0], 0
}

// run is edf's loop (same arithmetic, relative to the cluster's first
// lo) as far as the releases known so far decide it; final: no more come.
func (s *edfScreen) run(final bool) {
	advance := func(nt float64) {
		if nt > s.t {
			s.L = math.Min(s.K, s.L+s.r*(nt-s.t))
			s.t = nt
		}
	}
	for {
		if len(s.heap) == 0 {
			if s.ni == len(s.next) {
				s.next, s.ni = s.next[:0], 0
				return
			}
			advance(float64(s.next[s.ni].lo - s.base))
		}
		for s.ni < len(s.next) && float64(s.next[s.ni].lo-s.base) <= s.t {
			s.push(s.next[s.ni].hi)
			s.ni++
		}
		if s.ni == len(s.next) {
			s.next, s.ni = s.next[:0], 0
			if !final {
				return
			}
		}
		if s.L >= 1-1e-9 {
			if float64(s.pop()-s.base) < s.t-1 {
				s.fail()
				return
			}
			s.L--
			continue
		}
		tn := s.t + (1-s.L)/s.r
		if s.ni < len(s.next) && float64(s.next[s.ni].lo-s.base) < tn {
			advance(float64(s.next[s.ni].lo - s.base))
			continue
		}
		if float64(s.heap[0]-s.base) < tn-1 {
			s.fail()
			return
		}
		s.t, s.L = tn, 1
	}
}

func (s *edfScreen) fail() {
	s.failed = true
	s.heap, s.next, s.ni = s.heap[:0], s.next[:0], 0
}

func (s *edfScreen) push(hi int64) {
	h := append(s.heap, hi)
	for j := len(h) - 1; j > 0; {
		p := (j - 1) / 2
		if h[j] >= h[p] {
			break
		}
		h[j], h[p] = h[p], h[j]
		j = p
	}
	s.heap = h
}

func (s *edfScreen) pop() int64 {
	h := s.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for j := 0; ; {
		l, m := 2*j+1, j
		if l < len(h) && h[l] < h[m] {
			m = l
		}
		if l+1 < len(h) && h[l+1] < h[m] {
			m = l + 1
		}
		if m == j {
			break
		}
		h[j], h[m] = h[m], h[j]
		j = m
	}
	s.heap = h
	return top
}

// sweep closes (pass 1) or judges (pass 2) the open segments whose gap
// has passed by now: every later event is sent at or after now.
func (o *oversellStream) sweep(now int64) {
	o.sinceSweep = 0
	keep := o.open[:0]
	for _, k := range o.open {
		switch {
		case !o.again && k.gap >= 0 && now-k.segHi >= k.gap:
			o.close(k)
		case o.again && len(k.seg) == 0:
		case o.again && now > k.flagged[k.pos].to:
			o.judge(k)
			k.pos++
		default:
			keep = append(keep, k)
			continue
		}
		k.isOpen = false
	}
	clear(o.open[len(keep):])
	o.open = keep
}

// judge judges k's open segment as Run judges those admissions among the
// key's others, and empties it.
func (o *oversellStream) judge(k *oversellKey) {
	seg := k.seg
	// Run's order (lo, hi, file position); the stream's differs only
	// among equal send times.
	slices.SortFunc(seg, func(a, b segRec) int {
		return cmp.Or(cmp.Compare(a.r.lo, b.r.lo), cmp.Compare(a.r.hi, b.r.hi), cmp.Compare(a.seq, b.seq))
	})
	recs := o.sc.recs[:0]
	for i := range seg {
		r := seg[i].r
		r.idx = int32(i)
		recs = append(recs, r)
	}
	o.sc.recs = recs
	idOf := func(r rec) uint64 { return seg[r.idx].id }
	for li := range k.tier.Limits {
		l := &k.tier.Limits[li]
		st := o.ix.judgeLimit(recs, l, &o.sc)
		o.unknown += st.unknown
		o.infeasible += st.infeasible
		k.worst[li] = max(k.worst[li], st.worstRolling)
		for ci := range st.certs {
			ct := &st.certs[ci]
			o.maxOver = math.Max(o.maxOver, float64(ct.count)/ct.bound)
			o.certs++
			if k.certs == nil {
				k.certs = make([]int, len(k.tier.Limits))
			}
			k.certs[li]++
			idl, total := idListBy(ct.recs, idOf)
			var ev Evidence
			if o.evidence != nil {
				ev = o.evidence(k.key, ct, idl, total)
			} else {
				ev = Evidence{Key: k.key, Limit: l.Name, From: ct.from, To: ct.to, Bound: ct.bound, Observed: float64(ct.count),
					RequestIDs: idl, TotalIDs: total, Message: certMessage(ct)}
			}
			o.col.add(ordered{pass: o.pass, key: k.key, sub: uint64(li)<<32 | uint64(ct.inst+1<<16), at: o.certs, ev: ev})
		}
	}
	clear(seg)
	k.seg = seg[:0]
	if cap(k.seg) > 1024 {
		k.seg = nil
	}
}

// finish judges, after pass 2, the segments still being collected.
func (o *oversellStream) finish() {
	for _, k := range o.open {
		o.judge(k)
		k.isOpen = false
	}
	o.open = nil
}

func (o *oversellStream) result(all map[string]*streamKey) Result {
	o.finish()
	var keys []*oversellKey
	for _, sk := range all {
		if sk.oversell != nil {
			keys = append(keys, sk.oversell)
		}
	}
	slices.SortFunc(keys, func(a, b *oversellKey) int { return cmp.Compare(a.key, b.key) })
	var admittedN int
	worst, worstN := 0, int64(0)
	hasFixed := false
	for _, k := range keys {
		admittedN += k.admitted
		for li := range k.tier.Limits {
			l := &k.tier.Limits[li]
			if l.Algorithm == policy.FixedWindow {
				hasFixed = true
				if float64(k.worst[li])/float64(l.Count) > float64(worst)/math.Max(1, float64(worstN)) {
					worst, worstN = k.worst[li], l.Count
				}
			}
		}
	}
	return oversellResult(o.col.collector(), oversellFigures{admitted: admittedN, keys: len(keys), maxOver: o.maxOver, hasFixed: hasFixed,
		worst: worst, worstN: worstN, unknown: o.unknown, infeasible: o.infeasible, unexplained: o.unexplained, fallback: o.fallback, weighted: o.ix.p.Weighted()})
}

// idListBy is idList with the events' ids given by id.
func idListBy(rs []rec, id func(rec) uint64) ([]uint64, int) {
	all := make([]uint64, 0, min(len(rs), MaxIDs+1))
	for _, r := range rs {
		if len(all) > MaxIDs {
			break
		}
		all = append(all, id(r))
	}
	got, _ := ids(all)
	return got, len(rs)
}
