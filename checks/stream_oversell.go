package checks

import (
	"cmp"
	"math"
	"slices"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// oversellStream is checkOversell as a stream. Per key it keeps the
// admissions the envelope judges (admitted, outside fault windows, not a
// variant) since the last cut, a point where every limit of the key's
// tier judges what comes before and what comes after apart:
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
// The gap of a key is the largest of its limits'. At a cut the open
// admissions are judged by the in-memory functions (judgeLimit), exactly
// as Run judges them among the key's others, and dropped. State per key:
// the admissions of the open segment — for a correct limiter at most what
// its envelope allows over the segment; a key that never pauses for its
// gap (steady overload, or an anchored window) keeps its admissions over
// the run (of the order of the limit's rate × the run's length, not of the
// requests sent). Evidence: each certificate with its position in Run's
// order (key, limit, instance, then time), the MaxEvidence first kept.
type oversellStream struct {
	ix  *index
	col orderedCollector
	sc  scratch
	// open are the keys with an open segment; sweep judges those whose
	// gap has passed.
	open       []*oversellKey
	sinceSweep int
	certs      uint64
	maxOver    float64
	unknown    int
	// fallback counts the events the failure mode decided, unexplained
	// those outside every injected fault window.
	fallback, unexplained int
}

// oversellKey is what oversellStream keeps of one key.
type oversellKey struct {
	key      string
	tier     *policy.Tier
	admitted int
	// gap is the key's cut (-1: never), seg the open segment's admissions
	// and segHi their latest hi.
	gap    int64
	seg    []segRec
	segHi  int64
	isOpen bool
	// worst is each limit's worst rolling window (fixed windows).
	worst []int
}

// segRec is an admission of an open segment, with what the evidence
// needs of its event.
type segRec struct {
	r   rec
	id  uint64
	seq uint64
}

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

func (o *oversellStream) add(e *history.Event, seq uint64, r rec, sk *streamKey) {
	if e.Fallback != "" {
		o.fallback++
		if !o.ix.fallbackExplained(e) {
			o.unexplained++
		}
	}
	if o.sinceSweep++; o.sinceSweep > len(o.open)+1024 {
		o.sweep(r.lo)
	}
	t := sk.tier
	if t == nil || r.out != history.Admitted || r.fault || r.variant {
		return
	}
	k := sk.oversell
	if k == nil {
		k = &oversellKey{key: e.Key, tier: t, gap: cutGap(t), worst: make([]int, len(t.Limits))}
		sk.oversell = k
	}
	k.admitted++
	if len(k.seg) > 0 && k.gap >= 0 && r.lo-k.segHi >= k.gap {
		o.judge(k)
	}
	if len(k.seg) == 0 {
		k.segHi = r.hi
		if !k.isOpen {
			k.isOpen = true
			o.open = append(o.open, k)
		}
	}
	k.segHi = max(k.segHi, r.hi)
	k.seg = append(k.seg, segRec{r: r, id: e.ID, seq: seq})
}

// sweep judges the open segments whose gap has passed by now (every later
// event is sent at or after now), and forgets their keys' admissions.
func (o *oversellStream) sweep(now int64) {
	o.sinceSweep = 0
	keep := o.open[:0]
	for _, k := range o.open {
		if k.gap >= 0 && now-k.segHi >= k.gap {
			o.judge(k)
			k.isOpen = false
			continue
		}
		keep = append(keep, k)
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
		k.worst[li] = max(k.worst[li], st.worstRolling)
		for ci := range st.certs {
			ct := &st.certs[ci]
			o.maxOver = math.Max(o.maxOver, float64(ct.count)/ct.bound)
			o.certs++
			idl, total := idListBy(ct.recs, idOf)
			o.col.add(ordered{pass: 0, key: k.key, sub: uint64(li)<<32 | uint64(ct.inst+1<<16), at: o.certs,
				ev: Evidence{Key: k.key, Limit: l.Name, From: ct.from, To: ct.to, Bound: ct.bound, Observed: float64(ct.count),
					RequestIDs: idl, TotalIDs: total, Message: certMessage(ct)}})
		}
	}
	clear(seg)
	k.seg = seg[:0]
	if cap(k.seg) > 1024 {
		k.seg = nil
	}
}

func (o *oversellStream) result(all map[string]*streamKey) Result {
	for _, k := range o.open {
		o.judge(k)
	}
	o.open = nil
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
		worst: worst, worstN: worstN, unknown: o.unknown, unexplained: o.unexplained, fallback: o.fallback})
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
