package checks

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// failStream is checkFailMode as a stream. Its fault windows are records
// (history.ReadRecords gives them before the first event), so it knows
// from the start which events each part of the judgement reads:
//
//   - inside each store or rules-down fault window (sent at or after its
//     start, answered by its end; a window that never ended runs to the
//     end of the run), and in an external run the spans before and after
//     a store fault that show whether it took effect (faultTookEffect):
//     those events are kept (copied), and judged at the end by the
//     in-memory code (failMode.storeWindow, judgeRulesDown) on an index of
//     them alone — bounded by the windows' events, not by the run (an
//     external run's store fault that never ended keeps every event: its
//     reference span before it is as long as the fault);
//   - the recovery after each store fault that ended (its admissions from
//     the end plus the declared recovery to the next fault: possibly the
//     rest of the run) is judged as oversell is (oversellStream's
//     segments, screens and second pass over flagged segments only), one
//     stream per fault: state bounded as oversell's;
//   - the requests answered by a failure mode outside every fault
//     (judgeUninjected): per key with such a signature its count, span
//     and first ids; the span's other requests are counted in a second
//     pass, taken only when a signature was found.
//
// A run without faults (the common soak) keeps nothing per event: the
// uninjected signatures are looked for (a few field tests per event).
type failStream struct {
	ix *index
	u  uninjected
	// keep are the spans of send and answer times whose events are kept;
	// keepAll keeps every event.
	keep    []keepSpan
	keepAll bool
	kept    []keptEvent
	maxRecv int64
	recov   []*recoveryStream
	// sends: some decided answer carried a rate-limit header.
	sends bool
	backs []backState
	// fallbacks counts the uninjected_fallback figure.
	fallbacks int
	keys      map[string]*failKey
	// asked: Again was asked; spans: the second pass counts the
	// signatures' spans.
	asked, spans bool
	col          orderedCollector
}

// keepSpan: events sent at or after from and (closed) answered by to.
type keepSpan struct {
	from, to int64
	open     bool
}

// backState is, for a store fault that ended at end, the first decided
// request without X-RateLimit-Fallback sent after it (judgeUninjected's
// recovering spans).
type backState struct {
	f     history.Fault
	found bool
	back  int64
}

// recoveryStream judges the recovery after store fault fi.
type recoveryStream struct {
	fi          int
	from, until int64
	os          *oversellStream
	keys        map[string]*oversellKey
}

// sigAcc is one signature's requests of a key: count, span, first ids,
// and (second pass) the key's requests in the span.
type sigAcc struct {
	n           int
	lo, hi      int64
	first       firstIDs
	inSpan, adm int
}

func (a *sigAcc) add(r rec, id, seq uint64) {
	if a.n == 0 {
		a.lo, a.hi = r.lo, r.hi
	}
	a.n++
	a.lo, a.hi = min(a.lo, r.lo), max(a.hi, r.hi)
	a.first.add(r, id, seq, 1)
}

func (a *sigAcc) merge(o *sigAcc) {
	if o.n == 0 {
		return
	}
	if a.n == 0 {
		a.lo, a.hi = o.lo, o.hi
	}
	a.n += o.n
	a.lo, a.hi = min(a.lo, o.lo), max(a.hi, o.hi)
	a.first.merge(o.first)
}

// failKey is what fail-mode keeps of a key with an uninjected signature:
// open (admitted without headers, should the limiter send them), closed,
// and closedUnlessOpen (both: closed only if the limiter sends no
// headers); sig are the final signatures (open, closed) once known.
type failKey struct {
	open, closed, closedUnlessOpen sigAcc
	sig                            [2]*sigAcc
}

func newFailStream(ix *index) *failStream {
	fs := &failStream{ix: ix, u: newUninjected(ix), col: orderedCollector{max: ix.o.MaxEvidence}, keys: map[string]*failKey{}}
	external := ix.h.Run.Env == "external"
	for fi, f := range ix.h.Faults {
		store := f.Kind == "store-down" || f.Kind == "store-slow"
		if !store && f.Kind != "rules-down" {
			continue
		}
		fs.keep = append(fs.keep, keepSpan{from: f.Start, to: f.End, open: f.End == 0})
		if !store {
			continue
		}
		if external {
			if f.End == 0 {
				fs.keepAll = true
			} else if span := f.End - f.Start; span > 0 {
				after := max(f.End, f.Cleared) + recoveryOf(ix.p)
				fs.keep = append(fs.keep, keepSpan{from: max(0, f.Start-span), to: f.Start}, keepSpan{from: after, to: after + span})
			}
		}
		if f.End != 0 {
			from, until := recoverySpan(ix.h.Faults, fi, ix.p)
			os := newOversellStream(ix)
			os.pass = 2*fi + 1
			fault := f
			os.evidence = func(key string, ct *cert, idl []uint64, total int) Evidence {
				return ix.recoveryEvidence(key, ct, fault, idl, total)
			}
			fs.recov = append(fs.recov, &recoveryStream{fi: fi, from: from, until: until, os: os, keys: map[string]*oversellKey{}})
			fs.backs = append(fs.backs, backState{f: f})
		}
	}
	return fs
}

func (fs *failStream) add(e *history.Event, seq uint64, r rec, t *policy.Tier) {
	fs.maxRecv = max(fs.maxRecv, e.Recv)
	if fs.keepAll || fs.kept1(e) {
		fs.kept = append(fs.kept, keptEvent{e: *e, seq: seq})
	}
	for _, rc := range fs.recov {
		rc.add(e, seq, r, t, false)
	}
	if fs.u.declared && !fs.sends && r.out != history.Unknown && headered(e) {
		fs.sends = true
	}
	for i := range fs.backs {
		if b := &fs.backs[i]; !b.found && backAfter(b.f, e, r) {
			b.found, b.back = true, r.lo
		}
	}
	if r.variant || len(fs.ix.h.Faults) > 0 && fs.ix.inFault(r.lo, r.hi) {
		return
	}
	// Whether the limiter sends headers on its answers is known at the
	// end: an admission without them is kept as open and, should it be
	// closed too, as closed unless open.
	switch fs.u.kind(e, r, true) {
	case uninjectedFallback:
		if !fs.afterInjected(r) {
			fs.fallbacks++
		}
	case uninjectedOpen:
		k := fs.key(e.Key)
		k.open.add(r, e.ID, seq)
		if fs.u.closedStatus && isClosedStatus(fs.ix.p, e.Status) {
			k.closedUnlessOpen.add(r, e.ID, seq)
		}
	case uninjectedClosed:
		fs.key(e.Key).closed.add(r, e.ID, seq)
	}
}

// kept1 reports whether a fault window (or its reference spans) reads e.
func (fs *failStream) kept1(e *history.Event) bool {
	for _, k := range fs.keep {
		if e.Sent >= k.from && (k.open || e.Recv <= k.to) {
			return true
		}
	}
	return false
}

// afterInjected is judgeUninjected's: r was sent after an injected store
// fault ended and before the limiter decided again without saying its
// failure mode did. Events come by send time: a fault whose first such
// decision was not seen yet has it at r.lo or later.
func (fs *failStream) afterInjected(r rec) bool {
	for _, b := range fs.backs {
		if r.lo >= b.f.End && (!b.found || r.lo <= b.back) {
			return true
		}
	}
	return false
}

func (fs *failStream) key(key string) *failKey {
	k := fs.keys[key]
	if k == nil {
		k = &failKey{}
		fs.keys[key] = k
	}
	return k
}

func (rc *recoveryStream) add(e *history.Event, seq uint64, r rec, t *policy.Tier, again bool) {
	if e.Sent < rc.from {
		return
	}
	rc.os.tick(r.lo)
	if t == nil || !recoveryAdmission(e, r, rc.from, rc.until) {
		return
	}
	k := rc.keys[e.Key]
	if again {
		if k != nil {
			rc.os.collect(k, e.ID, seq, r, 1)
		}
		return
	}
	if k == nil {
		k = rc.os.newKey(e.Key, t)
		rc.keys[e.Key] = k
	}
	rc.os.admit(k, r, 1) // each admission once, as judgeRecovery
}

// needAgain ends the first pass: the recoveries' flagged segments and
// the signatures' spans need a second.
func (fs *failStream) needAgain() bool {
	if fs.asked {
		return false
	}
	fs.asked = true
	again := false
	for _, rc := range fs.recov {
		rc.os.again = rc.os.needAgain()
		again = again || rc.os.again
	}
	for _, k := range fs.keys {
		if fs.sends {
			k.sig[0] = &k.open
		} else {
			k.closed.merge(&k.closedUnlessOpen)
		}
		k.sig[1] = &k.closed
		for i, s := range k.sig {
			if s != nil && s.n == 0 {
				k.sig[i] = nil
			}
		}
		fs.spans = fs.spans || k.sig[0] != nil || k.sig[1] != nil
	}
	return again || fs.spans
}

func (fs *failStream) addAgain(e *history.Event, seq uint64, r rec, t *policy.Tier) {
	for _, rc := range fs.recov {
		if rc.os.again {
			rc.add(e, seq, r, t, true)
		}
	}
	if !fs.spans || r.variant {
		return
	}
	k := fs.keys[e.Key]
	if k == nil {
		return
	}
	kind := uninjectedNone
	if len(fs.ix.h.Faults) == 0 || !fs.ix.inFault(r.lo, r.hi) {
		kind = fs.u.kind(e, r, fs.sends)
	}
	for i, s := range k.sig {
		if s == nil || r.lo < s.lo || r.hi > s.hi {
			continue
		}
		s.inSpan++
		if r.out == history.Admitted && kind != uninjectedOpen+i {
			s.adm++
		}
	}
}

func (fs *failStream) result(n, n2 uint64) Result {
	if !fs.asked && fs.needAgain() || n2 != n && (fs.spans || slices.ContainsFunc(fs.recov, func(rc *recoveryStream) bool { return rc.os.again })) {
		return Result{Verdict: Unknown, Summary: fmt.Sprintf("not judged: the recoveries after the faults or the failures outside them needed a second pass over the events (Streamer.Again), which did not see every event (%d of %d)", n2, n), Figures: map[string]float64{}}
	}
	sub := fs.ix.subIndex(fs.kept)
	sub.maxRecv = fs.maxRecv
	fs.kept = nil
	fm := newFailMode(sub)
	var sc scratch
	all := func(pass int, add func(col *collector)) {
		col := &collector{max: math.MaxInt}
		add(col)
		for i, ev := range col.items {
			fs.col.add(ordered{pass: pass, at: uint64(i), ev: ev})
		}
	}
	F := len(fs.ix.h.Faults)
	for fi, fault := range fs.ix.h.Faults {
		took := false
		all(2*fi, func(col *collector) { took = fm.storeWindow(fault, col, &sc) })
		if !took || fault.End == 0 {
			continue
		}
		for _, rc := range fs.recov {
			if rc.fi != fi {
				continue
			}
			rc.os.finish()
			for _, o := range rc.os.col.items {
				fs.col.add(o)
			}
			fs.col.total += rc.os.col.total - len(rc.os.col.items)
		}
	}
	rulesDown := 0
	all(2*F, func(col *collector) { rulesDown = judgeRulesDown(sub, col, fm.figs, &sc) })
	if fs.fallbacks > 0 {
		fm.figs["uninjected_fallback"] = float64(fs.fallbacks)
	}
	keys := make([]string, 0, len(fs.keys))
	for key := range fs.keys {
		keys = append(keys, key)
	}
	slices.SortFunc(keys, cmp.Compare)
	uninj := 0
	for _, key := range keys {
		k := fs.keys[key]
		for sig, s := range k.sig {
			if s == nil {
				continue
			}
			uninj += s.n
			idl, total := s.first.ids(func(rec) int { return 1 }, s.n)
			fs.col.add(ordered{pass: 2*F + 1, key: key, sub: uint64(sig), ev: fs.u.evidence(fm.figs, key, sig, s.n, s.lo, s.hi, idl, total, s.inSpan, s.adm)})
		}
	}
	return fm.result(fs.col.collector(), rulesDown, uninj)
}
