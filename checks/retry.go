package checks

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/rlverify/rlverify/headers"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

const docRetry = "Every 429 carries a valid Retry-After (delay-seconds, or an HTTP-date not in the past), declared or not; advice longer than anything the declared policy can require (a full refill K/r for buckets, a whole window — two for a sliding counter — plus 1 s of rounding and the timing tolerance) is a defect, and so is advice after a refusal whose state is known (a calibrate burst from a whole quota that admitted exactly the quota) longer than the exact wait plus 1 s of rounding and the tolerance; advice longer than one request's wait (1/r, W) but within that is the key's state (see under-admission); and a request sent after the advised wait, when nothing else of the key could have consumed in between, is admitted. After a declared limit change, the changed tier is judged by the changed limits from each key's refill from empty under them, as under-admission does."

// maxWait is the longest a single request can have to wait under tier t.
func maxWait(t *policy.Tier) time.Duration {
	var w time.Duration
	for _, l := range t.Limits {
		d := l.W()
		if l.Algorithm.Bucketed() {
			d = time.Duration(float64(time.Second) / l.R())
		}
		w = max(w, d)
	}
	return w
}

// longestNeed is the longest wait any state of tier t can require under
// the declared policy: a full refill (K/r) for buckets, a whole window for
// windows (two for a sliding counter, whose previous window still weighs).
// Advice beyond it plus rounding and the timing tolerance can never be
// right, whatever the key did.
func longestNeed(t *policy.Tier) time.Duration {
	var w time.Duration
	for _, l := range t.Limits {
		d := l.W()
		switch {
		case l.Algorithm.Bucketed():
			d = time.Duration(float64(l.K()) / l.R() * float64(time.Second))
		case l.Algorithm == policy.SlidingCounter:
			d = 2 * l.W()
		}
		w = max(w, d)
	}
	return w
}

// checkRetryAfter is O(N) plus, per refusal, a galloping search for the
// first request after the advised time (O(log d) for d requests in
// between) and a scan of the requests in flight with it. The streaming
// path (retryStream) judges each refusal by the same two steps:
// judgeAdvice at the refusal, judgeProbe at its probe.
func checkRetryAfter(ix *index) Result {
	if ix.h.Run.NoHeaders {
		return retryNoHeaders(ix)
	}
	col := ix.collector()
	tl := newRetryTally()
	var next []int32 // per position: index of the next possibly-consuming rec
	exact := ix.calibrateWaits()
	for gi := range ix.groups {
		g := &ix.groups[gi]
		if g.tier == nil {
			continue
		}
		rt := ix.newRetryTier(g.tier)
		next = next[:0]
		nextInit := false
		for pos, r := range g.recs {
			if !retryJudged(r) {
				continue
			}
			// The record usually holds the Retry-After and Recv: reading
			// the (large, randomly placed) event is left to the rare cases
			// (judgeAdvice reads it when given none).
			var a advised
			if !ix.judgeAdvice(&tl, g.key, &rt, &r, nil, exact, col.add, &a) {
				continue
			}
			// Honoured: the first later request sent after the advice.
			qi := max(pos+1, searchLo(g.recs, pos, a.at))
			for qi < len(g.recs) && g.recs[qi].variant {
				qi++
			}
			if qi >= len(g.recs) {
				continue
			}
			q := g.recs[qi]
			if !promises(&a, &q) {
				continue
			}
			if !nextInit {
				next = nextCands(next, g.recs, rt.all)
				nextInit = true
			}
			if conflict(g.recs, next, pos, qi, ix.maxLat, rt.all) {
				continue
			}
			if !ix.judgeProbe(&tl, &a, &q) {
				col.add(unhonoured(g.key, g.tier, &a, ix.ev(r), ix.ev(q)))
			}
		}
	}
	return ix.retryResult(&tl, col, ix.probeErrors)
}

// retryNoHeaders is retry-after's result on a history without headers.
func retryNoHeaders(ix *index) Result {
	return Result{Verdict: Skip, Summary: "the history keeps no response headers, so no Retry-After can be read (" + ix.h.Run.Env + ")"}
}

// retryJudged reports whether r is a refusal retry-after judges: a
// refusal by the limit itself, of the plain key, outside faults.
func retryJudged(r rec) bool {
	return r.out == history.Rejected && !r.variant && r.limit && !r.fault
}

// countsRejected reports whether a limit of t counts refused requests:
// then every request of the key may have consumed.
func countsRejected(t *policy.Tier) bool {
	for _, l := range t.Limits {
		if l.CountsRejected() {
			return true
		}
	}
	return false
}

// retryTier is what retry-after judges a tier's refusals by.
type retryTier struct {
	t *policy.Tier
	// mw is the longest one request waits (maxWait), absurd the longest
	// advice any state can need (longestNeed, plus 1s and the tolerance).
	mw, absurd time.Duration
	minK       int64 // minCount
	all        bool  // countsRejected
}

func (ix *index) newRetryTier(t *policy.Tier) retryTier {
	return retryTier{t: t, mw: maxWait(t), absurd: longestNeed(t) + time.Second + time.Duration(ix.tol), minK: minCount(t), all: countsRejected(t)}
}

// retryTally is what retry-after counts, on either path.
type retryTally struct {
	rejections, missing, invalid, tooLong, absurdN, probed, honoured, early int
	beyondExact, beyondAny                                                  int
	maxErr                                                                  float64
}

func newRetryTally() retryTally { return retryTally{maxErr: math.Inf(-1)} }

// advised is a refusal whose advice is to be tried: its probe is the
// first later request of the key, not a variant, with lo ≥ at.
type advised struct {
	r  rec
	d  time.Duration
	at int64
}

// retryEvidence is the evidence against refusal r of key.
func retryEvidence(key string, t *policy.Tier, r rec, bound, obs float64, idl []uint64, format string, args ...any) Evidence {
	return Evidence{Key: key, Limit: limitNames(t), From: r.lo, To: r.hi, Bound: bound, Observed: obs,
		RequestIDs: idl, TotalIDs: len(idl), Message: fmt.Sprintf(format, args...)}
}

// judgeAdvice judges refusal r of key (tier rt; retryJudged) on its own:
// it counts it into tl, adds (add) the evidence of a missing, invalid or
// impossible advice, and reports the advice to try against its probe (ok).
// e is r's event (nil: read from the index when needed); exact are the
// calibrate bursts' exact waits, by rec.idx (calibrateWaits). The advice is
// written to a.
func (ix *index) judgeAdvice(tl *retryTally, key string, rt *retryTier, rp *rec, e *history.Event, exact map[int32]time.Duration, add func(Evidence), a *advised) bool {
	t, r := rt.t, rp
	if int64(r.tokens()) > rt.minK {
		// A weighted request asking for more than a limit ever holds: no
		// wait admits it, so no advice is owed.
		tl.beyondAny++
		return false
	}
	tl.rejections++
	var d time.Duration
	var recv int64
	switch {
	case r.ra == raMissing:
		tl.missing++
		add(noAdvice(key, t, r, ix.evOf(e, r)))
		return false
	case r.ra >= raBase && r.hi != r.lo:
		// hi = Recv + slack unless it was clamped to lo.
		d, recv = time.Duration(r.ra-raBase)*time.Second, r.hi-ix.slack
	default:
		e := ix.evOf(e, r)
		if e.RetryAfter == "" {
			tl.missing++
			add(noAdvice(key, t, r, e))
			return false
		}
		var err error
		d, err = headers.ParseRetryAfter(e.RetryAfter, ix.h.Wall(e.Recv))
		if err != nil {
			tl.invalid++
			m := retryEvidence(key, t, *r, 0, 0, []uint64{e.ID}, "request %d of key %s: %v", e.ID, key, err)
			m.Cause = CauseInvalidHeader
			add(m)
			return false
		}
		recv = e.Recv
	}
	mw := rt.mw
	tl.maxErr = math.Max(tl.maxErr, (d - mw).Seconds())
	if d > mw+time.Second {
		// Longer than one request ever needs: the key's state was
		// wrong (evidence for under-admission), not the advice.
		tl.tooLong++
	}
	if absurd := rt.absurd; d > absurd {
		// Longer than any state of the declared policy can need: the
		// advice itself is wrong (a refusal under-admission proves wrong
		// on the key explains it).
		tl.absurdN++
		e := ix.evOf(e, r)
		add(retryEvidence(key, t, *r, absurd.Seconds(), d.Seconds(), []uint64{e.ID}, "request %d of key %s was told to retry after %s; nothing the declared policy can require takes longer than %s (%s, plus 1s of rounding and the timing tolerance %s)",
			e.ID, key, fmtDur(d), fmtDur(absurd), describeNeed(t), fmtDur(time.Duration(ix.tol))))
		return false
	}
	if want, ok := exact[r.idx]; ok && d > want+time.Second+time.Duration(ix.tol) {
		// From a whole quota (a calibrate burst that admitted exactly the
		// quota) the state is known: advice beyond the exact wait is the
		// advice's own defect.
		tl.beyondExact++
		e := ix.evOf(e, r)
		add(retryEvidence(key, t, *r, want.Seconds(), d.Seconds(), []uint64{e.ID}, "request %d of key %s was told to retry after %s; it was refused from a whole quota after exactly the declared quota was admitted, so the exact wait was at most %s (plus 1s of rounding and the timing tolerance %s)",
			e.ID, key, fmtDur(d), fmtDur(want), fmtDur(time.Duration(ix.tol))))
		return false
	}
	// lo_q = Sent_q − slack ≥ Recv + d  ⇔  Sent_q ≥ Recv + d + slack
	*a = advised{r: *r, d: d, at: recv + int64(d)}
	return true
}

// evOf is e, or when nil the event of r in the index.
func (ix *index) evOf(e *history.Event, r *rec) *history.Event {
	if e == nil {
		return ix.ev(*r)
	}
	return e
}

// noAdvice is the evidence of refusal r (event e) of key without
// Retry-After: a refusal without usable advice is a defect whatever the
// policy says it sends (a user who accepts that turns the check off:
// checks_off).
func noAdvice(key string, t *policy.Tier, r *rec, e *history.Event) Evidence {
	m := retryEvidence(key, t, *r, 0, 0, []uint64{e.ID}, "request %d of key %s got %d without Retry-After", e.ID, key, e.Status)
	m.Cause = CauseMissingHeader
	return m
}

// promises reports whether advice a promises anything to its probe q
// (the first later request of the key, not a variant, with lo ≥ a.at):
// not to a request decided by the failure mode, nor to one asking for
// more tokens.
func promises(a *advised, q *rec) bool {
	// Weighted requests: advice for n tokens promises nothing to a
	// request asking for more.
	return !q.fault && q.tokens() <= max(a.r.tokens(), 1)
}

// judgeProbe judges advice a by its probe q, which it promises something
// (promises) and which no other request of the key could have consumed
// before (conflict): false when the probe was refused, the advice broken
// (its evidence: unhonoured).
func (ix *index) judgeProbe(tl *retryTally, a *advised, q *rec) bool {
	if q.out == history.Unknown {
		return true
	}
	if q.out == history.Rejected && q.lo < a.at+ix.tol {
		// Within the timing tolerance of the advice: a conservative
		// guard, not a broken promise.
		tl.early++
		return true
	}
	tl.probed++
	if q.out == history.Admitted {
		tl.honoured++
	}
	return q.out == history.Admitted
}

// unhonoured is the evidence of advice a broken: e is its refusal, qe the
// probe refused after waiting as advised.
func unhonoured(key string, t *policy.Tier, a *advised, e, qe *history.Event) Evidence {
	return retryEvidence(key, t, a.r, 1, 0, []uint64{e.ID, qe.ID},
		"request %d of key %s was told to retry after %s; request %d, sent %s after that and with nothing else of the key decided in between, was rejected too (status %d)",
		e.ID, key, a.d, qe.ID, fmtDur(time.Duration(qe.Sent-e.Recv-int64(a.d))), qe.Status)
}

// retryResult is retry-after's result from its counts and evidence;
// probeErrors counts the probe phases' requests and errors (read only
// when nothing was probed and nothing failed).
func (ix *index) retryResult(tl *retryTally, col *collector, probeErrors func() (n, errs int, first string)) Result {
	figs := map[string]float64{"rejections": float64(tl.rejections), "missing": float64(tl.missing), "invalid": float64(tl.invalid),
		"too_long": float64(tl.tooLong), "beyond_any_need": float64(tl.absurdN), "probed": float64(tl.probed), "honoured": float64(tl.honoured)}
	if tl.beyondAny > 0 {
		figs["beyond_capacity_not_judged"] = float64(tl.beyondAny)
	}
	if tl.early > 0 {
		figs["refused_within_tolerance"] = float64(tl.early)
	}
	if tl.beyondExact > 0 {
		figs["beyond_exact_wait"] = float64(tl.beyondExact)
	}
	if !math.IsInf(tl.maxErr, -1) {
		figs["retry_after_max_error_s"] = tl.maxErr
	}
	rejections, missing, invalid, probed, honoured, tooLong := tl.rejections, tl.missing, tl.invalid, tl.probed, tl.honoured, tl.tooLong
	if rejections == 0 {
		return col.result(Skip, "no refusals to judge", figs, "")
	}
	// Probes the plan aimed at the advice (probe phases) that all ended in
	// errors tried nothing: the advice's property is untested, not kept.
	staged := ix.probeStaged()
	stagedNote := ""
	if staged > 0 {
		figs["probe_staged_s"] = staged.Seconds()
		stagedNote = fmt.Sprintf("each probe was staged (connected, all but its last byte written) at most %s before its send time", fmtDur(staged))
	}
	if probed == 0 && col.total == 0 {
		if n, errs, first := probeErrors(); n > 0 && errs == n {
			figs["probe_errors"] = float64(errs)
			why := ""
			if staged > 0 {
				why = "; " + stagedNote + ", and a server that times out a request's header sooner answers it 400"
			}
			return col.result(Unknown, fmt.Sprintf("%d of %s carried a valid Retry-After, but all %s aimed at the advice ended in an error (%s), so whether a client that waits as advised is served was not tested%s", rejections-missing-invalid, plural(rejections, "refusal", "refusals"), plural(n, "probe", "probes"), first, why), figs, "")
		}
	}
	valid := rejections - missing - invalid
	sum := fmt.Sprintf("%d of %s carried a valid Retry-After", valid, plural(rejections, "refusal", "refusals"))
	switch {
	case probed > 0:
		sum += fmt.Sprintf("; %d of %d followed at the advised time (nothing else of the key in between) were admitted", honoured, probed)
	default:
		sum += "; none was followed at its advised time with nothing else of the key in between, so the advice itself was not tried"
	}
	if staged > 0 {
		sum += "; " + stagedNote
	}
	if tooLong > 0 {
		sum += fmt.Sprintf("; %d advised longer than the policy ever needs (the key's state, see under-admission)", tooLong)
	}
	return col.result(Pass, sum, figs,
		fmt.Sprintf("%s with missing, invalid or unhonoured Retry-After", plural(col.total, "refusal", "refusals")))
}

// nextCands fills next[i] with the index of the first rec at or after i that
// could have consumed (admitted or unknown, variants included; any request
// when all is set).
func nextCands(next []int32, rs []rec, all bool) []int32 {
	next = slices.Grow(next[:0], len(rs))[:len(rs)]
	n := int32(len(rs))
	for i := len(rs) - 1; i >= 0; i-- {
		if all || rs[i].out != history.Rejected {
			n = int32(i)
		}
		next[i] = n
	}
	return next
}

// conflict reports whether some possibly-consuming request other than rs[q]
// could have been decided inside [rs[p].lo, rs[q].hi].
func conflict(rs []rec, next []int32, p, q int, maxLat int64, all bool) bool {
	lo, hi := rs[p].lo, rs[q].hi
	// Earlier in send order but possibly decided after lo.
	for i := p - 1; i >= 0 && rs[i].lo >= lo-maxLat; i-- {
		if (all || rs[i].out != history.Rejected) && rs[i].hi >= lo {
			return true
		}
	}
	i := int(next[p])
	if i == p {
		// rs[p] itself (a possible consumer only when all is set).
		i = len(rs)
		if p+1 < len(rs) {
			i = int(next[p+1])
		}
	}
	for i < len(rs) && rs[i].lo <= hi {
		if i != q {
			return true
		}
		if i+1 >= len(rs) {
			break
		}
		i = int(next[i+1])
	}
	return false
}

// describeNeed names what longestNeed measured: "a full refill of 10 at 5/s
// takes 2s".
func describeNeed(t *policy.Tier) string {
	var parts []string
	for _, l := range t.Limits {
		switch {
		case l.Algorithm.Bucketed():
			parts = append(parts, fmt.Sprintf("a full refill of %s takes %s", l.Describe(), fmtDur(time.Duration(float64(l.K())/l.R()*float64(time.Second)))))
		case l.Algorithm == policy.SlidingCounter:
			parts = append(parts, fmt.Sprintf("two windows of %s", l.Describe()))
		default:
			parts = append(parts, fmt.Sprintf("a whole window of %s", l.Describe()))
		}
	}
	return strings.Join(parts, "; ")
}

// probeErrors counts the requests of the run's probe phases and how many of
// them ended in an error, with the first error's description.
func (ix *index) probeErrors() (n, errs int, first string) {
	probes := map[string]bool{}
	for _, ph := range ix.h.Phases {
		if ph.Kind == "probe" {
			probes[ph.Name] = true
		}
	}
	if len(probes) == 0 {
		return 0, 0, ""
	}
	for _, r := range ix.recs {
		e := ix.ev(r)
		if !probes[e.Phase] || r.variant {
			continue
		}
		n++
		if r.out == history.Unknown {
			errs++
			if first == "" {
				first = probeErrorOf(e)
			}
		}
	}
	return n, errs, first
}

// probeErrorOf describes the error of probe e.
func probeErrorOf(e *history.Event) string {
	s := fmt.Sprintf("status %d", e.Status)
	if e.Err != "" {
		s += ": " + e.Err
	}
	return s
}

// probeStaged is the longest a request of the run's probe phases was staged
// before its send time (0: none was staged).
func (ix *index) probeStaged() time.Duration {
	var d int64
	for _, ph := range ix.h.Phases {
		if ph.Kind == "probe" {
			d = max(d, ph.Staged)
		}
	}
	return time.Duration(d)
}

// minCount is the smallest limit count (K or N) of t: the most tokens a
// request can ever be granted at once.
func minCount(t *policy.Tier) int64 {
	k := t.Limits[0].Count
	for _, l := range t.Limits[1:] {
		k = min(k, l.Count)
	}
	return k
}
