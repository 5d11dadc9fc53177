package checks

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

const docFailMode = "While the store is down (or slower than the store timeout, or stalled), requests entirely inside the fault window behave as the declared mode says (open: admitted; closed: 503 with Retry-After or 429; local: per key and instance within LocalShare·(K + r·span); queue: answered within QueueWait + StoreTimeout + 100ms), are decided within StoreTimeout + 250ms, and from the policy's declared recovery time (failure.recovery, default 1 s) after the store is back the envelope holds again from a full bucket. While the rule source is down (rules-down), the service applies its conservative defaults: it still admits, and every key stays within the envelope of the policy's rules_fallback tier. Outside every injected fault, a limiter that fails on its own (its store failing under load) is a finding too, with its signature as evidence: admissions without the rate-limit headers its other answers carry, or (fail-closed) the closed status, unless the target says so with X-RateLimit-Fallback (counted in a figure). A policy without a failure section declares no mode: a fault's behaviour is then measured, not judged (unknown)."

// Margins on the declared timeouts, for scheduling and loopback noise.
const (
	timeoutMargin = 250 * time.Millisecond
	queueMargin   = 100 * time.Millisecond
)

// checkFailMode is O(F·N) for F fault windows (each scans the events for
// those it covers), plus oversell's cost on the admissions made during
// faults and a sort of their latencies.
func checkFailMode(ix *index) Result {
	col := ix.collector()
	fm := newFailMode(ix)
	var sc scratch
	for fi, fault := range ix.h.Faults {
		if fm.storeWindow(fault, col, &sc) && fault.End != 0 {
			ix.judgeRecovery(fi, fault, col, &sc)
		}
	}
	n := judgeRulesDown(ix, col, fm.figs, &sc)
	uninjected := judgeUninjected(ix, col, fm.figs)
	return fm.result(col, n, uninjected)
}

// failMode is what fail-mode gathers over the fault windows, in memory
// (checkFailMode) and on the stream (failStream) alike.
type failMode struct {
	ix         *index
	figs       map[string]float64
	n          int // store fault windows
	unverified []string
}

func newFailMode(ix *index) *failMode {
	return &failMode{ix: ix, figs: map[string]float64{}}
}

// storeWindow judges the requests inside one fault window, if it is a
// store fault: latency, the declared mode, the local fallback's share. It
// reports whether the fault is one whose recovery is judged next (a store
// fault shown to have taken effect). It reads the events in the window
// (and, in an external run, those of the span before or after it:
// faultTookEffect).
func (fm *failMode) storeWindow(fault history.Fault, col *collector, sc *scratch) bool {
	ix, figs := fm.ix, fm.figs
	f := ix.p.Failure
	if fault.Kind != "store-down" && fault.Kind != "store-slow" {
		return false
	}
	fm.n++
	n := fm.n
	end := fault.End
	if end == 0 {
		end = ix.maxRecv
	}
	if ok, why := ix.faultTookEffect(fault, fault.Start, end); !ok {
		// Nothing here is evidence about the failure mode.
		fm.unverified = append(fm.unverified, fmt.Sprintf("%s %s–%s: %s", fault.Kind, fmtDur(time.Duration(fault.Start)), fmtDur(time.Duration(end)), why))
		figs[fmt.Sprintf("fault%d_unverified", n)] = 1
		return false
	}
	// A slow store that still answers within the timeout is not a failure:
	// only the latency bound applies then.
	modeApplies := fault.Kind == "store-down"
	if fault.Kind == "store-slow" {
		if fault.Param == "stall" { // nothing gets through
			modeApplies = true
		} else if d, err := policy.ParseDuration(fault.Param); err == nil && d > f.StoreTimeout.D() {
			modeApplies = true
		}
	}
	pre := fmt.Sprintf("fault%d_", n)
	var adm, rej, errs int
	var lats []int64
	latBound := f.StoreTimeout.D() + timeoutMargin
	if f.Mode == policy.FailQueue {
		latBound = f.QueueWait.D() + f.StoreTimeout.D() + queueMargin
	}
	type ki struct {
		g    *group
		inst int
	}
	local := map[ki][]rec{}
	for gi := range ix.groups {
		g := &ix.groups[gi]
		for _, r := range g.recs {
			e := ix.ev(r)
			if e.Sent < fault.Start || e.Recv > end {
				continue
			}
			lat := e.Recv - e.Sent
			lats = append(lats, lat)
			bad := func(format string, args ...any) {
				col.add(Evidence{Key: g.key, From: fault.Start, To: end, RequestIDs: []uint64{e.ID}, TotalIDs: 1,
					Message: fmt.Sprintf("%s %s–%s (mode %s): request %d of key %s ", fault.Kind, fmtDur(time.Duration(fault.Start)), fmtDur(time.Duration(end)), f.Mode, e.ID, g.key) + fmt.Sprintf(format, args...)})
			}
			switch r.out {
			case history.Admitted:
				adm++
			case history.Rejected:
				rej++
			default:
				errs++
			}
			if f.Undeclared {
				continue // nothing declared to judge it by: measured only
			}
			if time.Duration(lat) > latBound && (e.Status != 0 || f.Mode != policy.FailQueue) {
				bad("took %s, beyond the bound %s", fmtDur(time.Duration(lat)), latBound)
				continue
			}
			if !modeApplies {
				continue
			}
			switch f.Mode {
			case policy.FailOpen:
				if r.out == history.Rejected || (e.Status >= 400 && e.Status != 0) {
					bad("got status %d; fail-open must admit", e.Status)
				}
			case policy.FailClosed:
				if r.out == history.Admitted {
					bad("was admitted (status %d); fail-closed must reject with 503 + Retry-After or 429", e.Status)
				} else if e.Status == 503 && e.RetryAfter == "" && !ix.h.Run.NoHeaders {
					bad("got 503 without Retry-After")
				}
			case policy.FailLocal:
				if r.out == history.Admitted && g.tier != nil && !r.variant {
					k := ki{g, e.Instance}
					local[k] = append(local[k], r)
				}
			case policy.FailQueue:
				if r.out == history.Unknown && e.Status != 0 {
					bad("got status %d; a queued request must be admitted or rejected", e.Status)
				}
			}
		}
	}
	// Local fallback: per key and instance within LocalShare of the envelope.
	keys := make([]ki, 0, len(local))
	for k := range local {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b ki) int {
		if a.g.key != b.g.key {
			if a.g.key < b.g.key {
				return -1
			}
			return 1
		}
		return a.inst - b.inst
	})
	for _, k := range keys {
		rs := local[k]
		lo, hi := rs[0].lo, rs[0].hi
		for _, r := range rs {
			lo, hi = min(lo, r.lo), max(hi, r.hi)
		}
		for li := range k.g.tier.Limits {
			l := &k.g.tier.Limits[li]
			bound := f.LocalShare * maxIn(l, time.Duration(hi-lo))
			if float64(len(rs)) > bound+eps {
				ct := cert{limit: l, from: lo, to: hi, count: len(rs), bound: bound, recs: rs}
				col.add(ix.evidence(k.g.key, &ct, fmt.Sprintf("%s (mode local, share %g): key %s on instance %d admitted %d in %s; the local fallback allows %s",
					fault.Kind, f.LocalShare, k.g.key, k.inst, len(rs), fmtDur(time.Duration(hi-lo)), fmtF(bound))))
			}
		}
	}
	figs[pre+"admitted"] = float64(adm)
	figs[pre+"rejected"] = float64(rej)
	figs[pre+"errors"] = float64(errs)
	if len(lats) > 0 {
		slices.Sort(lats)
		figs[pre+"p99_latency_ms"] = float64(lats[(len(lats)*99)/100]) / 1e6
	}
	return true
}

// recoverySpan is the span of the recovery judged after the store fault
// fi of the run (its End set): the admissions sent from its end plus the
// declared recovery time and answered before the next fault begins.
func recoverySpan(faults []history.Fault, fi int, p *policy.Policy) (from, until int64) {
	fault := faults[fi]
	from = max(fault.End, fault.Cleared) + recoveryOf(p)
	until = int64(1<<62 - 1)
	for _, o := range faults[fi+1:] {
		if o.Start >= fault.End {
			until = min(until, o.Start)
		}
	}
	return from, until
}

// recoveryAdmission reports whether r (of e) is an admission the
// recovery after a fault judges, given the span's from and until.
func recoveryAdmission(e *history.Event, r rec, from, until int64) bool {
	// An admission the target marks as its failure mode's
	// (X-RateLimit-Fallback: its store still too slow) is judged by no
	// envelope, here as in oversell: counting it would call a store
	// failing under load "credit created by the downtime".
	return r.out == history.Admitted && !r.variant && e.Fallback == "" && e.Sent >= from && e.Recv < until
}

// recoveryEvidence is the evidence of certificate ct found after fault.
func (ix *index) recoveryEvidence(key string, ct *cert, fault history.Fault, idl []uint64, total int) Evidence {
	ev := Evidence{Key: key, Limit: ct.limit.Name, From: ct.from, To: ct.to, Bound: ct.bound, Observed: float64(ct.count), RequestIDs: idl, TotalIDs: total,
		Message: fmt.Sprintf("after the %s ended at %s: %s (credit created by the downtime?)", fault.Kind, fmtDur(time.Duration(fault.End)), certMessage(ct))}
	ev.Cause, ev.FaultFrom = CauseAfterFault, fault.Start
	return ev
}

// judgeRecovery judges, after the store fault fi (its End set), the
// envelope from a full bucket from its recovery to the next fault.
func (ix *index) judgeRecovery(fi int, fault history.Fault, col *collector, sc *scratch) {
	from, until := recoverySpan(ix.h.Faults, fi, ix.p)
	for gi := range ix.groups {
		g := &ix.groups[gi]
		if g.tier == nil {
			continue
		}
		sc.recs = sc.recs[:0]
		for _, r := range g.recs {
			if recoveryAdmission(ix.ev(r), r, from, until) {
				sc.recs = append(sc.recs, r)
			}
		}
		for li := range g.tier.Limits {
			st := ix.judgeLimit(sc.recs, &g.tier.Limits[li], sc)
			for ci := range st.certs {
				ct := &st.certs[ci]
				idl, total := ix.idList(ct.recs)
				col.add(ix.recoveryEvidence(g.key, ct, fault, idl, total))
			}
		}
	}
}

// result is fail-mode's verdict once every window was judged: n counts
// the rules-down windows, uninjected the requests answered by a failure
// mode outside every injected fault.
func (fm *failMode) result(col *collector, rulesDown, uninjected int) Result {
	ix, figs := fm.ix, fm.figs
	f := ix.p.Failure
	n := fm.n + rulesDown
	figs["faults"] = float64(n)
	mode := fmt.Sprintf("fail mode %q", f.Mode)
	if f.Undeclared {
		mode = "the failure mode (not declared)"
	}
	switch {
	case n == 0 && uninjected == 0 && figs["uninjected_fallback"] > 0:
		return col.result(Pass, fmt.Sprintf("no fault injected; the target said its failure mode decided %s (X-RateLimit-Fallback: its store slower than its timeout?), counted, not judged", plural(int(figs["uninjected_fallback"]), "request", "requests")), figs, "")
	case n == 0 && uninjected == 0:
		return col.result(Skip, "no store-down, store-slow or rules-down fault windows in this run, and no request answered by a failure mode outside one", figs, "")
	case n == 0:
		return col.result(Pass, "", figs, fmt.Sprintf("the limiter failed %s with no fault injected (%s)", uninjectedHow(figs), plural(col.total, "observation", "observations")))
	case f.Undeclared && col.total == 0 && ix.storeFaults() > 0:
		return col.result(Unknown, fmt.Sprintf("the policy declares no failure mode (no failure section): behaviour in %s measured, not judged (declare failure.mode open, closed, local or queue)", plural(n, "fault window", "fault windows")), figs, "")
	case len(fm.unverified) > 0 && col.total == 0:
		// A pass would claim the failure mode was seen: it was not.
		return col.result(Unknown, fmt.Sprintf("%s not shown to have taken effect, so the failure mode was not observed: %s",
			plural(len(fm.unverified), "fault window was", "fault windows were"), fm.unverified[0]), figs, "")
	}
	return col.result(Pass, fmt.Sprintf("behaviour in %s matched %s", plural(n, "fault window", "fault windows"), mode), figs,
		fmt.Sprintf("%s departed from %s", plural(col.total, "observation", "observations"), mode))
}

// storeFaults counts the store fault windows of the run.
func (ix *index) storeFaults() int {
	n := 0
	for _, f := range ix.h.Faults {
		if f.Kind == "store-down" || f.Kind == "store-slow" {
			n++
		}
	}
	return n
}

func uninjectedHow(figs map[string]float64) string {
	switch {
	case figs["uninjected_failed_open"] > 0 && figs["uninjected_failed_closed"] > 0:
		return "open and closed"
	case figs["uninjected_failed_closed"] > 0:
		return "closed"
	}
	return "open"
}

// Signatures of a limiter that failed with no fault injected.
const (
	// CauseFailedOpen: admissions outside any injected fault carried none
	// of the rate-limit headers the limiter sends on its other answers:
	// the limiter let them through undecided, without saying so. Every
	// overrun of those requests is this defect's.
	CauseFailedOpen = "failed-open"
	// CauseFailedClosed: the declared fail-closed status outside any
	// injected fault: the limiter refused because it could not decide.
	CauseFailedClosed = "failed-closed"
)

// judgeUninjected finds requests answered by a failure mode outside every
// injected fault window (and its recovery): a store failing under load
// (dial timeouts, a full pool) that nobody injected. Its signatures:
// admissions without the rate-limit headers the same run's other
// answers carry and (fail-closed) the closed status, without the target's
// X-RateLimit-Fallback statement (such answers are counted in the figure
// uninjected_fallback: the target says what decided them). One evidence item per key and
// signature, with the key's availability over that span. It returns how
// many requests showed one.
func judgeUninjected(ix *index, col *collector, figs map[string]float64) int {
	u := newUninjected(ix)
	sendsOnAdmitted := false
	if u.declared {
		for _, r := range ix.recs {
			if r.out != history.Unknown && headered(ix.ev(r)) {
				sendsOnAdmitted = true
				break
			}
		}
	}
	// A limiter still recovering from an injected fault (its breaker lets
	// one probe through when traffic resumes, however long after) says so
	// with X-RateLimit-Fallback until its store decides again: that is the
	// injected fault's aftermath, not a failure of its own.
	type span struct{ from, to int64 }
	var recovering []span
	for _, f := range ix.h.Faults {
		if (f.Kind != "store-down" && f.Kind != "store-slow") || f.End == 0 {
			continue
		}
		back := int64(math.MaxInt64)
		for _, r := range ix.recs {
			if e := ix.ev(r); backAfter(f, e, r) && r.lo < back {
				back = r.lo
			}
		}
		recovering = append(recovering, span{f.End, back})
	}
	afterInjected := func(r rec) bool {
		for _, s := range recovering {
			if r.lo >= s.from && r.lo <= s.to {
				return true
			}
		}
		return false
	}
	total := 0
	for gi := range ix.groups {
		g := &ix.groups[gi]
		var open, closed []rec
		for _, r := range g.recs {
			if r.variant || ix.inFault(r.lo, r.hi) {
				continue
			}
			switch u.kind(ix.ev(r), r, sendsOnAdmitted) {
			case uninjectedFallback:
				// The target says its failure mode decided: a figure, not
				// a finding. It hides nothing (those decisions are judged
				// by no envelope), and the built-in services say so
				// whenever a loaded machine makes a store call slower than
				// its timeout.
				if !afterInjected(r) {
					figs["uninjected_fallback"]++
				}
			case uninjectedOpen:
				open = append(open, r)
			case uninjectedClosed:
				closed = append(closed, r)
			}
		}
		for sig, rs := range [2][]rec{open, closed} {
			if len(rs) == 0 {
				continue
			}
			total += len(rs)
			lo, hi := rs[0].lo, rs[0].hi
			for _, r := range rs {
				lo, hi = min(lo, r.lo), max(hi, r.hi)
			}
			inSpan, adm := 0, 0
			for _, r := range g.recs {
				if r.lo >= lo && r.hi <= hi && !r.variant {
					inSpan++
					if r.out == history.Admitted && !slices.ContainsFunc(rs, func(x rec) bool { return x.idx == r.idx }) {
						adm++
					}
				}
			}
			idl, n := ix.idList(rs)
			col.add(u.evidence(figs, g.key, sig, len(rs), lo, hi, idl, n, inSpan, adm))
		}
	}
	return total
}

// headered reports whether e carries any of the rate-limit headers.
func headered(e *history.Event) bool {
	return e.RateLimit != "" || e.RateLimitPolicy != "" || e.XLimit != "" || e.XRemaining != "" || e.RateLimitLimit != "" || e.RateLimitRemaining != ""
}

// backAfter reports whether r (of e) shows the limiter deciding again
// after the store fault f ended: decided, without X-RateLimit-Fallback,
// sent after f's end.
func backAfter(f history.Fault, e *history.Event, r rec) bool {
	return r.lo >= f.End && r.out != history.Unknown && e.Fallback == ""
}

// uninjected is judgeUninjected's rule, in memory and on the stream.
type uninjected struct {
	ix *index
	// declared: the limiter is to send rate-limit headers (declared and
	// recorded); it then sends them on its answers when one of the run's
	// decided answers carries one.
	declared bool
	// closedStatus: the closed status is a signature (fail-closed).
	closedStatus bool
}

// What judgeUninjected makes of a request outside every injected fault.
const (
	uninjectedNone = iota
	uninjectedFallback
	uninjectedOpen
	uninjectedClosed
)

func newUninjected(ix *index) uninjected {
	return uninjected{ix: ix,
		declared:     !ix.h.Run.NoHeaders && (ix.p.Headers.RateLimit != policy.RateLimitNone || ix.p.Headers.XRateLimit),
		closedStatus: ix.p.Failure.Mode == policy.FailClosed && !ix.p.Failure.Undeclared}
}

// kind classifies e (r), a request that is not a variant, outside every
// fault window, given whether the limiter sends headers on its answers.
func (u uninjected) kind(e *history.Event, r rec, sendsOnAdmitted bool) int {
	switch {
	case e.Fallback != "":
		return uninjectedFallback
	case r.out == history.Admitted && e.Scope == "" && sendsOnAdmitted && !headered(e):
		return uninjectedOpen
	case u.closedStatus && isClosedStatus(u.ix.p, e.Status):
		return uninjectedClosed
	}
	return uninjectedNone
}

// evidence is the evidence of key's n requests of signature sig (0 open,
// 1 closed) in [lo, hi], whose ids are idl (of total), beside inSpan
// requests of the key in that span, adm of them admitted otherwise; it
// counts them in figs.
func (u uninjected) evidence(figs map[string]float64, key string, sig, n int, lo, hi int64, idl []uint64, total, inSpan, adm int) Evidence {
	cause, what := CauseFailedOpen, "were admitted without the rate-limit headers its other answers carry: the limiter failed open"
	if sig == 1 {
		cause, what = CauseFailedClosed, fmt.Sprintf("were answered with the fail-closed status (%s): the limiter failed closed", closedStatuses(u.ix.p))
	}
	figs["uninjected_"+strings.ReplaceAll(cause, "-", "_")] += float64(n)
	return Evidence{Key: key, From: lo, To: hi, Bound: 0, Observed: float64(n), RequestIDs: idl, TotalIDs: total, Cause: cause,
		Message: fmt.Sprintf("key %s: %d of its requests in %s–%s, outside any injected fault, %s on its own (a store failing under load?); the limiter decided %d of the %d requests of that span (availability %.0f%%)",
			key, n, fmtDur(time.Duration(lo)), fmtDur(time.Duration(hi)), what, adm, inSpan, 100*float64(adm)/float64(max(1, inSpan)))}
}

// isClosedStatus reports whether status is the declared fail-closed
// status (503 unless statuses.closed says otherwise).
func isClosedStatus(p *policy.Policy, status int) bool {
	if len(p.Statuses.Closed) == 0 {
		return status == 503
	}
	return p.Statuses.Closed.Has(status)
}

func closedStatuses(p *policy.Policy) string {
	if len(p.Statuses.Closed) == 0 {
		return "503"
	}
	return p.Statuses.Closed.String()
}

const docDownstream = "What reached the downstream for each key is at most what was admitted for it, and within the declared policy: over the run, and between two readings of the downstream (after each phase), a key's arrivals fit its limits' envelope over that span (K + r·d for buckets, N per window touched for windows, times the instances for per-instance limits), widened by the longest request; with a global guard, the aggregate fits it too, and a sink's peak arrivals in any second stay within Global.K + Global.R."

// downReading is one key's arrivals as read at one instant.
type downReading struct {
	at       int64
	phase    string
	arrivals int64
}

// checkDownstream is O(N + R log R) for R downstream readings: a count of
// admissions per key, then the readings of each key in order against its
// envelope.
func checkDownstream(ix *index) Result {
	if len(ix.h.Sink) == 0 {
		return ix.collector().result(Skip, "no downstream records in this run (no sink, JSON counter or Prometheus source)", map[string]float64{}, "")
	}
	keys := map[string]*downKey{}
	for gi := range ix.groups {
		g := &ix.groups[gi]
		k := &downKey{}
		keys[g.key] = k
		for _, r := range g.recs {
			k.add(ix, r, ix.ev(r).Scope)
		}
	}
	return ix.judgeDownstream(keys, ix.tierOfKey)
}

// downKey is what downstream reads of one key's requests: admissions,
// requests without a decision, those the envelope does not bound, and the
// span of the key's requests. Requests may come in any order.
type downKey struct {
	// unanswered are requests without a decision (an error or a request
	// cut off when the run stopped): the limiter may have admitted and
	// forwarded them, so they widen the bound instead of counting as
	// arrivals unasked.
	adm, unanswered int64
	// byFault are the admissions the failure mode (or another scope)
	// decided: the envelope does not bound them, so they are added to it —
	// as far as the declared mode admits at all. A fail-closed limiter
	// admits nothing on its failure mode, so what it let through during an
	// outage counts against the envelope like any admission. Admitted
	// cost-0 peeks are added the same way.
	byFault     []rec
	first, last int64
	seen        bool
}

// add counts r, a request of the key whose event names scope.
func (k *downKey) add(ix *index, r rec, scope string) {
	if r.out == history.Admitted {
		k.adm++
		// A cost-0 peek takes no token: the envelope does not bound its
		// arrival downstream either.
		modeAdmits := ix.p.Failure.Mode != policy.FailClosed || ix.p.Failure.Undeclared
		if (r.fault && (modeAdmits || scope != "")) || r.tokens() == 0 {
			k.byFault = append(k.byFault, r)
		}
	} else if r.out == history.Unknown {
		k.unanswered++
	}
	if !k.seen || r.lo < k.first {
		k.first, k.seen = r.lo, true
	}
	k.last = max(k.last, r.hi)
}

// judgeDownstream judges the sink's readings against what per says of
// each key's requests (tierOf gives a key's tier): checkDownstream in
// memory and on the stream alike.
func (ix *index) judgeDownstream(per map[string]*downKey, tierOf func(key string) *policy.Tier) Result {
	col := ix.collector()
	figs := map[string]float64{}
	adm := func(key string) (a, u int64, first, last int64, byFault []rec) {
		if k := per[key]; k != nil {
			return k.adm, k.unanswered, k.first, k.last, k.byFault
		}
		return 0, 0, 0, 0, nil
	}
	// The readings of each key in time order; the last one is the run's.
	readings := map[string][]downReading{}
	var keys []string
	for _, s := range ix.h.Sink {
		if _, ok := readings[s.Key]; !ok {
			keys = append(keys, s.Key)
		}
		readings[s.Key] = append(readings[s.Key], downReading{at: s.At, phase: s.Phase, arrivals: s.Arrivals})
	}
	sort.Strings(keys)
	var arrivals int64
	// resets are the keys whose counter went backwards: below the
	// baseline taken before the run, or below an earlier reading. A
	// counter only falls when it restarts (the service or the exporter
	// restarted), so what it says after that is not this run's arrivals:
	// such a key is not judged, and the check cannot pass.
	var resets []Evidence
	for _, key := range keys {
		rs := readings[key]
		sort.SliceStable(rs, func(a, b int) bool { return rs[a].phase != "" && (rs[b].phase == "" || rs[a].at < rs[b].at) })
		final := rs[len(rs)-1]
		if ev, ok := counterReset(key, rs); ok {
			resets = append(resets, ev)
			continue
		}
		if key == "*" {
			ix.judgeGlobalDownstream(col, figs, rs)
			continue
		}
		arrivals += final.arrivals
		a, u, first, last, byFault := adm(key)
		if final.arrivals > a+u {
			msg := fmt.Sprintf("key %s: %d arrivals downstream but only %d requests admitted", key, final.arrivals, a)
			if u > 0 {
				msg += fmt.Sprintf(" and %d without an answer", u)
			}
			col.add(Evidence{Key: key, From: first, To: last, Bound: float64(a + u), Observed: float64(final.arrivals), Message: msg})
			continue
		}
		tier := tierOf(key)
		if tier == nil {
			continue
		}
		// Over the run: every arrival came from a request of this run.
		if last > 0 {
			ix.judgeDownstreamSpan(col, key, tier, final.arrivals, first, last, "over the run", byFault)
		}
		// Between readings: arrivals counted after one reading and by the
		// next came from requests decided in [prev − longest request, at].
		for i := 1; i < len(rs); i++ {
			d := rs[i].arrivals - rs[i-1].arrivals
			if d <= 0 || rs[i].at <= 0 || rs[i-1].at <= 0 {
				continue
			}
			ix.judgeDownstreamSpan(col, key, tier, d, rs[i-1].at-ix.maxLat, rs[i].at, fmt.Sprintf("between the readings after %s and %s", orEnd(rs[i-1].phase), orEnd(rs[i].phase)), byFault)
		}
	}
	figs["arrivals"] = float64(arrivals)
	if len(resets) > 0 {
		figs["counter_resets"] = float64(len(resets))
		if col.total == 0 {
			r := col.result(Unknown, fmt.Sprintf("the downstream counter went backwards for %s (a counter reset: the service or its exporter restarted?): what reached the downstream cannot be judged; %s",
				plural(len(resets), "key", "keys"), resets[0].Message), figs, "")
			r.Evidence = resets[:min(len(resets), ix.o.MaxEvidence)]
			return r
		}
	}
	return col.result(Pass, fmt.Sprintf("downstream saw %d arrivals, none beyond admissions or the declared limits", arrivals), figs,
		fmt.Sprintf("%s of downstream traffic beyond what was admitted or allowed", plural(col.total, "case", "cases")))
}

// counterReset is the evidence that key's downstream counter went
// backwards in rs (readings in time order, relative to the baseline read
// before the run), if it did.
func counterReset(key string, rs []downReading) (Evidence, bool) {
	prev := downReading{arrivals: 0, phase: "the baseline before the run"}
	for i, r := range rs {
		if r.arrivals < prev.arrivals {
			was := prev.phase
			if i > 0 {
				was = "the reading after " + orEnd(prev.phase)
			}
			return Evidence{Key: key, From: prev.at, To: r.at, Bound: float64(prev.arrivals), Observed: float64(r.arrivals), Cause: "counter-reset",
				Message: fmt.Sprintf("key %s: the downstream counter fell from %d (%s) to %d (the reading after %s): a counter reset, not arrivals", key, prev.arrivals, was, r.arrivals, orEnd(r.phase))}, true
		}
		prev = r
	}
	return Evidence{}, false
}

func orEnd(phase string) string {
	if phase == "" {
		return "the end of the run"
	}
	return "phase " + phase
}

// tierOfKey is the tier of a key in the index (nil when it has none).
func (ix *index) tierOfKey(key string) *policy.Tier {
	i := sort.Search(len(ix.groups), func(i int) bool { return ix.groups[i].key >= key })
	if i < len(ix.groups) && ix.groups[i].key == key {
		return ix.groups[i].tier
	}
	if t, ok := ix.p.TierFor(key); ok {
		return t
	}
	return nil
}

// judgeDownstreamSpan fails when n arrivals of key exceed what its tier's
// limits allow in [from, to], plus the admissions the failure mode decided
// that may have been decided then (faulted).
func (ix *index) judgeDownstreamSpan(col *collector, key string, t *policy.Tier, n, from, to int64, what string, faulted []rec) {
	extra := 0
	for _, r := range faulted {
		if r.hi >= from && r.lo <= to {
			extra++
		}
	}
	for li := range t.Limits {
		l := &t.Limits[li]
		bound := maxIn(l, time.Duration(to-from))
		if l.PerInstance() {
			bound *= float64(max(1, ix.insts))
		}
		// Regions may overrun one quota by the declared tolerance.
		bound = bound*(1+ix.p.Tolerance.Regions) + float64(extra)
		if float64(n) > bound+eps {
			col.add(Evidence{Key: key, Limit: l.Name, From: from, To: to, Bound: bound, Observed: float64(n),
				Message: fmt.Sprintf("key %s: %d arrivals downstream %s (%s); %s allows at most %s", key, n, what, fmtDur(time.Duration(to-from)), l.Describe(), fmtF(bound))})
			return
		}
	}
}

// judgeGlobalDownstream judges the aggregate against the global guard.
func (ix *index) judgeGlobalDownstream(col *collector, figs map[string]float64, rs []downReading) {
	g := ix.p.Global
	final := rs[len(rs)-1]
	for _, s := range ix.h.Sink {
		if s.Key == "*" && s.PeakPerSecond > 0 {
			figs["peak_per_second"] = math.Max(figs["peak_per_second"], float64(s.PeakPerSecond))
		}
	}
	if g == nil {
		return
	}
	if peak := figs["peak_per_second"]; peak > 0 {
		bound := g.K() + g.R()
		figs["global_bound_per_second"] = bound
		if peak > bound+eps {
			col.add(Evidence{Key: "*", Limit: g.Name, Bound: bound, Observed: peak,
				Message: fmt.Sprintf("downstream saw %.0f requests in one second; the global guard (%s) allows at most %s", peak, g.Describe(), fmtF(bound))})
		}
	}
	if ix.maxRecv > 0 {
		if bound := maxIn(g, time.Duration(ix.maxRecv)); float64(final.arrivals) > bound+eps {
			col.add(Evidence{Key: "*", Limit: g.Name, From: 0, To: ix.maxRecv, Bound: bound, Observed: float64(final.arrivals),
				Message: fmt.Sprintf("downstream saw %d requests over the run (%s); the global guard (%s) allows at most %s", final.arrivals, fmtDur(time.Duration(ix.maxRecv)), g.Describe(), fmtF(bound))})
		}
	}
}

// judgeRulesDown checks the rules-down windows: the service must keep
// admitting under its conservative defaults, and no key may exceed the
// rules_fallback tier's envelope then. It returns how many windows it saw.
func judgeRulesDown(ix *index, col *collector, figs map[string]float64, sc *scratch) int {
	fb, ok := ix.p.Tier(ix.p.RulesFallback)
	n := 0
	for _, fault := range ix.h.Faults {
		if fault.Kind != "rules-down" {
			continue
		}
		n++
		end := fault.End
		if end == 0 {
			end = ix.maxRecv
		}
		pre := fmt.Sprintf("rules%d_", n)
		var adm, rej, errs int
		for gi := range ix.groups {
			g := &ix.groups[gi]
			sc.recs = sc.recs[:0]
			for _, r := range g.recs {
				e := ix.ev(r)
				if e.Sent < fault.Start || e.Recv > end {
					continue
				}
				switch r.out {
				case history.Admitted:
					adm++
					if !r.variant {
						sc.recs = append(sc.recs, r)
					}
				case history.Rejected:
					rej++
				default:
					errs++
				}
			}
			if !ok || g.tier == nil || len(sc.recs) == 0 {
				continue
			}
			for li := range fb.Limits {
				st := ix.judgeLimit(sc.recs, &fb.Limits[li], sc)
				for ci := range st.certs {
					ct := &st.certs[ci]
					col.add(ix.evidence(g.key, ct, fmt.Sprintf("while the rules were unavailable (%s–%s) key %s exceeded the conservative defaults (tier %s): %s",
						fmtDur(time.Duration(fault.Start)), fmtDur(time.Duration(end)), g.key, fb.Name, certMessage(ct))))
				}
			}
		}
		if adm == 0 && rej+errs > 0 {
			col.add(Evidence{From: fault.Start, To: end, Observed: 0, Bound: 1,
				Message: fmt.Sprintf("while the rules were unavailable (%s–%s) all %d requests were refused: conservative defaults from code should still admit within the %s tier's limits",
					fmtDur(time.Duration(fault.Start)), fmtDur(time.Duration(end)), rej+errs, ix.p.RulesFallback)})
		}
		figs[pre+"admitted"] = float64(adm)
		figs[pre+"rejected"] = float64(rej)
		figs[pre+"errors"] = float64(errs)
	}
	return n
}
