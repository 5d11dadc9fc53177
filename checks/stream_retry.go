package checks

import (
	"fmt"
	"math"
	"time"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// retryStream is checkRetryAfter as a stream, in two passes.
//
// What the in-memory check reads of the whole run is gathered by the
// first pass: the timing tolerance (declared, or sampled from every
// tolStep-th event in file order: the streamer must be told the number of
// events, Streamer.SetEvents), the calibrate bursts (calBurst per phase
// and key; their exact waits are known once the bursts are complete), the
// probe phases' errors (probeErrors: counts and the first error in the
// index's order, key then send order), and whether there is a refusal to
// judge at all. The second pass (Again asks for it when there is) judges
// each refusal as the in-memory check does — judgeAdvice at the refusal,
// judgeProbe at its probe — with, per key:
//
//   - the refusals waiting for their probe (the first later request of the
//     key, not a variant, sent at or after Recv + advice + slack), in a
//     heap by that time;
//   - the refusals whose probe came, waiting until the key's requests
//     pass the probe's hi (a possible consumer decided before it is a
//     conflict), in a heap by that hi;
//   - the latest hi of the key's possibly consuming requests so far and
//     their count: conflict's backward half is "some earlier possible
//     consumer's hi ≥ the refusal's lo" (the in-memory scan bounded by
//     maxLat finds exactly those), its forward half "a possible consumer
//     came after the refusal, other than the probe, with lo ≤ the probe's
//     hi" (a difference of counts).
//
// So the state is, per key, the refusals of the last longest advice plus
// one latency (an advice beyond longestNeed + 1 s + the tolerance is
// judged at once and not kept): at most the key's refusal rate × that
// time, whatever the run's length.
type retryStream struct {
	ix *index
	// tol is the default tolerance's sample (the Streamer's, shared).
	tol *tolSample
	// cal are the indices of the calibrate phases in ix.h.Phases, bursts
	// their requests per key.
	cal    []int
	bursts map[calKey]*calBurst
	// probes are the probe phases' names; probeN, probeErrs and the first
	// error (by key, then position in the key) probeErrors' answer.
	probes             map[string]bool
	probeN, probeErrs  int
	firstErr, firstKey string
	firstAt            uint64
	// candidates counts the refusals the second pass judges.
	candidates int
	// asked is set once Again asked needAgain, again when it said yes.
	asked, again bool
	// tolWhy says why the tolerance is not known ("" when it is).
	tolWhy string
	exact  map[int32]time.Duration
	tl     retryTally
	col    orderedCollector
}

type calKey struct {
	phase int
	key   string
}

// retryKey is what retry-after keeps of one key.
type retryKey struct {
	n, n2 uint64 // events of the key in the first and second pass
	rt    retryTier
	// maxHi is the latest hi of the key's possibly consuming requests so
	// far, cons their count.
	maxHi int64
	cons  uint64
	// waitProbe are the refusals waiting for their probe (by at),
	// waitEnd those waiting for the key to pass their probe's hi.
	waitProbe, waitEnd []*retryPending
}

// retryPending is a refusal of the second pass whose probe is not judged
// yet.
type retryPending struct {
	a    advised
	id   uint64
	recv int64
	at   uint64 // the refusal's position in its key (evidence order)
	back bool   // a possible consumer decided after the refusal's lo came before it
	cons uint64 // the key's possible consumers up to the refusal (then the probe) included
	// The probe, once it came.
	q       rec
	qID     uint64
	qSent   int64
	qStatus int
	// end is the heap's key: the advised time while waiting for the
	// probe, then the probe's hi.
	end  int64
	tier *policy.Tier
	key  string
}

func newRetryStream(ix *index) *retryStream {
	rs := &retryStream{ix: ix, bursts: map[calKey]*calBurst{}, probes: map[string]bool{}, tl: newRetryTally(), col: orderedCollector{max: ix.o.MaxEvidence}}
	for i, ph := range ix.h.Phases {
		switch ph.Kind {
		case "calibrate":
			rs.cal = append(rs.cal, i)
		case "probe":
			rs.probes[ph.Name] = true
		}
	}
	return rs
}

// declared reports whether the policy declares the timing tolerance (no
// sample needed).
func (rs *retryStream) declared() bool { return rs.ix.p.Tolerance.Timing.D() > 0 }

// add is the first pass.
func (rs *retryStream) add(e *history.Event, seq uint64, r rec, sk *streamKey) {
	k := &sk.retry
	pos := k.n
	k.n++
	if rs.ix.h.Run.NoHeaders {
		return
	}
	if len(rs.probes) > 0 && rs.probes[e.Phase] && !r.variant {
		rs.probeN++
		if r.out == history.Unknown {
			rs.probeErrs++
			if rs.probeErrs == 1 || e.Key < rs.firstKey || e.Key == rs.firstKey && pos < rs.firstAt {
				rs.firstErr, rs.firstKey, rs.firstAt = probeErrorOf(e), e.Key, pos
			}
		}
	}
	t := sk.tier
	if t == nil {
		return
	}
	for _, pi := range rs.cal {
		ph := &rs.ix.h.Phases[pi]
		if e.Phase != ph.Name || e.Intended != ph.Target {
			continue
		}
		b := rs.bursts[calKey{pi, e.Key}]
		if b == nil {
			b = &calBurst{}
			rs.bursts[calKey{pi, e.Key}] = b
		}
		r.idx = int32(seq)
		b.add(r)
	}
	if retryJudged(r) {
		rs.candidates++
	}
}

// needAgain reports, after the first pass, whether the refusals need the
// second; it settles what the first pass gathered (the tolerance, the
// calibrate bursts' exact waits).
func (rs *retryStream) needAgain(n uint64, keys map[string]*streamKey) bool {
	if rs.ix.h.Run.NoHeaders || rs.candidates == 0 {
		return false
	}
	ix := rs.ix
	tol, why := rs.tol.settle(ix, n)
	if why != "" {
		rs.tolWhy = why
		return false
	}
	ix.tol = tol
	for _, pi := range rs.cal {
		for ck, b := range rs.bursts {
			if ck.phase != pi {
				continue
			}
			if idx, w, ok := ix.calWait(b, keys[ck.key].tier); ok {
				if rs.exact == nil {
					rs.exact = map[int32]time.Duration{}
				}
				rs.exact[idx] = w
			}
		}
	}
	rs.bursts = nil
	return true
}

// addAgain is the second pass: every refusal judged as checkRetryAfter
// judges it.
func (rs *retryStream) addAgain(e *history.Event, seq uint64, r rec, sk *streamKey) {
	k := &sk.retry
	pos := k.n2
	k.n2++
	t := sk.tier
	if t == nil {
		return
	}
	if pos == 0 {
		k.rt, k.maxHi = rs.ix.newRetryTier(t), math.MinInt64
	}
	r.idx = int32(seq)
	if r.limit {
		r.ra = fastRetryAfter(e.RetryAfter)
	}
	consumer := k.rt.all || r.out != history.Rejected
	// The probes whose hi r's decision passed: nothing else of the key
	// consumed in between unless a possible consumer came after them.
	for len(k.waitEnd) > 0 && k.waitEnd[0].end < r.lo {
		p := popPending(&k.waitEnd)
		rs.probe(p, k.cons > p.cons)
	}
	// r is the probe of the refusals advised up to its lo.
	if !r.variant {
		for len(k.waitProbe) > 0 && k.waitProbe[0].end <= r.lo {
			p := popPending(&k.waitProbe)
			p.q, p.qID, p.qSent, p.qStatus = r, e.ID, e.Sent, e.Status
			if p.back || k.cons > p.cons || !promises(&p.a, &p.q) {
				// Decided now: a probe the advice promises nothing, or
				// a conflict: nothing to count.
				continue
			}
			p.cons = k.cons
			if consumer {
				p.cons++ // the probe itself
			}
			p.end = r.hi
			pushPending(&k.waitEnd, p)
		}
	}
	if retryJudged(r) {
		add := func(ev Evidence) { rs.col.add(ordered{pass: 1, key: e.Key, at: pos, ev: ev}) }
		var a advised
		if rs.ix.judgeAdvice(&rs.tl, e.Key, &k.rt, &r, e, rs.exact, add, &a) {
			p := &retryPending{a: a, id: e.ID, recv: e.Recv, at: pos, back: k.maxHi >= r.lo, cons: k.cons, end: a.at, tier: t, key: e.Key}
			if consumer {
				p.cons++ // the refusal itself
			}
			pushPending(&k.waitProbe, p)
		}
	}
	if consumer {
		k.cons++
		k.maxHi = max(k.maxHi, r.hi)
	}
}

// probe judges p by its probe, which it promises something; conflicts
// says whether another request of the key could have consumed in between.
func (rs *retryStream) probe(p *retryPending, conflicts bool) {
	if conflicts {
		return
	}
	if !rs.ix.judgeProbe(&rs.tl, &p.a, &p.q) {
		ev := unhonoured(p.key, p.tier, &p.a, &history.Event{ID: p.id, Recv: p.recv}, &history.Event{ID: p.qID, Sent: p.qSent, Status: p.qStatus})
		rs.col.add(ordered{pass: 1, key: p.key, at: p.at, ev: ev})
	}
}

func (rs *retryStream) result(keys map[string]*streamKey) Result {
	ix := rs.ix
	if ix.h.Run.NoHeaders {
		return retryNoHeaders(ix)
	}
	if rs.tolWhy != "" {
		return Result{Verdict: Unknown, Summary: fmt.Sprintf("not judged (%s to judge): %s", plural(rs.candidates, "refusal", "refusals"), rs.tolWhy), Figures: map[string]float64{}}
	}
	// The stream ended: the probes still in their window are judged with
	// what came, the refusals still waiting have no probe.
	for _, sk := range keys {
		k := &sk.retry
		for _, p := range k.waitEnd {
			rs.probe(p, k.cons > p.cons)
		}
		k.waitEnd, k.waitProbe = nil, nil
	}
	return ix.retryResult(&rs.tl, rs.col.collector(), func() (int, int, string) { return rs.probeN, rs.probeErrs, rs.firstErr })
}

// pushPending and popPending keep h a min-heap by end (then by the
// refusal's position, for a deterministic order).
func pushPending(h *[]*retryPending, p *retryPending) {
	*h = append(*h, p)
	xs := *h
	for i := len(xs) - 1; i > 0; {
		j := (i - 1) / 2
		if !lessPending(xs[i], xs[j]) {
			break
		}
		xs[i], xs[j] = xs[j], xs[i]
		i = j
	}
}

func popPending(h *[]*retryPending) *retryPending {
	xs := *h
	top := xs[0]
	n := len(xs) - 1
	xs[0] = xs[n]
	xs[n] = nil
	xs = xs[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && lessPending(xs[l], xs[m]) {
			m = l
		}
		if l+1 < n && lessPending(xs[l+1], xs[m]) {
			m = l + 1
		}
		if m == i {
			break
		}
		xs[i], xs[m] = xs[m], xs[i]
		i = m
	}
	*h = xs
	return top
}

func lessPending(a, b *retryPending) bool {
	return a.end < b.end || a.end == b.end && a.at < b.at
}
