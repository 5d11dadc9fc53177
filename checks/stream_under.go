package checks

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// underStream is under-admission (checkUnder) as a stream, in two passes.
//
// The first pass gathers what the refusals are judged by that is
// whole-run: the timing tolerance (declared, or sampled from every
// tolStep-th event in file order, as retry-after's: the streamer must be
// told the number of events), the run's widest interval (index.maxLat,
// which the attribution window reads), which keys have refusals to judge,
// the exempt keys' tallies (exemptTally: counts and the first MaxIDs+1
// ids) and, for a key whose tier has a fixed window anchored at its first
// request, the key's requests (lo, hi, outcome), from which anchorsOf
// bounds the windows at the end of the pass — the one piece kept for a
// whole key's run (one anchor pair a window remains).
//
// The second pass judges each refusal with judgeRefusal, the in-memory
// decision, once the stream has passed its hi (every request that could
// have been decided by then is among the candidates), in send order, on a
// key's candidates that can still matter: those with lo or hi within the
// tolerance plus twice the tier's longest W before the earliest refusal
// still to be judged, and — for a bucket's backward walk, which reads
// every earlier candidate by hi whatever its age — of those before, per
// rate, the one the walk would find (cands.gone); the counts before them
// stay as bases (cands.loBase, hiBase), so every index room reads is the
// one Run reads. Attribution
// (the key's first maxAttributed wrong refusals: attribute) reads the
// key's own requests and every key's admissions within the attribution
// window (two refill horizons and the run's widest interval) before the
// refusal; the key's own stop being kept once it has had its
// maxAttributed. A wrong refusal both hypotheses explain waits for the
// key's end (underAttr.settle), at most maxAttributed a key.
//
// Evidence is ordered as Run adds it (orderedCollector): wrong refusals
// by key, then the key's order (send order); then the exempt keys'.
type underStream struct {
	ix *index
	// tol is the default tolerance's sample (the Streamer's, shared);
	// tolWhy says why the tolerance is not known ("" when it is).
	tol    *tolSample
	tolWhy string
	// candidates counts the refusals to judge (first pass).
	candidates int
	asked      bool
	again      bool
	// names are the keys by id (underKey.gid); byGid their state.
	names []string
	byGid []*underKey
	// Second pass: the refusals waiting for the stream to pass their hi
	// (pending[head:], in send order), every key's admissions within an
	// attribution window (adm[admHead:], by lo).
	pending []underPending
	head    int
	adm     []admRec
	admKeep int
	// horizon is the policy's longest W (the widest attribution window).
	horizon int64

	judged, undecided, unattributed int
	col                             orderedCollector
	// selfKeys are the keys with a wrong refusal their own refusals explain.
	selfKeys map[string]bool
	// deferred lists the keys holding ambiguous wrong refusals.
	deferred []*underKey
	// held are the wrong refusals isolation weighs (self or shared), with
	// their position: at most maxAttributed a key.
	held []underHeld
	// settled is set once Results has judged what was pending.
	settled bool

	// Isolation (isolate set): its evidence (the refusals a shared quota
	// explains, by key; then the responses of another tier's quota, in
	// file order), the responses of another tier's quota and the headers'
	// parser.
	isolate  bool
	isoCol   orderedCollector
	mismatch int
	hp       *hdrParser
	oc       *obsCache
}

// underKey is what under-admission keeps of one key: a few counters, and
// for a key with refusals to judge its second pass's state.
type underKey struct {
	gid    int32
	name   string
	tier   *policy.Tier
	exempt *policy.Exempt
	ex     *exemptTally // of an exempt key
	// admitted counts the key's admissions (not variants): isolation's.
	admitted int
	// hasRej: the key has a refusal (not a variant), as computeUnder asks.
	hasRej bool
	// anch are the key's requests for anchorsOf (first pass, anchored
	// tiers only); anchAt the limit.
	anch   []rec
	anchAt *policy.Limit
	*underState
}

// underState is the second pass's state of a key with refusals to judge.
type underState struct {
	// n counts the key's events; u are its candidates, recs its requests
	// for attribution (while it has attributions to make).
	n      uint64
	u      underCands
	recs   []rec
	a      underAttr
	wmax   int64 // the tier's longest W
	trimAt int
	// held are the key's ambiguous wrong refusals, settled at its end.
	held []underHeld
}

type underPending struct {
	k  *underKey
	r  rec
	id uint64
	at uint64
}

type underHeld struct {
	w   wrongRej
	at  uint64
	key *underKey // for isolation's
}

type admRec struct {
	r   rec
	gid int32
}

func newUnderStream(ix *index, isolate bool) *underStream {
	us := &underStream{ix: ix, col: orderedCollector{max: ix.o.MaxEvidence}, selfKeys: map[string]bool{}, horizon: horizonOf(ix.p),
		isolate: isolate, isoCol: orderedCollector{max: ix.o.MaxEvidence}}
	if isolate {
		us.hp, us.oc = newHdrParser(ix.gen), ix.newObsCache()
	}
	return us
}

// key returns the key's state, made on its first event (tier t).
func (us *underStream) key(e *history.Event, sk *streamKey) *underKey {
	if sk.under != nil {
		return sk.under
	}
	k := &underKey{gid: int32(len(us.names)), name: e.Key, tier: sk.tier}
	if k.tier == nil {
		if e.Tier != "" {
			k.exempt, _ = us.ix.p.ExemptNamed(e.Tier)
		} else {
			k.exempt, _ = us.ix.p.ExemptFor(e.Key)
		}
		if k.exempt != nil {
			k.ex = &exemptTally{}
		}
	} else {
		for li := range k.tier.Limits {
			l := &k.tier.Limits[li]
			if l.AnchoredAtFirst() && !l.PerInstance() && k.anchAt == nil {
				k.anchAt = l
			}
		}
	}
	us.names = append(us.names, e.Key)
	us.byGid = append(us.byGid, k)
	sk.under = k
	return k
}

// add is the first pass.
func (us *underStream) add(e *history.Event, seq uint64, r rec, sk *streamKey) {
	ix := us.ix
	k := us.key(e, sk)
	if k.tier == nil {
		if k.ex != nil {
			k.ex.add(r, e.ID)
		}
		return
	}
	if r.out == history.Rejected && !r.variant {
		k.hasRej = true
	}
	if r.out == history.Admitted && !r.variant {
		k.admitted++
	}
	if us.isolate && len(ix.p.Tiers) >= 2 {
		var h hdr
		us.hp.parse(ix, e, r, &h)
		if ev, ok := ix.tierMismatch(e, r, &h, k.tier, us.oc); ok {
			us.mismatch++
			us.isoCol.add(ordered{pass: 2, at: seq, ev: ev})
		}
	}
	if underJudged(r) {
		us.candidates++
	}
	if k.anchAt != nil {
		k.anch = append(k.anch, r)
	}
}

// needAgain settles the first pass (n events): the tolerance and the
// anchors; the second pass is needed when a refusal is to be judged.
func (us *underStream) needAgain(n uint64) bool {
	if us.asked {
		return us.again
	}
	us.asked = true
	ix := us.ix
	var anchs map[*underKey]*anchors
	for _, k := range us.byGid {
		if k.anchAt != nil && k.hasRej {
			if anchs == nil {
				anchs = map[*underKey]*anchors{}
			}
			anchs[k] = anchorsOf(k.anch, k.anchAt)
		}
		k.anch = nil
	}
	exempt := false
	for _, k := range us.byGid {
		exempt = exempt || k.ex != nil && k.ex.n > 0
	}
	if us.candidates == 0 && !exempt {
		return false
	}
	// The tolerance is disclosed whenever the check judged something.
	tol, why := us.tol.settle(ix, n)
	if why != "" {
		us.tolWhy = why
		return false
	}
	ix.tol = tol
	if us.candidates == 0 {
		return false
	}
	for _, k := range us.byGid {
		if k.tier == nil || !k.hasRej {
			continue
		}
		k.underState = &underState{}
		for _, l := range k.tier.Limits {
			k.wmax = max(k.wmax, int64(l.W()))
		}
		k.u.reset(ix, k.tier)
		if anch := anchs[k]; anch != nil {
			k.u.c.anch, k.u.all.anch = anch, anch
			k.u.c.anchAt, k.u.all.anchAt = k.anchAt, k.anchAt
		}
	}
	us.again = true
	return true
}

// addAgain is the second pass.
func (us *underStream) addAgain(e *history.Event, seq uint64, r rec, sk *streamKey) {
	ix := us.ix
	// The file position stands for Run's index in h.Events: it tells a
	// refusal from the key's other requests and breaks cmpRec's ties in
	// file order (a run of more than 2^31 events would wrap it).
	r.idx = int32(seq)
	us.settle(r.lo)
	k := sk.under
	if r.out == history.Admitted && !r.variant {
		us.adm = append(us.adm, admRec{r: r, gid: k.gid})
		if len(us.adm) > us.admKeep+us.admKeep/2+256 {
			us.trimAdm(r.lo)
		}
	}
	if k.tier == nil || !k.hasRej {
		return
	}
	at := k.n
	k.n++
	if k.a.attributed < maxAttributed {
		k.recs = append(k.recs, r)
	}
	k.u.add(ix, r)
	k.u.sortTail()
	if underJudged(r) {
		us.pending = append(us.pending, underPending{k: k, r: r, id: e.ID, at: at})
	}
	if k.u.size()+len(k.recs) > k.trimAt {
		us.trim(k, r.lo)
		n := k.u.size() + len(k.recs)
		k.trimAt = n + n/2 + underTrimSlack
	}
}

// underTrimSlack: a key's second-pass state is trimmed once it has grown
// by half since its last trim, plus this many: often enough that many
// keys of a few hundred requests each keep what their windows still
// need, not their whole runs (with 256, and twice the size, 10^5 keys of
// about 100 requests kept every request: 491 MB of 10^7 events), rarely
// enough that the copies a trim makes stay a constant per request. The
// run's admissions (underStream.adm) likewise, across keys.
const underTrimSlack = 16

// from is the earliest lo of a refusal still to be judged (now: the
// stream's position when none waits).
func (us *underStream) from(now int64) int64 {
	if us.head < len(us.pending) {
		return us.pending[us.head].r.lo
	}
	return now
}

// before is t − d, saturating (a one-off quota's W is centuries).
func before(t, d int64) int64 {
	if d < 0 || t-d > t {
		return math.MinInt64
	}
	return t - d
}

// trim forgets what no refusal of k still to be judged reads (see
// underStream).
func (us *underStream) trim(k *underKey, now int64) {
	ix := us.ix
	lo := before(us.from(now), ix.tol)
	cut := before(before(lo, 2*k.wmax), 1)
	k.u.c.drop(cut, k.u.rates)
	k.u.all.drop(cut, k.u.rates)
	for _, m := range []map[int16]*cands{k.u.perInst, k.u.allInst} {
		for _, c := range m {
			c.drop(cut, k.u.rates)
		}
	}
	if len(k.u.refunded) > 0 {
		k.u.refunded = slices.DeleteFunc(k.u.refunded, func(x rec) bool { return x.hi < lo })
	}
	if k.a.attributed >= maxAttributed {
		k.recs = nil
	} else if w := before(before(lo, 2*k.wmax), ix.maxLat); len(k.recs) > 0 && k.recs[0].lo < w {
		i := sort.Search(len(k.recs), func(i int) bool { return k.recs[i].lo >= w })
		// (10^5 keys: 131 MB more at 3·10^7 events than at 10^7 before
		// this buffer shrank.)
		k.recs = shrunk(k.recs[:copy(k.recs, k.recs[i:])])
	}
}

// trimAdm forgets the admissions before every attribution window still to
// be weighed.
func (us *underStream) trimAdm(now int64) {
	w := before(before(before(us.from(now), us.ix.tol), 2*us.horizon), us.ix.maxLat)
	i := sort.Search(len(us.adm), func(i int) bool { return us.adm[i].r.lo >= w })
	us.adm = us.adm[:copy(us.adm, us.adm[i:])]
	us.admKeep = len(us.adm)
}

// size is how many candidates u holds.
func (u *underCands) size() int {
	n := len(u.c.lo) + len(u.all.lo)
	for _, m := range []map[int16]*cands{u.perInst, u.allInst} {
		for _, c := range m {
			n += len(c.lo)
		}
	}
	return n
}

// finalize marks the candidates with hi before t, the stream's position,
// final: every later one has its lo at or after t.
func (u *underCands) finalize(t int64) {
	u.c.finalize(t)
	u.all.finalize(t)
	for _, m := range []map[int16]*cands{u.perInst, u.allInst} {
		for _, c := range m {
			c.finalize(t)
		}
	}
}

func (c *cands) finalize(t int64) {
	c.stream = true
	c.final = c.hiBelow(t) - c.hiBase
}

// sortTail puts the candidates add appended in their place by hi.
func (u *underCands) sortTail() {
	u.c.sortTail()
	u.all.sortTail()
	for _, m := range []map[int16]*cands{u.perInst, u.allInst} {
		for _, c := range m {
			c.sortTail()
		}
	}
}

// sortTail inserts the hi values appended since the last call in order
// (they are late among the key's, so near the end) and forgets the walks.
func (c *cands) sortTail() {
	if c.sorted == len(c.hi) {
		return
	}
	least := len(c.hi)
	for i := max(c.sorted, 1); i < len(c.hi); i++ {
		x := c.hi[i]
		j := i
		for j > 0 && c.hi[j-1] > x {
			c.hi[j] = c.hi[j-1]
			j--
		}
		c.hi[j] = x
		least = min(least, j)
	}
	c.sorted = len(c.hi)
	if !c.stream || least < c.final {
		// A walk covers final candidates only; one came before them.
		c.nwalks, c.final = 0, min(c.final, least)
	}
}

// drop forgets the candidates with lo before from, and those with hi
// before it: of those by hi a bucket's walk at each of rates reads only
// the leftmost least walkV (room's walk spans every earlier candidate),
// which c.gone keeps. walkMin answers the leftmost whatever its blocks, so
// hiBase need not be one of Run's block bounds; but the first drop waits
// until it can drop past walkBlock candidates: room answers a refusal
// with at most walkBlock candidates before it by its linear loop, whose
// float rounding may pick another of equals than the walk, so a dropped
// key must never ask that (Run, which drops nothing, would loop).
func (c *cands) drop(from int64, rates []float64) {
	if i := sort.Search(len(c.lo), func(i int) bool { return c.lo[i] >= from }); i > 0 && i >= len(c.lo)/2 {
		c.lo = shrunk(c.lo[:copy(c.lo, c.lo[i:])])
		c.loBase += i
		c.nearLo = 0
	}
	j := sort.Search(len(c.hi), func(i int) bool { return c.hi[i] >= from })
	if j > 0 && j >= len(c.hi)/2 && c.hiBase+j > walkBlock {
		for _, rate := range rates {
			c.fold(c.hi[:j], rate)
		}
		c.hi = shrunk(c.hi[:copy(c.hi, c.hi[j:])])
		c.hiBase += j
		c.sorted -= j
		c.final = max(0, c.final-j)
		c.nearHi = 0
		c.nwalks = 0
		for i := range c.walks {
			if w := &c.walks[i]; cap(w.v) > 2*len(c.hi)+32 {
				*w = walkMin{} // rebuilt at the candidates' size
			}
		}
	}
}

// shrunk is b, in a buffer of about its size when b's has more than twice
// that: a key's buffers grow to its busiest window (and, before its first
// drop, to more than walkBlock candidates) and would keep that size over
// a long run of many keys (10^5 keys: 169 MB more at 10^8 events).
func shrunk[T any](b []T) []T {
	if cap(b) > 2*len(b)+32 {
		return slices.Clone(b)
	}
	return b
}

// fold adds hi, the next candidates by hi from hiBase on, to c.gone at
// rate: those already there are to their left and win ties.
func (c *cands) fold(hi []int64, rate float64) {
	least := c.goneAt(rate)
	if least == nil {
		c.gone = append(c.gone, walkLeast{rate: rate, j: -1})
		least = &c.gone[len(c.gone)-1]
	}
	for i, h := range hi {
		if v := walkV(c.hiBase+i, h, rate); least.j < 0 || v < least.v {
			*least = walkLeast{rate: rate, j: c.hiBase + i, hi: h, v: v}
		}
	}
}

// settle judges the refusals waiting for the stream to pass their hi,
// now that it is at lo t.
func (us *underStream) settle(t int64) {
	for us.head < len(us.pending) && us.pending[us.head].r.hi < t {
		us.pending[us.head].k.u.finalize(t)
		us.judge(&us.pending[us.head])
		us.pending[us.head] = underPending{}
		us.head++
	}
	if us.head > 64 && us.head >= len(us.pending)/2 {
		us.pending = us.pending[:copy(us.pending, us.pending[us.head:])]
		us.head = 0
	}
}

// judge is computeUnder's judgement of one refusal.
func (us *underStream) judge(p *underPending) {
	ix, k := us.ix, p.k
	us.judged++
	w, v := ix.judgeRefusal(k.tier, &k.u, p.r)
	switch v {
	case refusalUndecided:
		us.undecided++
		return
	case refusalFine:
		return
	}
	w.id = p.id
	if v == refusalWrong && !ix.attribute(us, k.gid, k.tier, &w, &k.a) {
		us.unattributed++
	}
	if w.ambiguous {
		if len(k.held) == 0 {
			us.deferred = append(us.deferred, k)
		}
		k.held = append(k.held, underHeld{w: w, at: p.at})
		return
	}
	us.emit(k, w, p.at)
}

func (us *underStream) emit(k *underKey, w wrongRej, at uint64) {
	if w.self {
		us.selfKeys[k.name] = true
	}
	us.col.add(ordered{pass: 1, key: k.name, at: at, ev: underEvidence(us.ix.refusalEvidence(k.name, k.tier, w.id, w, ""), w.self)})
	if us.isolate && (w.self || len(w.sharedWith) > 0) {
		us.held = append(us.held, underHeld{w: w, at: at, key: k})
	}
}

// own, othersAdmitted, admittedOf and keyName make underStream the
// attrSource of its refusals.
func (us *underStream) own(gid int32) []rec      { return us.byGid[gid].recs }
func (us *underStream) keyName(gid int32) string { return us.names[gid] }

func (us *underStream) admWindow(from, to int64) []admRec {
	i := sort.Search(len(us.adm), func(i int) bool { return us.adm[i].r.lo >= from })
	j := i
	for j < len(us.adm) && us.adm[j].r.lo <= to {
		j++
	}
	return us.adm[i:j]
}

func (us *underStream) othersAdmitted(gid int32, from, to int64) ([]rec, map[int32]int) {
	var extra []rec
	seen := map[int32]int{}
	for _, x := range us.admWindow(from, to) {
		if x.gid != gid {
			extra = append(extra, x.r)
			seen[x.gid]++
		}
	}
	return extra, seen
}

func (us *underStream) admittedOf(gid int32, from, to int64) []rec {
	var out []rec
	for _, x := range us.admWindow(from, to) {
		if x.gid == gid && !x.r.fault {
			out = append(out, x.r)
		}
	}
	return out
}

// finish judges what waits for the end of the stream, once.
func (us *underStream) finish() {
	if us.settled {
		return
	}
	us.settled = true
	us.settle(math.MaxInt64)
	for _, k := range us.deferred {
		for _, h := range k.held {
			k.a.settle(&h.w)
			us.emit(k, h.w, h.at)
		}
		k.held = nil
	}
}

func (us *underStream) result() Result {
	if us.tolWhy != "" {
		what := "the requests of exempt keys"
		if us.candidates > 0 {
			what = plural(us.candidates, "refusal", "refusals")
		}
		return Result{Verdict: Unknown, Summary: fmt.Sprintf("not judged (%s to judge): %s", what, us.tolWhy), Figures: map[string]float64{}}
	}
	us.finish()
	exemptN, exemptRefused := 0, 0
	col := us.col
	col.items = slices.Clone(col.items)
	for _, k := range us.byGid {
		if k.ex == nil {
			continue
		}
		exemptN += k.ex.n
		if k.ex.refused > 0 {
			exemptRefused += k.ex.refused
			col.add(ordered{pass: 2, key: k.name, ev: k.ex.evidence(k.name, k.exempt)})
		}
	}
	keys := make([]string, 0, len(us.selfKeys))
	for key := range us.selfKeys {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	if len(keys) > 50 {
		keys = keys[:50]
	}
	judged := us.judged
	if !us.again {
		judged = us.candidates // none judged: the first pass found none
	}
	return underVerdict(col.collector(), judged, us.undecided, exemptN, exemptRefused, keys)
}

// isolation is checkIsolation's result from the stream.
func (us *underStream) isolation() Result {
	if us.tolWhy != "" && us.candidates > 0 {
		return Result{Verdict: Unknown, Summary: fmt.Sprintf("not judged (%s to attribute): %s", plural(us.candidates, "refusal", "refusals"), us.tolWhy), Figures: map[string]float64{}}
	}
	us.finish()
	iso := newIsolationTally()
	col := us.isoCol
	col.items = slices.Clone(col.items)
	for _, k := range us.byGid {
		if k.tier != nil {
			iso.addKey(k.tier, k.admitted)
		}
	}
	for _, h := range us.held {
		if iso.addWrong(h.key.name, h.w) {
			col.add(ordered{pass: 1, key: h.key.name, at: h.at, ev: sharedEvidence(us.ix.refusalEvidence(h.key.name, h.key.tier, h.w.id, h.w, sharedExtra(h.w)), h.w)})
		}
	}
	return iso.result(col.collector(), len(us.names), us.mismatch, us.unattributed)
}
