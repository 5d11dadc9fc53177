package discover

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/policy"
)

// run is a maximal stretch of admitted probes in send order, with what
// bounds the instant the quota freed before it.
type run struct {
	first, last obs
	n           int
	// before is the last refused probe answered before the run's first
	// admission was sent (zero when none): the quota was not yet free when
	// it was decided. The last refusal in send order will not do: on a busy
	// machine a probe sent just before the first admission can be decided
	// after it, refused because that admission took what had freed (a
	// stability run read a window 2.018 … 2.055 s long for 2 s that way).
	before obs
	// closed: a refusal ended it (its length is the whole quota freed).
	closed bool
}

// runs splits a trickle into runs of admitted probes. prior are the probes
// that spent the key before the trickle: their refusals bound a reset that
// came before the trickle's first probe (a run with no refusal of its own
// before it).
func runs(prior, tr []obs, cl classifier) []run {
	var out []run
	var cur *run
	var refused []obs
	for _, o := range prior {
		if cl.refused_(o.status) {
			refused = append(refused, o)
		}
	}
	for _, o := range tr {
		switch {
		case cl.admitted_(o.status):
			if cur == nil {
				out = append(out, run{first: o, before: answeredBefore(refused, o.sent)})
				cur = &out[len(out)-1]
			}
			cur.last = o
			cur.n++
		case cl.refused_(o.status):
			if cur != nil {
				cur.closed = true
			}
			cur = nil
			refused = append(refused, o)
		}
	}
	return out
}

// answeredBefore is the last of refused (in send order) whose answer came
// before t (zero when none).
func answeredBefore(refused []obs, t time.Time) obs {
	for i := len(refused) - 1; i >= 0; i-- {
		if refused[i].recv.Before(t) {
			return refused[i]
		}
	}
	return obs{}
}

// merged joins runs split by at most two refusals when together they are
// no longer than the quota: on a busy machine a probe sent a moment
// earlier can be decided a moment later, inside a window's run.
func merged(rs []run, tr []obs, cl classifier, quota int) []run {
	if len(rs) < 2 {
		return rs
	}
	// refusedBy(t): refusals sent before t (tr is in send order), so the
	// refusals between two runs are counted without rescanning tr.
	cum := make([]int, len(tr)+1)
	for i, o := range tr {
		cum[i+1] = cum[i]
		if cl.refused_(o.status) {
			cum[i+1]++
		}
	}
	idx := func(t time.Time, after bool) int {
		return sort.Search(len(tr), func(i int) bool {
			if after {
				return tr[i].sent.After(t)
			}
			return !tr[i].sent.Before(t)
		})
	}
	out := []run{rs[0]}
	for _, r := range rs[1:] {
		last := &out[len(out)-1]
		between := max(cum[idx(r.first.sent, false)]-cum[idx(last.last.sent, true)], 0)
		if between <= 2 && last.n+r.n <= quota && last.n > 1 && r.n > 1 {
			last.last, last.n, last.closed = r.last, last.n+r.n, r.closed
			continue
		}
		out = append(out, r)
	}
	return out
}

// freedAt is when the quota freed before r: between the refusal before it
// and the first admission's response (midpoint, half-width).
func (r run) freedAt() (time.Time, time.Duration) {
	lo := r.before.sent
	if lo.IsZero() {
		lo = r.first.sent
	}
	hi := r.first.recv
	half := hi.Sub(lo) / 2
	return lo.Add(half), half
}

func medianLen(rs []run) int {
	if len(rs) == 0 {
		return 0
	}
	ns := make([]int, len(rs))
	for i, r := range rs {
		ns[i] = r.n
	}
	sort.Ints(ns)
	return ns[len(ns)/2]
}

// capacityProbe bursts fresh keys, growing the burst until some are
// refused. It returns the burst's outcome and its key.
func (p *prober) capacityProbe(ctx context.Context, tier string, deadline time.Time, cl classifier, res *Result, t *Tier) ([]obs, string, error) {
	n := 8
	for {
		k, kf := p.key(ctx, tier)
		os, err := p.step(ctx, kf, burst(k, n)...)
		if err != nil {
			return nil, "", err
		}
		if len(os) == 0 {
			return nil, "", fmt.Errorf("discover: the capacity probe of tier %s sent nothing", tier)
		}
		if count(os, cl.admitted_) == 0 {
			return nil, "", fmt.Errorf("%w (status %d%s): check the request shape (Request.Method, Request.Headers, Request.Body), the identity (Overrides.Identity) and the keys, or say which statuses mean admitted (Overrides.Admitted)",
				ErrNothingAdmitted, os[0].status, errNote(os[0]))
		}
		seen := map[int]bool{}
		for _, o := range os {
			if !seen[o.status] {
				seen[o.status] = true
				switch {
				case cl.admitted_(o.status):
					res.Admitted = appendNew(res.Admitted, o.status)
				case cl.refused_(o.status):
					res.Refused = appendNew(res.Refused, o.status)
				default:
					t.Notes = append(t.Notes, fmt.Sprintf("status %d is neither admitted nor refused (%s)", o.status, errNote(o)))
				}
			}
		}
		if count(os, cl.refused_) > 0 {
			res.StatusEvidence = fmt.Sprintf("a burst of %d on a fresh key: %d answered %v, then %v", n, count(os, cl.admitted_), res.Admitted, res.Refused)
			return os, k, nil
		}
		next := min(n*4, maxProbeBurst)
		need := time.Duration(float64(next)/maxRate*float64(time.Second)) + time.Second
		if n >= maxProbeBurst || time.Until(deadline) < 3*need {
			t.Capacity = Number{Value: float64(count(os, cl.admitted_)), Low: float64(count(os, cl.admitted_)), High: math.Inf(1),
				Evidence: fmt.Sprintf("a burst of %d on a fresh key was admitted whole; a bigger one does not fit the budget: capacity ≥ %d, not pinned (raise Budget)", n, n)}
			return os, k, nil
		}
		n = next
	}
}

func errNote(o obs) string {
	if o.ev.Err != "" {
		return ": " + o.ev.Err
	}
	return ""
}

func appendNew(s []int, v int) []int {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

// tier measures one tier.
func (p *prober) tier(ctx context.Context, name string, deadline time.Time, res *Result) (Tier, error) {
	t := Tier{Name: name}
	cl := classifier{p.o.Admitted, p.o.Rejected}
	capObs, key, err := p.capacityProbe(ctx, name, deadline, cl, res, &t)
	if err != nil {
		return t, err
	}
	a := count(capObs, cl.admitted_)
	if t.Capacity.Evidence != "" { // not pinned: nothing refused
		return t, nil
	}
	t0 := capObs[0].sent
	var lastAdm, firstRef obs
	for _, o := range capObs {
		if cl.admitted_(o.status) {
			lastAdm = o
		} else if cl.refused_(o.status) && firstRef.sent.IsZero() {
			firstRef = o
		}
	}
	span := lastAdm.recv.Sub(t0)
	p.log("discover: tier %s: a burst of %d admitted %d (in %s)", name, len(capObs), a, fmtS(span))

	// The trickle: probes on the exhausted key, faster than it refills,
	// until the pattern of admissions shows the family.
	q := math.Min(math.Max(4*float64(a), 10), maxRate/2)
	chunk := time.Second
	var tr []obs
	quietTried := false
	kf := p.sameKey(name)
	for {
		os, err := p.step(ctx, kf, trickle(key, q, chunk))
		if err != nil {
			return t, err
		}
		tr = append(tr, os...)
		if ctx.Err() != nil {
			return t, ctx.Err()
		}
		adm := count(os, cl.admitted_)
		if len(os) >= 5 && float64(adm) >= 0.8*float64(len(os)) && q < maxRate/2 {
			q = math.Min(q*4, maxRate/2) // slower than the refill: speed up
			continue
		}
		// Merged: pieces of one reset split by the load are one run, so
		// two long runs are two resets (a window's one reset in two pieces
		// once ended the trickle with W unpinned).
		rs := merged(runs(capObs, tr, cl), tr, cl, a)
		long := 0
		for _, r := range rs {
			if r.n >= 3 || (a < 3 && r.n >= a) {
				long++
			}
		}
		if (len(rs) >= 6 && medianLen(rs) <= 2) || (long >= 2 && a >= 3) {
			break
		}
		if time.Until(deadline) < max(chunk*3, 4*time.Second) {
			break
		}
		// Silent for a while: a quiet key shows early whether refusals
		// cost (then probing longer shows nothing).
		if len(rs) == 0 && !quietTried {
			if silence := tr[len(tr)-1].sent.Sub(tr[0].sent); silence >= max(4*time.Second, p.o.Budget/6) {
				quietTried = true
				aq, err := p.quiet(ctx, name, cl, a, silence)
				if err != nil {
					return t, err
				}
				if aq > 0 {
					return p.costlyTier(ctx, name, deadline, cl, costly(t, a, silence, q, aq, silence), a, silence, aq)
				}
			}
		}
		chunk = min(chunk*2, 4*time.Second)
	}
	rs := merged(runs(capObs, tr, cl), tr, cl, a)
	trSpan := tr[len(tr)-1].sent.Sub(tr[0].sent)
	switch {
	case len(rs) == 0:
		return p.silent(ctx, name, deadline, cl, t, a, trSpan, q)
	case medianLen(rs) <= 2 || a < 3:
		return p.bucketLike(ctx, name, deadline, cl, t, a, span, firstRef, rs, q, res)
	default:
		return p.windowLike(ctx, name, deadline, cl, t, a, t0, rs, q)
	}
}

// sameKey is the keys file of the last key handed out (the same key again).
func (p *prober) sameKey(tier string) *attacks.KeyFile {
	if p.o.Keys == nil {
		return nil
	}
	keys := p.o.Keys.ByTier[tier]
	k := keys[(p.used[tier]-1)%len(keys)]
	return oneKey(p.o.Keys.Source, tier, k)
}

// bucketLike: admissions one at a time, spaced by the refill.
func (p *prober) bucketLike(ctx context.Context, name string, deadline time.Time, cl classifier, t Tier, a int, span time.Duration, firstRef obs, rs []run, q float64, res *Result) (Tier, error) {
	m := 0
	for _, r := range rs {
		m += r.n
	}
	first := rs[0].first.sent
	rt := trickleRate(rs, q)
	d1 := first.Sub(firstRef.sent)
	// One at a time is a bucket refilling, or a sliding counter's previous
	// window fading: a key spent right after a round window's edge in Unix
	// time gets nothing back from a counter before the next edge.
	var edgeNote string
	if !math.IsNaN(rt.Value) && m >= 4 && a >= 4 {
		// ±10%: a counter's steady rate is N/W only on average over a
		// window (its edges add or hold back one admission).
		wr := Number{Value: float64(a) / rt.Value, Low: 0.9 * float64(a) / rt.High, High: 1.1 * float64(a) / math.Max(rt.Low, 1e-6), Pinned: true}
		// Every whole second within range is tried, the closest to the
		// estimate first, at most two: under load the steady rate can
		// mislead toward its neighbour (a counter of 2 s read 2.55 s and
		// was tried at 3 s only).
		var cands []time.Duration
		if wc, ok := snapEpoch(wr, nil, 0); ok {
			cands = append(cands, wc)
		}
		for c := time.Duration(math.Ceil(wr.Low)) * time.Second; c.Seconds() <= wr.High && len(cands) < 2; c += time.Second {
			if c > 0 && (len(cands) == 0 || c != cands[0]) {
				cands = append(cands, c)
			}
		}
		for _, wc := range cands {
			if time.Until(deadline) <= 2*wc+2*time.Second {
				break
			}
			counter, ev, err := p.edgeTest(ctx, name, cl, a, wc, rt.Value)
			if err != nil {
				return t, err
			}
			if counter {
				t.Family = policy.SlidingCounter
				t.FamilyEvidence = fmt.Sprintf("admissions came back one at a time (at %.3g/s), but %s: a sliding counter, the previous window's weight fading", rt.Value, ev)
				t.Capacity = burstCapacity(a, span, rt)
				t.Window = Number{Value: wc.Seconds(), Low: wc.Seconds(), High: wc.Seconds(), Pinned: true,
					Evidence: fmt.Sprintf("the round window within N / the steady rate ±10%% for a counter's edges (%s … %s s) whose edge the quota waited for", fmtF(wr.Low), fmtF(wr.High))}
				c, w := t.Capacity, wc.Seconds()
				t.Rate = Number{Value: c.Value / w, Low: c.Low / w, High: c.High / w, Pinned: c.Pinned, Evidence: "N / W"}
				t.Anchor, t.AnchorEvidence = policy.AnchorEpoch, fmt.Sprintf("nothing came back before the next multiple of %s in Unix time", wc)
				return p.scope(ctx, name, deadline, cl, t, a)
			}
			edgeNote += "; " + ev
		}
	}
	// The quiet refill: exhaust a fresh key, wait, count what came back.
	r0 := rt.Value
	if math.IsNaN(r0) {
		r0 = 1
	}
	// Wait for fewer tokens than K−1, so the bucket's cap cannot hide the
	// refill.
	tokens := math.Min(8, math.Max(float64(a)-1.5, 1))
	dq := time.Duration(math.Min(math.Max(tokens/r0, 0.3), 5) * float64(time.Second))
	if left := time.Until(deadline) / 3; dq > left {
		dq = max(left, 200*time.Millisecond)
	}
	nq := int(math.Ceil(r0*dq.Seconds()*2)) + 4
	k, kf := p.key(ctx, name)
	os, err := p.step(ctx, kf, append(append(burst(k, a+max(2, a/4)), idle(dq)), burst(k, nq)...)...)
	if err != nil {
		return t, err
	}
	ex, back := splitAt(os, a+max(2, a/4))
	var lastAdm obs
	for _, o := range ex {
		if cl.admitted_(o.status) {
			lastAdm = o
		}
	}
	aq := count(back, cl.admitted_)
	rq := Number{Value: math.NaN()}
	if len(back) > 0 && !lastAdm.sent.IsZero() {
		dHi := back[len(back)-1].recv.Sub(lastAdm.sent).Seconds()
		dLo := math.Max(back[0].sent.Sub(lastAdm.recv).Seconds(), 1e-3)
		rq = Number{Value: float64(aq) / ((dHi + dLo) / 2), Low: math.Max(float64(aq)-1, 0) / dHi, High: float64(aq+1) / dLo, Pinned: aq < nq,
			Evidence: fmt.Sprintf("a fresh key, exhausted, left alone %s, then admitted %d of a burst of %d", fmtS(dq), aq, nq)}
	}
	if want := r0 * dq.Seconds(); aq == 0 && want >= 2 && !math.IsNaN(rt.Value) {
		// Not a bucket: left alone it gave nothing back. The quota came
		// back in pieces while probed (a log or window whose burst was
		// decided over time on a busy machine): measure again, once.
		ev := fmt.Sprintf("admissions came back one at a time while probed, but a key left alone %s got none back where a bucket refilling at %.3g/s gives ≈%.1f", fmtS(dq), r0, want)
		if !p.retried[name] && time.Until(deadline) > 15*time.Second {
			p.retried[name] = true
			p.log("discover: tier %s: %s; measuring again", name, ev)
			again, err := p.tier(ctx, name, deadline, res)
			again.Notes = append(again.Notes, "measured twice: "+ev+" (the quota came back in pieces: a busy machine spread the burst's decisions)")
			return again, err
		}
		t.FamilyEvidence = "not pinned: " + ev
		t.Notes = append(t.Notes, "family not pinned: "+ev)
		t.Capacity = burstCapacity(a, span, rt)
		return p.scope(ctx, name, deadline, cl, t, a)
	}
	t.Family = policy.TokenBucket
	t.FamilyEvidence = fmt.Sprintf("after the burst, admissions came back one at a time (%d runs, median length %d) from %s after exhaustion: a bucket refilling token by token%s", len(rs), medianLen(rs), fmtS(d1), edgeNote)
	r := rq
	switch {
	case math.IsNaN(rt.Value):
		r = rq
	case math.IsNaN(rq.Value):
		r = rt
	case rt.Pinned && rt.High < rq.Low*0.8:
		yes := true
		t.RefusedCost = &yes
		t.RefusedEvidence = fmt.Sprintf("probed while empty it refilled at %.3g/s, left alone at %.3g/s: refused requests use up tokens", rt.Value, rq.Value)
	default:
		// Both agree: the trickle is the finer measurement.
		r = rt
		r.Evidence += fmt.Sprintf("; a quiet refill agrees (%.3g/s: %s)", rq.Value, rq.Evidence)
		r.Low, r.High = math.Max(rt.Low, rq.Low), math.Min(rt.High, rq.High)
		if r.Low > r.High || !rt.Pinned { // an open trickle bounds nothing alone
			r.Low, r.High = math.Min(rt.Low, rq.Low), math.Max(rt.High, rq.High)
		}
		// The range both measurements allow holds the value written: the
		// trickle's point may lie outside the narrower joint range.
		r.Value = math.Min(math.Max(r.Value, r.Low), r.High)
		no := false
		t.RefusedCost = &no
		t.RefusedEvidence = fmt.Sprintf("probed while empty (each probe refused but one per refill) it refilled as fast as left alone (%.3g/s vs %.3g/s): refusals cost nothing", rt.Value, rq.Value)
	}
	t.Rate = r
	t.Capacity = burstCapacity(a, span, r)
	t.Window = Number{Value: t.Capacity.Value / r.Value, Low: t.Capacity.Low / r.High, High: t.Capacity.High / math.Max(r.Low, 1e-6),
		Pinned: t.Capacity.Pinned && r.Pinned, Evidence: "K / r"}
	// An open range can be unbounded: a key is then reused after the
	// estimate, never after a wait longer than the budget.
	wait := t.Window.High
	if !t.Window.Pinned || wait > p.o.Budget.Seconds() {
		wait = math.Min(t.Window.Value, p.o.Budget.Seconds())
	}
	p.refill = max(p.refill, time.Duration(wait*float64(time.Second)))
	return p.scope(ctx, name, deadline, cl, t, a)
}

// trickleRate is the refill rate the trickle's runs show: m admissions
// over the span between the first and the last. Each admission was decided
// between its send and its answer, so the span is known only to the
// latency at either end, and each end to the probe interval and the gap
// before its run's first admission. Left open (not pinned) when the probes
// were not well above the rate (a refill every probe looks like no limit)
// or the trickle's two halves disagree (at large scale a busy machine
// spreads the decisions: nginx at 10000r/m once read 281/s for 166.7/s).
func trickleRate(rs []run, q float64) Number {
	rt := spanRate(rs, q)
	if math.IsNaN(rt.Value) {
		return rt
	}
	rt.Evidence = fmt.Sprintf("%d admissions one at a time over %s while probing at %.0f/s", runsLen(rs), fmtS(rs[len(rs)-1].last.sent.Sub(rs[0].first.sent)), q)
	if q < 2*rt.Value {
		rt.Pinned = false
		rt.Evidence += fmt.Sprintf(": not pinned, the probes (%.0f/s) were not well above the rate", q)
		return rt
	}
	if len(rs) >= 8 {
		h := len(rs) / 2
		a, b := spanRate(rs[:h], q), spanRate(rs[h:], q)
		if !math.IsNaN(a.Value) && !math.IsNaN(b.Value) && (a.High < b.Low || b.High < a.Low) {
			rt.Pinned = false
			rt.Low, rt.High = math.Min(rt.Low, math.Min(a.Low, b.Low)), math.Max(rt.High, math.Max(a.High, b.High))
			rt.Evidence += fmt.Sprintf(": not pinned, the trickle's halves disagree (%s/s, then %s/s)", a.Range(), b.Range())
		}
	}
	return rt
}

func runsLen(rs []run) int {
	m := 0
	for _, r := range rs {
		m += r.n
	}
	return m
}

// spanRate is trickleRate's measurement of rs alone (NaN with fewer than
// two admissions).
func spanRate(rs []run, q float64) Number {
	m := runsLen(rs)
	fo, lo := rs[0].first, rs[len(rs)-1].last
	s := lo.sent.Sub(fo.sent).Seconds()
	if m < 2 || s <= 0 {
		return Number{Value: math.NaN()}
	}
	quant := time.Duration(float64(time.Second) / q)
	// m admissions span m−1 intervals, give or take one at either end (a
	// fraction of a token, a window's edge), each instant known to one
	// probe interval and to the gap between the refusal before its run
	// and its answer (wider when the machine is busy).
	_, hf := rs[0].freedAt()
	_, hl := rs[len(rs)-1].freedAt()
	u := (max(hf, quant/2) + max(hl, quant/2)).Seconds() * 2
	// The first was decided up to its latency after it was sent, the last
	// up to its own.
	latF, latL := fo.recv.Sub(fo.sent).Seconds(), lo.recv.Sub(lo.sent).Seconds()
	return Number{Value: float64(m-1) / s, Low: float64(m-2) / (s + u + latL), High: float64(m) / math.Max(s-u-latF, 1e-3), Pinned: true}
}

// burstCapacity is K from a burst that admitted a in span with the refill
// rate r: refill during the burst counts up to r.High·span, so K lies in
// a − r.High·span … a. Left open (not pinned, with why) when that refill is
// unbounded or the rate itself open.
func burstCapacity(a int, span time.Duration, r Number) Number {
	n := float64(a)
	hi := r.High
	if math.IsNaN(r.Value) {
		hi = math.Inf(1)
	}
	refill := hi * span.Seconds()
	if refill < 1 {
		return Number{Value: n, Low: n, High: n, Pinned: true, Evidence: fmt.Sprintf("a burst on a fresh key admitted %d", a)}
	}
	c := Number{High: n, Pinned: true}
	c.Low = math.Max(1, math.Ceil(n-refill-1e-9))
	c.Value = math.Min(math.Max(c.Low, math.Round(n-r.Value*span.Seconds())), n)
	if math.IsNaN(r.Value) {
		c.Value = n
	}
	c.Evidence = fmt.Sprintf("a burst on a fresh key admitted %d in %s, of which ≈%.1f refilled meanwhile", a, fmtS(span), r.Value*span.Seconds())
	if !r.Pinned {
		c.Pinned = false
		c.Evidence = fmt.Sprintf("a burst on a fresh key admitted %d, but the burst took %s; refill during it is up to %.0f (rate %s/s%s): capacity %s, not pinned", a, fmtS(span), refill, r.Range(), pinnedNote(r), c.Range())
	}
	return c
}

// splitAt splits a step's outcome into the first n sent and the rest.
func splitAt(os []obs, n int) ([]obs, []obs) {
	if n > len(os) {
		n = len(os)
	}
	return os[:n], os[n:]
}

// windowLike: the quota came back all at once, a run of admissions.
func (p *prober) windowLike(ctx context.Context, name string, deadline time.Time, cl classifier, t Tier, a int, t0 time.Time, rs []run, q float64) (Tier, error) {
	var full []run
	for _, r := range rs {
		if r.n >= 2 {
			full = append(full, r)
		}
	}
	n := a
	var sizes []int
	for _, r := range full {
		if r.closed {
			sizes = append(sizes, r.n)
		}
	}
	if len(sizes) > 0 {
		// The longest run the burst's count allows: a log frees its
		// entries as they age, so on a busy machine (the burst's decisions
		// spread) its quota comes back in pieces; no run is longer than N.
		// (The median read N = 4 of a log of 6 from pieces [2 2 4 4 6], and
		// the split test then took the log for a window.) A burst over a
		// window's edge admits up to 2N: the runs still say N.
		sort.Ints(sizes)
		n = sizes[len(sizes)/2]
		for _, v := range sizes {
			if v <= a {
				n = max(n, v)
			}
		}
		if sizes[len(sizes)/2] > a {
			n = sizes[len(sizes)/2]
		}
	}
	t.Capacity = Number{Value: float64(n), Low: float64(n), High: float64(n), Pinned: true,
		Evidence: fmt.Sprintf("a burst on a fresh key admitted %d; each time the quota came back while probing, %v in a row were admitted", a, sizes)}
	if n != a {
		t.Capacity.Low, t.Capacity.High = float64(min(n, a)), float64(max(n, a))
		t.Capacity.Evidence += " (they differ: a window edge fell inside the burst, or a busy machine spread the burst's decisions)"
	}
	e1, h1 := full[0].freedAt()
	var w Number
	if len(full) >= 2 {
		e2, _ := full[1].freedAt()
		d := e2.Sub(e1)
		// A window opened (or a log entry made) by the first admission
		// after the reset frees W after that admission, which came up to
		// g after the reset: W lies in [d − g − h1 − h2, d + h1 + h2].
		// Epoch windows: W = e2 − e1; windows (or log entries) opened by
		// the first admission after a reset: W = e2 − that admission.
		// Either way W lies between these bounds, each instant known only
		// between the refusal before it and the admission's response.
		g1 := full[0]
		before1 := g1.before.sent
		if before1.IsZero() {
			before1 = g1.first.sent
		}
		// The second reset is the first admission after the first run
		// ended (a log frees one entry at a time: that admission may stand
		// alone before the run).
		// A few admissions just after the run, that the quota (at most the
		// burst's count) still holds, are the run's own, decided out of
		// order or freed a moment later on a busy machine (stability runs
		// read W = 0.11 … 0.15 s for 2 s from such pieces): not a reset.
		// The next reset is the next run after a long gap (a quarter of
		// the longest between runs: resets are W apart, pieces of one
		// quota moments apart), or one the quota cannot hold beside the
		// first run and its pieces.
		next := full[1]
		for i, r := range rs {
			if !r.first.sent.Equal(g1.first.sent) {
				continue
			}
			var longest time.Duration
			for j := i + 1; j < len(rs); j++ {
				longest = max(longest, rs[j].first.sent.Sub(rs[j-1].last.sent))
			}
			held := g1.n
			for j := i + 1; j < len(rs); j++ {
				r2 := rs[j]
				if r2.first.sent.Sub(rs[j-1].last.sent) >= longest/4 || held+r2.n > max(n, a) {
					next = r2
					break
				}
				held += r2.n
			}
			break
		}
		e2lo := next.before.sent
		if e2lo.IsZero() {
			e2lo = next.first.sent
		}
		lo, hi := e2lo.Sub(g1.first.recv), next.first.recv.Sub(before1)
		w = Number{Value: (lo + hi).Seconds() / 2, Low: lo.Seconds(), High: hi.Seconds(), Pinned: true,
			Evidence: fmt.Sprintf("the quota came back at once twice, %s apart (probing at %.0f/s; each reset known between a refusal answered before the first admission after it was sent and that admission's answer)", fmtS(d), q)}
	} else {
		d := e1.Sub(t0)
		w = Number{Value: d.Seconds(), Low: (d - h1).Seconds(), High: (d + h1).Seconds(), Pinned: false,
			Evidence: fmt.Sprintf("the quota came back once, %s after the first request; a second reset did not fit the budget, so W is that delay if windows open at a key's first request, else unknown", fmtS(d))}
	}
	t.Window = w
	t.Rate = Number{Value: float64(n) / w.Value, Low: float64(n) / math.Max(w.High, 1e-3), High: float64(n) / math.Max(w.Low, 1e-3), Pinned: w.Pinned, Evidence: "N / W"}
	// Anchoring: resets at multiples of a round W in Unix time (epoch), or
	// W after the key's first request. A key whose first request fell on
	// an edge fits both: a key started mid-window tells them apart.
	tol := 30 * time.Millisecond
	// Each reset is known only within [the refusal before, the first
	// admission's response]: an edge fits W when a multiple of W lies there.
	var edges [][2]time.Time
	for _, r := range full {
		lo := r.before.sent
		if lo.IsZero() {
			lo = r.first.sent
		}
		edges = append(edges, [2]time.Time{lo, r.first.recv})
	}
	wd := time.Duration(w.Value * float64(time.Second))
	if ws, ok := snapEpoch(w, edges, tol); ok {
		anchor, ev, err := p.anchorProbe(ctx, name, deadline, cl, n, ws, q)
		if err != nil {
			return t, err
		}
		if anchor == policy.AnchorEpoch {
			t.Window = Number{Value: ws.Seconds(), Low: ws.Seconds(), High: ws.Seconds(), Pinned: true,
				Evidence: fmt.Sprintf("the round window within %s … %s s whose Unix-time multiples every reset fell on", fmtF(w.Low), fmtF(w.High))}
			t.Rate = Number{Value: float64(n) / ws.Seconds(), Low: float64(n) / ws.Seconds(), High: float64(n) / ws.Seconds(), Pinned: true, Evidence: "N / W"}
			t.Family, t.Anchor = policy.FixedWindow, policy.AnchorEpoch
			t.FamilyEvidence = fmt.Sprintf("the quota came back whole (%d in a row) at once, at multiples of W in Unix time", n)
			t.AnchorEvidence = ev
			t.RefusedEvidence = "a fixed window's refusals within a spent window change nothing observable"
			return p.scope(ctx, name, deadline, cl, t, a)
		}
		if anchor == "" {
			t.Notes = append(t.Notes, ev)
			t, err := p.splitTest(ctx, name, deadline, cl, t, n, wd)
			if t.Family == policy.FixedWindow {
				t.Anchor, t.AnchorEvidence = "", ev
			}
			return t, err
		}
	}
	return p.splitTest(ctx, name, deadline, cl, t, n, wd)
}

// splitTest tells a fixed window anchored at a key's first request from a
// sliding log: half the quota at 0, the rest at W/2, a burst at 1.25·W.
// The fixed window has reset (all N come back); the log freed only the
// first half.
func (p *prober) splitTest(ctx context.Context, name string, deadline time.Time, cl classifier, t Tier, n int, w time.Duration) (Tier, error) {
	h := max(1, n/2)
	if time.Until(deadline) < w*3/2+time.Second {
		t.Family = policy.FixedWindow
		t.Anchor = policy.AnchorFirst
		t.FamilyEvidence = "the quota came back whole at once; fixed window or sliding log could not be told apart within the budget (assumed fixed window)"
		t.Notes = append(t.Notes, "family not pinned: raise Budget to tell a fixed window from a sliding log")
		return p.scope(ctx, name, deadline, cl, t, n)
	}
	k, kf := p.key(ctx, name)
	ph := append(burst(k, h), idle(w/2))
	ph = append(ph, burst(k, n-h)...)
	ph = append(ph, idle(w*3/4))
	ph = append(ph, burst(k, n)...)
	os, err := p.step(ctx, kf, ph...)
	if err != nil {
		return t, err
	}
	_, last := splitAt(os, n)
	a3 := count(last, cl.admitted_)
	ev := fmt.Sprintf("%d requests at 0, %d at W/2, then a burst of %d at 1.25·W admitted %d", h, n-h, n, a3)
	no := false
	if math.Abs(float64(a3-n)) <= math.Abs(float64(a3-h)) {
		t.Family, t.Anchor = policy.FixedWindow, policy.AnchorFirst
		t.FamilyEvidence = fmt.Sprintf("the quota came back whole at once, and %s (all, not only the first half): a fixed window", ev)
		t.AnchorEvidence = "each window opened with the key's first request after the last one closed, not on multiples of W in Unix time"
		t.RefusedEvidence = "a fixed window's refusals within a spent window change nothing observable"
	} else {
		t.Family = policy.SlidingLog
		t.FamilyEvidence = fmt.Sprintf("%s (the first half only, as old requests aged out): a sliding log", ev)
		t.RefusedCost = &no
		t.RefusedEvidence = "probes refused while the log was full did not delay its freeing: refusals are not logged"
	}
	return p.scope(ctx, name, deadline, cl, t, n)
}

// silent: probing an exhausted key got nothing back. Either refusals cost
// (each one pushes the next admission out) or the window is longer than
// the probing lasted; a quiet key tells which.
func (p *prober) silent(ctx context.Context, name string, deadline time.Time, cl classifier, t Tier, a int, probed time.Duration, q float64) (Tier, error) {
	dq := probed
	if left := time.Until(deadline) / 2; dq > left {
		dq = max(left, 200*time.Millisecond)
	}
	aq, err := p.quiet(ctx, name, cl, a, dq)
	if err != nil {
		return t, err
	}
	t.Capacity = Number{Value: float64(a), Low: float64(a), High: float64(a), Pinned: true, Evidence: fmt.Sprintf("a burst on a fresh key admitted %d", a)}
	if aq == 0 {
		t.Notes = append(t.Notes, fmt.Sprintf("nothing came back within %s, probed or left alone: the refill interval or window is longer than the budget allowed to watch (raise Budget)", fmtS(probed)))
		t.Window = Number{Value: probed.Seconds(), Low: probed.Seconds(), High: math.Inf(1), Evidence: fmt.Sprintf("no admission within %s after the quota was spent: W ≥ %s, not pinned", fmtS(probed), fmtS(probed))}
		return t, nil
	}
	return p.costlyTier(ctx, name, deadline, cl, costly(t, a, probed, q, aq, dq), a, dq, aq)
}

// costlyTier reads the recovery curve of a limiter whose refusals cost (a
// key left alone dq got aq of a back), then measures the scope.
func (p *prober) costlyTier(ctx context.Context, name string, deadline time.Time, cl classifier, t Tier, a int, dq time.Duration, aq int) (Tier, error) {
	full := time.Duration(0)
	if aq >= a {
		full = dq
	}
	t, scoped, err := p.curve(ctx, name, deadline, cl, t, a, full)
	if err != nil || scoped {
		return t, err
	}
	return p.scope(ctx, name, deadline, cl, t, a)
}

// quiet spends a fresh key, leaves it alone for d and counts what came back.
func (p *prober) quiet(ctx context.Context, name string, cl classifier, a int, d time.Duration) (int, error) {
	k, kf := p.key(ctx, name)
	ex := a + max(2, a/4)
	os, err := p.step(ctx, kf, append(append(burst(k, ex), idle(d)), burst(k, a+2)...)...)
	if err != nil {
		return 0, err
	}
	_, back := splitAt(os, ex)
	return count(back, cl.admitted_), nil
}

// costly is t for a limiter whose refusals cost: a spent key probed for
// probed got nothing while one left alone for dq got aq of a back.
func costly(t Tier, a int, probed time.Duration, q float64, aq int, dq time.Duration) Tier {
	t.Capacity = Number{Value: float64(a), Low: float64(a), High: float64(a), Pinned: true, Evidence: fmt.Sprintf("a burst on a fresh key admitted %d", a)}
	yes := true
	t.RefusedCost = &yes
	t.RefusedEvidence = fmt.Sprintf("probed at %.0f/s for %s after the quota was spent nothing was admitted, while a key left alone %s got %d back: refused requests use up the quota", q, fmtS(probed), fmtS(dq), aq)
	// Every probe of a spent key costs, so its refill cannot be watched:
	// the family is left open rather than guessed.
	t.FamilyEvidence = fmt.Sprintf("not pinned: every refused probe costs, so the refill of a spent key cannot be watched; a key left alone %s got %d of %d back", fmtS(dq), aq, a)
	t.Notes = append(t.Notes, "family not pinned: refused requests cost, so probing a spent key shows nothing; declare the family your limiter documents")
	if aq >= a {
		t.Window = Number{Value: dq.Seconds(), Low: 0, High: dq.Seconds(), Evidence: fmt.Sprintf("the whole quota came back within %s left alone: W ≤ %s, not pinned", fmtS(dq), fmtS(dq))}
	} else {
		rq := float64(aq) / dq.Seconds()
		t.Rate = Number{Value: rq, Low: math.Max(float64(aq-1), 0) / dq.Seconds(), High: float64(aq+1) / dq.Seconds(), Evidence: fmt.Sprintf("%d came back in %s left alone (not pinned: the refill's shape is unknown)", aq, fmtS(dq))}
		t.Window = Number{Value: float64(a) / rq, Low: float64(a) / t.Rate.High, High: float64(a) / math.Max(t.Rate.Low, 1e-6), Evidence: "K / r, not pinned"}
	}
	return t
}

// scope: with several instances, does a key spent on one still have its
// quota on another?
func (p *prober) scope(ctx context.Context, name string, deadline time.Time, cl classifier, t Tier, a int) (Tier, error) {
	if len(p.o.Targets) < 2 {
		t.ScopeEvidence = "one instance given: scope not measured (give every instance of the deployment in Targets)"
		return t, nil
	}
	if time.Until(deadline) < time.Second {
		t.ScopeEvidence = "no time left in the budget to measure the scope"
		return t, nil
	}
	k, kf := p.key(ctx, name)
	m := min(a, 50)
	ex := a + max(2, a/4)
	os, err := p.step(ctx, kf, append(pinned(burst(k, ex), 0), pinned(burst(k, m), 1)...)...)
	if err != nil {
		return t, err
	}
	_, other := splitAt(os, ex)
	got := count(other, cl.admitted_)
	if float64(got) >= 0.7*float64(m) {
		t.Scope = policy.ScopeInstance
		t.ScopeEvidence = fmt.Sprintf("a key spent on instance 1 still got %d of %d admitted at once on instance 2: each instance keeps its own quota", got, m)
	} else {
		t.Scope = policy.ScopeCluster
		t.ScopeEvidence = fmt.Sprintf("a key spent on instance 1 got %d of %d admitted on instance 2 right after: one quota shared by the instances", got, m)
	}
	return t, nil
}

func distToMultiple(t time.Time, w time.Duration) time.Duration {
	off := time.Duration(t.UnixNano() % int64(w))
	return min(off, w-off)
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// snapEpoch looks for a round window (whole seconds, then tenths, then
// hundredths) within n's range whose multiples in Unix time every instant
// lies on (within tol); steps finer than 4·tol are not tried (anything
// would fit).
func snapEpoch(n Number, instants [][2]time.Time, tol time.Duration) (time.Duration, bool) {
	if !n.Pinned || math.IsInf(n.High, 0) || n.High <= 0 {
		return 0, false
	}
	for _, step := range []time.Duration{time.Second, 100 * time.Millisecond, 10 * time.Millisecond} {
		if step < 4*tol {
			break
		}
		// A vague edge fits more windows; the anchor probe that follows
		// a fit checks it.
		// Of the round values within the range that fit, the one closest
		// to the estimate.
		lo := time.Duration(math.Ceil(n.Low*float64(time.Second)/float64(step))) * step
		best, found := time.Duration(0), false
		v := time.Duration(n.Value * float64(time.Second))
		for c, i := max(lo, step), 0; c.Seconds() <= n.High && i < 1000; c, i = c+step, i+1 {
			ok := true
			for _, e := range instants {
				if !multipleWithin(e[0].Add(-tol), e[1].Add(tol), c) {
					ok = false
					break
				}
			}
			// Edges W apart fit every divisor of W too, never more than
			// W: with two edges or more the largest fitting value is W.
			// Without them, the closest to the estimate.
			better := !found || absDur(c-v) < absDur(best-v)
			if len(instants) >= 2 {
				better = !found || c > best
			}
			if ok && better {
				best, found = c, true
			}
		}
		if found {
			return best, true
		}
	}
	return 0, false
}

// anchorProbe starts a fresh key in the middle of an epoch window of w and
// watches when its spent quota comes back: w/2 later (epoch-aligned) or w
// later (opened by the key's first request).
func (p *prober) anchorProbe(ctx context.Context, name string, deadline time.Time, cl classifier, n int, w time.Duration, q float64) (string, string, error) {
	if time.Until(deadline) < w*2+time.Second {
		return "", "no time left to tell epoch alignment from anchoring at a key's first request (raise Budget)", nil
	}
	// Wait until the middle of a window.
	now := time.Now()
	off := time.Duration(now.UnixNano() % int64(w))
	wait := (w/2 - off + w) % w
	sleep(ctx, wait)
	k, kf := p.key(ctx, name)
	ph := append(burst(k, n+max(2, n/4)), trickle(k, q, w*3/4+w/4+200*time.Millisecond))
	os, err := p.step(ctx, kf, ph...)
	if err != nil {
		return "", "", err
	}
	// The two predictions, from when the burst really went out: the next
	// multiple of w in Unix time (epoch), or w after the key's first
	// request (first). The reset is known to lie between the refusal
	// before the quota came back and the first admission's response.
	t0 := os[0].sent
	epochAt := time.Unix(0, (t0.UnixNano()/int64(w)+1)*int64(w))
	firstLo, firstHi := t0.Add(w), os[0].recv.Add(w)
	const tol = 30 * time.Millisecond
	ex := min(n+max(2, n/4), len(os))
	for _, r := range runs(os[:ex], os[ex:], cl) {
		lo := r.before.sent
		if lo.IsZero() {
			lo = r.first.sent
		}
		lo, hi := lo.Add(-tol), r.first.recv.Add(tol)
		isEpoch := !epochAt.Before(lo) && !epochAt.After(hi)
		isFirst := !firstHi.Before(lo) && !firstLo.After(hi)
		switch {
		case isEpoch && !isFirst:
			return policy.AnchorEpoch, fmt.Sprintf("a key first used %s into a window got its quota back at the next multiple of W = %s in Unix time, not W after its first request", fmtS(t0.Sub(epochAt.Add(-w))), w), nil
		case isFirst && !isEpoch:
			return policy.AnchorFirst, fmt.Sprintf("a key first used %s into a window of Unix time got its quota back W after its first request, not at the next multiple of W", fmtS(t0.Sub(epochAt.Add(-w)))), nil
		case isFirst && isEpoch:
			return "", "a key's quota came back where both anchorings predict (a busy machine blurred the instants): anchoring not pinned", nil
		}
	}
	return "", "a key first used mid-window did not get its quota back when either anchoring predicts: anchoring not pinned", nil
}

func fmtF(x float64) string { return strconv.FormatFloat(x, 'g', 4, 64) }

// edgeTest spends a fresh key just after a multiple of w in Unix time and
// asks again at 0.6·w: a bucket refilling at r has given ≈0.55·w·r back, a
// sliding counter over epoch windows of w nothing (its previous window
// weighs in only from the next edge).
func (p *prober) edgeTest(ctx context.Context, name string, cl classifier, a int, w time.Duration, r float64) (bool, string, error) {
	off := time.Duration(time.Now().UnixNano() % int64(w))
	sleep(ctx, (w+w/20-off)%w)
	k, kf := p.key(ctx, name)
	ex := a + max(2, a/4)
	d := w * 11 / 20
	// A second ask after the next edge (1.5·w after the spend): a counter
	// then gives part of the quota back (its previous window weighs
	// 0.55), a log or window spent at once all or nothing. A log whose
	// entries were made over time on a busy machine frees one at a time
	// too, and gives nothing at 0.55·w: only the second ask tells it from a
	// counter (a stability run took a log of 6 per 2 s for a counter).
	ph := append(append(burst(k, ex), idle(d)), burst(k, a)...)
	ph = append(append(ph, idle(w*19/20)), burst(k, a)...)
	os, err := p.step(ctx, kf, ph...)
	if err != nil {
		return false, "", err
	}
	spend, rest := splitAt(os, ex)
	back, later := splitAt(rest, a)
	aq, aq2 := count(back, cl.admitted_), count(later, cl.admitted_)
	expect := r * d.Seconds()
	// The test assumes the key was spent at once and every answer was a
	// decision: a spend that took a quarter of the window (a large limit on
	// a slow machine) or answers that were neither admitted nor refused
	// leave it undecided, never a counter.
	undecided := len(back) - aq - count(back, cl.refused_)
	if took := spend[len(spend)-1].recv.Sub(spend[0].sent); took > w/4 || undecided > 0 {
		return false, fmt.Sprintf("the edge test (a key spent just after a multiple of %s in Unix time) was inconclusive: the spend took %s and %d answers were neither admitted nor refused", w, fmtS(took), undecided), nil
	}
	if float64(aq) <= 0.25*expect && aq2 > 0 && aq2 < a {
		return true, fmt.Sprintf("a key spent just after a multiple of %s in Unix time got %d back %s later, where a bucket refilling at %.3g/s gives ≈%.1f, and %d of %d after the next edge (a part, as the previous window's weight fades)", w, aq, fmtS(d), r, expect, aq2, a), nil
	}
	if float64(aq) <= 0.25*expect {
		return false, fmt.Sprintf("a key spent just after a multiple of %s in Unix time got %d back %s later (≈%.1f expected of a bucket), then %d of %d after the next edge (not the part a counter gives back)", w, aq, fmtS(d), expect, aq2, a), nil
	}
	return false, fmt.Sprintf("a key spent just after a multiple of %s in Unix time got %d back %s later (≈%.1f expected of a bucket): not a counter waiting for the window's edge", w, aq, fmtS(d), expect), nil
}

// multipleWithin reports whether a multiple of w in Unix time lies in [lo, hi].
func multipleWithin(lo, hi time.Time, w time.Duration) bool {
	k := hi.UnixNano() / int64(w) * int64(w)
	return k >= lo.UnixNano()
}
