package checks

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// DelayCheck is the name of the check of a limiter declared to delay
// (policy.Delay).
const DelayCheck = "delay"

const docDelay = "A limiter declared to delay (delay: max_wait D, queue Q) holds a request for which no token is free instead of refusing it: no admitted request waited longer than D + tolerance (sent to answered), nor longer than its token required + tolerance — counting every admission sent before it (or within the tolerance after) as taken at its latest possible instant, a request whose token was already free is admitted at once (a limiter that paces every request of a burst it declared to admit at once fails) —, and a refusal comes only when the wait would have exceeded D or the queue was full — a refusal is wrong when, counting every admission that could have been decided before it at its latest possible instant, its token was due within D − tolerance of its earliest possible arrival and fewer than Q other requests of its key were in flight (an upper bound on those waiting). A delayed admission's instant is its release, which lies in [Sent, Recv] like any decision: oversell judges it there."

// Default delay tolerance (policy.Delay.Tolerance zero): the largest of
// these, a share of max_wait, and twice the p99 latency of the run's
// refusals (answered without waiting).
const (
	minDelayTolerance   = 50 * time.Millisecond
	delayToleranceShare = 0.1
)

// delayTolerance is d's declared tolerance or the default.
func (ix *index) delayTolerance(d *policy.Delay) (tol int64, declared bool) {
	if t := d.Tolerance.D(); t > 0 {
		return int64(t), true
	}
	tol = max(int64(minDelayTolerance), int64(float64(d.MaxWait.D())*delayToleranceShare))
	ix.refusalLatOnce.Do(func() {
		var lat []int64
		for i := range ix.recs {
			if r := ix.recs[i]; r.limit && !r.fault {
				e := ix.ev(r)
				lat = append(lat, e.Recv-e.Sent)
			}
		}
		if len(lat) > 0 {
			slices.Sort(lat)
			ix.refusalP99 = lat[len(lat)*99/100]
		}
	})
	return max(tol, 2*ix.refusalP99), false
}

// delaySlacks are the delay tolerances the check used (one per distinct
// delay the policy declares).
func (ix *index) delaySlacks() []Slack {
	var out []Slack
	seen := map[int64]bool{}
	for i := range ix.p.Tiers {
		d := ix.p.DelayFor(&ix.p.Tiers[i])
		if d == nil {
			continue
		}
		tol, declared := ix.delayTolerance(d)
		if seen[tol] {
			continue
		}
		seen[tol] = true
		name := "delay.tolerance"
		if !declared {
			name += " (default)"
		}
		out = append(out, Slack{Name: name, Value: fmtDur(time.Duration(tol)), Ns: tol, Widens: "how much longer than max_wait an admitted request may take, and how far inside max_wait a wait must be for its refusal to count as wrong"})
	}
	return out
}

// checkDelay judges every key whose tier delays (policy.DelayFor). For the
// refusals it keeps, per limit, the admissions that could have been decided
// before the refusal (lo ≤ the refusal's hi) at their latest instants (hi),
// sorted by hi; the earliest instant a bucket exact to the policy could
// admit one more is max over i of hi_i + (c_i + 1 − K)/r, c_i the
// admissions from i on (with a full bucket at the key's first request, as
// golang.org/x/time/rate's reservations have it). A segment tree with
// range add keeps that maximum as admissions join: O((n + refusals) log n)
// per key and limit.
func checkDelay(ix *index) Result {
	col := ix.collector()
	figs := map[string]float64{}
	if !ix.p.Delays() {
		return col.result(Skip, "the policy declares no delay (a limiter that refuses at once)", figs, "")
	}
	var keys, delayed, admittedN, refusals, judged, undecided int
	var longest int64
	for gi := range ix.groups {
		g := &ix.groups[gi]
		if g.tier == nil {
			continue
		}
		d := ix.p.DelayFor(g.tier)
		if d == nil {
			continue
		}
		tol, _ := ix.delayTolerance(d)
		D := int64(d.MaxWait.D())
		var adm, rej []rec
		var busyLo, busyHi []int64 // non-refused requests: lo and hi, for the queue bound
		for _, r := range g.recs {
			if r.variant || r.fault {
				continue
			}
			switch {
			case r.out == history.Admitted:
				adm = append(adm, r)
				busyLo, busyHi = append(busyLo, r.lo), append(busyHi, r.hi)
			case r.limit:
				rej = append(rej, r)
			case r.out == history.Unknown:
				busyLo, busyHi = append(busyLo, r.lo), append(busyHi, r.hi)
			}
		}
		if len(adm) == 0 && len(rej) == 0 {
			continue
		}
		keys++
		admittedN += len(adm)
		refusals += len(rej)
		// An admitted request held past D, or longer than its token
		// required.
		needs := make([]int64, len(adm)) // the longest wait any limit could require
		for li := range g.tier.Limits {
			delayNeeds(adm, &g.tier.Limits[li], tol, needs)
		}
		for i, r := range adm {
			e := ix.ev(r)
			wait := e.Recv - e.Sent
			longest = max(longest, wait)
			if wait > tol {
				delayed++
			}
			switch {
			case wait > D+tol:
				col.add(Evidence{Key: g.key, Limit: limitNames(g.tier), From: e.Sent, To: e.Recv, Bound: float64(D) / 1e9, Observed: float64(wait) / 1e9,
					RequestIDs: []uint64{e.ID}, TotalIDs: 1, Cause: CauseHeldPastWait,
					Message: fmt.Sprintf("request %d of key %s was admitted after %s: held past the declared max_wait %s (tolerance %s)", e.ID, g.key, fmtDur(time.Duration(wait)), fmtDur(time.Duration(D)), fmtDur(time.Duration(tol)))})
			case wait > needs[i]+tol:
				free := "its token was free when it was sent"
				if needs[i] > 0 {
					free = "its token was due within " + fmtDur(time.Duration(needs[i]))
				}
				col.add(Evidence{Key: g.key, Limit: limitNames(g.tier), From: e.Sent, To: e.Recv, Bound: float64(needs[i]) / 1e9, Observed: float64(wait) / 1e9,
					RequestIDs: []uint64{e.ID}, TotalIDs: 1, Cause: CauseHeldPastToken,
					Message: fmt.Sprintf("request %d of key %s was admitted after %s although %s, counting every admission that could have come before it at its latest instant (tolerance %s): held while it could have been admitted", e.ID, g.key, fmtDur(time.Duration(wait)), free, fmtDur(time.Duration(tol)))})
			}
		}
		if len(rej) == 0 {
			continue
		}
		if slices.ContainsFunc(g.tier.Limits, func(l policy.Limit) bool { return l.CountsRejected() }) {
			undecided += len(rej)
			continue
		}
		slices.Sort(busyLo)
		slices.Sort(busyHi)
		waits := make([]int64, len(rej)) // the longest wait any limit could require
		for li := range g.tier.Limits {
			delayWaits(adm, rej, &g.tier.Limits[li], waits)
		}
		for i, r := range rej {
			judged++
			if waits[i]+tol > D {
				continue // the wait may have exceeded D: a refusal is allowed
			}
			// Requests of the key in flight beside r: an upper bound on
			// those waiting when r was decided (r itself is refused, so
			// not among them).
			inFlight := sort.Search(len(busyLo), func(k int) bool { return busyLo[k] >= r.hi }) -
				sort.Search(len(busyHi), func(k int) bool { return busyHi[k] > r.lo })
			inFlight = max(inFlight, 0)
			if d.Queue > 0 && inFlight >= d.Queue {
				continue // the queue may have been full
			}
			e := ix.ev(r)
			queue := "no queue bound declared"
			if d.Queue > 0 {
				queue = fmt.Sprintf("at most %d of the queue's %d were in flight beside it", inFlight, d.Queue)
			}
			col.add(Evidence{Key: g.key, Limit: limitNames(g.tier), From: r.lo, To: r.hi, Bound: float64(D) / 1e9, Observed: float64(waits[i]) / 1e9,
				RequestIDs: []uint64{e.ID}, TotalIDs: 1, Cause: CauseRefusedInsteadOfDelay,
				Message: fmt.Sprintf("request %d of key %s got %d although its token was due within %s at every possible decision time (max_wait %s, tolerance %s) and %s: it should have been delayed, not refused", e.ID, g.key, e.Status, fmtDur(time.Duration(waits[i])), fmtDur(time.Duration(D)), fmtDur(time.Duration(tol)), queue)})
		}
	}
	figs["delayed"] = float64(delayed)
	figs["longest_wait_ms"] = float64(longest) / 1e6
	figs["refusals_judged"] = float64(judged)
	if keys == 0 || (delayed == 0 && judged == 0 && col.total == 0) {
		return col.result(Skip, "no request of a key whose tier delays waited or was refused: the delay was not exercised", figs, "")
	}
	failSum := fmt.Sprintf("%s broke the declared delay: held past max_wait or past their token, or refused while their wait fitted max_wait and the queue had room", plural(col.total, "request", "requests"))
	if undecided > 0 {
		figs["undecided_refusals"] = float64(undecided)
		return col.result(Unknown, fmt.Sprintf("%s of keys whose limit also counts refused requests (counts: all) were not judged: what they used up is not modelled", plural(undecided, "refusal", "refusals")), figs, failSum)
	}
	return col.result(Pass, fmt.Sprintf("%s of %s admitted, %s after a wait (the longest %s); %s each came when the wait would have exceeded max_wait or the queue may have been full",
		plural(admittedN, "request", "requests"), plural(keys, "delaying key", "delaying keys"), grouped(int64(delayed)), fmtDur(time.Duration(longest)), plural(judged, "refusal", "refusals")), figs, failSum)
}

// Causes of the delay check's evidence.
const (
	// CauseHeldPastWait: an admitted request waited longer than max_wait.
	CauseHeldPastWait = "held-past-wait"
	// CauseRefusedInsteadOfDelay: a refusal whose wait fitted max_wait
	// while the queue had room.
	CauseRefusedInsteadOfDelay = "refused-instead-of-delay"
	// CauseHeldPastToken: an admitted request waited longer than its
	// token required (a limiter pacing what it declared to admit at once).
	CauseHeldPastToken = "held-past-token"
)

// delayOffset keeps inactive leaves far below any active one (seconds;
// a run is far shorter).
const delayOffset = 1e7

// delayWaits raises waits[i] to the wait refusal rej[i] needed at most
// under limit l: the earliest instant a bucket of l could admit one more
// after the admissions that could precede it (adm with lo ≤ rej[i].hi, at
// their latest instants), minus rej[i]'s earliest arrival. rej is sorted
// by lo; adm by lo.
func delayWaits(adm, rej []rec, l *policy.Limit, waits []int64) {
	if len(adm) == 0 {
		return
	}
	r, K := l.R(), l.K()
	byHi, leaf := leavesByHi(adm)
	var t0 int64 = adm[0].lo // seconds are counted from here for precision
	for _, a := range adm {
		t0 = min(t0, a.lo)
	}
	for _, x := range rej {
		t0 = min(t0, x.lo)
	}
	var st segTree
	st.init(len(adm), func(p int) float64 {
		return float64(adm[byHi[p]].hi-t0)/1e9 + (1-K)/r - delayOffset
	})
	order := make([]int, len(rej)) // refusals by hi
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return rej[order[a]].hi < rej[order[b]].hi })
	next := 0 // adm[:next] are active (adm is sorted by lo)
	for _, ri := range order {
		x := rej[ri]
		for next < len(adm) && adm[next].lo <= x.hi {
			p := leaf[next]
			st.add(p, p, delayOffset)
			st.add(0, p, 1/r)
			next++
		}
		if next == 0 {
			continue
		}
		v, _ := st.max(0, len(adm)-1)
		if v < -delayOffset/2 {
			continue
		}
		due := t0 + int64(math.Ceil(v*1e9))
		waits[ri] = max(waits[ri], due-x.lo)
	}
}

// delayNeeds raises needs[i] to the wait admission adm[i] needed at most
// under limit l: the earliest instant a bucket of l could admit one more
// after the other admissions that could have been decided before adm[i]
// arrived (those sent by its send time + tol), each at its latest instant
// (hi), minus adm[i]'s send time. An upper bound on what a limiter exact to
// the policy makes it wait: taking the others later, or counting ones that
// came after it, only delays the bucket's next token. adm is sorted by lo.
func delayNeeds(adm []rec, l *policy.Limit, tol int64, needs []int64) {
	if len(adm) < 2 {
		return
	}
	r, K := l.R(), l.K()
	byHi, leaf := leavesByHi(adm)
	t0 := adm[0].lo
	var st segTree
	st.init(len(adm), func(p int) float64 {
		return float64(adm[byHi[p]].hi-t0)/1e9 + (1-K)/r - delayOffset
	})
	activate := func(i int, sign float64) {
		p := leaf[i]
		st.add(p, p, sign*delayOffset)
		st.add(0, p, sign/r)
	}
	next := 0 // adm[:next] are active
	for i := range adm {
		for next < len(adm) && adm[next].lo <= adm[i].lo+tol {
			activate(next, 1)
			next++
		}
		activate(i, -1) // its own token is the one it waits for
		v, _ := st.max(0, len(adm)-1)
		activate(i, 1)
		if v < -delayOffset/2 {
			continue // no other admission could precede it
		}
		due := t0 + int64(math.Ceil(v*1e9))
		needs[i] = max(needs[i], due-adm[i].lo)
	}
}

// leavesByHi orders adm by hi for a segment tree's leaves: byHi[p] is the
// admission at leaf p, leaf[i] the leaf of admission i.
func leavesByHi(adm []rec) (byHi, leaf []int) {
	byHi = make([]int, len(adm))
	for i := range byHi {
		byHi[i] = i
	}
	sort.SliceStable(byHi, func(a, b int) bool { return adm[byHi[a]].hi < adm[byHi[b]].hi })
	leaf = make([]int, len(adm))
	for p, i := range byHi {
		leaf[i] = p
	}
	return byHi, leaf
}
