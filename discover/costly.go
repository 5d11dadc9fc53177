package discover

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/policy"
)

// A limiter whose refused requests cost cannot be watched refilling: every
// probe of a spent key spends it again. Its recovery curve can still be
// read, one sample per key: spend a fresh key with exactly its quota (no
// refusal, so nothing extra is counted), leave it alone d, then ask for the
// whole quota once and count what is admitted. The families draw different
// curves (N the quota, W the window, K/r a bucket's refill time):
//
//	bucket        back one at a time from the start: ≈ r·d, whole at K/r
//	fixed window  nothing, then all at once at W (first anchoring)
//	sliding log   nothing, then all at once at W (the entries all aged out)
//	counter       nothing until W, then ≈ N·(d−W)/W, whole at 2W (first
//	              anchoring: the previous period's weight fading)
//
// A sliding counter over epoch windows spent just before an edge looks like
// a bucket, and spent just after one like a counter anchored first: the
// anchoring is left open when the keys were spent near a round edge.

// sample is one key's recovery: d after it was spent (known within ±u), got
// of the quota back.
type sample struct {
	d, u time.Duration
	got  int
}

func (s sample) String() string { return fmt.Sprintf("%d at %s", s.got, fmtS(s.d)) }

// ladder spends m fresh keys at once with a requests each, then asks each
// for a+2 at d·i/m (i = 1..m), all in one step so every sample shares one
// spend instant. It returns the samples in order and when the keys were
// spent.
func (p *prober) ladder(ctx context.Context, name string, cl classifier, a, m int, d time.Duration) ([]sample, time.Time, error) {
	ds := make([]time.Duration, m)
	for i := range ds {
		ds[i] = d * time.Duration(i+1) / time.Duration(m)
	}
	return p.ladderAt(ctx, name, cl, a, ds)
}

// ladderAt is a ladder sampled at the delays ds (increasing).
func (p *prober) ladderAt(ctx context.Context, name string, cl classifier, a int, ds []time.Duration) ([]sample, time.Time, error) {
	m := len(ds)
	if p.o.Keys != nil {
		m = min(m, len(p.o.Keys.ByTier[name]))
	}
	var keys []string
	var kf *attacks.KeyFile
	for range m {
		k, one := p.key(ctx, name)
		keys = append(keys, k)
		if one != nil {
			if kf == nil {
				kf = &attacks.KeyFile{Source: one.Source, ByTier: map[string][]string{name: nil}}
			}
			kf.ByTier[name] = append(kf.ByTier[name], one.ByTier[name]...)
		}
	}
	var ph []attacks.Phase
	for _, k := range keys {
		ph = append(ph, burst(k, a)...)
	}
	prev := time.Duration(0)
	for i, k := range keys {
		at := ds[i]
		ph = append(ph, idle(at-prev))
		ph = append(ph, burst(k, a+2)...)
		prev = at
	}
	os, err := p.step(ctx, kf, ph...)
	if err != nil {
		return nil, time.Time{}, err
	}
	// Each key's first m·a outcomes (in send order) are its spend, the
	// rest its sample.
	byKey := map[string][]obs{}
	var order []string
	for _, o := range os {
		if _, ok := byKey[o.key]; !ok {
			order = append(order, o.key)
		}
		byKey[o.key] = append(byKey[o.key], o)
	}
	var out []sample
	var spent time.Time
	for _, k := range order {
		all := byKey[k]
		if len(all) <= a {
			continue
		}
		spend, back := all[:a], all[a:]
		if spent.IsZero() {
			spent = spend[0].sent
		}
		// From the spend's first request to the sample's first; either
		// end known to its request's round trip.
		d := back[0].sent.Sub(spend[0].sent)
		u := spend[len(spend)-1].recv.Sub(spend[0].sent) + back[0].recv.Sub(back[0].sent)
		got := count(back, cl.admitted_)
		out = append(out, sample{d: d, u: u, got: got})
		if n := count(spend, cl.admitted_); n < a {
			out[len(out)-1].got = -1 // the spend was not admitted whole: unusable
		}
	}
	return out, spent, nil
}

// curve reads the family of a limiter whose refusals cost from ladders of
// samples; t already holds N and the cost. full is a time within which a
// key left alone got its quota back (0 when unknown).
// scoped says the scope was measured too (the split test does).
func (p *prober) curve(ctx context.Context, name string, deadline time.Time, cl classifier, t Tier, a int, full time.Duration) (Tier, bool, error) {
	if a < 3 {
		t.Notes = append(t.Notes, fmt.Sprintf("recovery curve not read: a quota of %d is too small to show its shape", a))
		return t, false, nil
	}
	m := max(3, min(8, 2000/a))
	span := full
	if span <= 0 {
		span = 4 * time.Second
	}
	var all []sample
	var spent []time.Time
	for try := 0; try < 3; try++ {
		if time.Until(deadline) < span+2*time.Second {
			break
		}
		offEdges(ctx)
		ss, at, err := p.ladder(ctx, name, cl, a, m, span)
		if err != nil {
			return t, false, err
		}
		all = append(all, ss...)
		spent = append(spent, at)
		// A ladder whose first sample is already whole is too coarse: the
		// next one spans up to that sample.
		first := -1
		for i, s := range ss {
			if s.got >= a {
				first = i
				break
			}
		}
		switch {
		case first == 0:
			span = ss[0].d
			continue
		case first < 0 && ss[len(ss)-1].got >= 0 && ss[len(ss)-1].got < a:
			span *= 2 // not whole within span: look further
			continue
		}
		break
	}
	fam, ev, ok := readCurve(&t, a, all, spent)
	if !ok {
		t.FamilyEvidence += "; " + ev
		t.Notes = append(t.Notes, "recovery curve: "+ev)
		return t, false, nil
	}
	t.Family = fam
	t.FamilyEvidence = ev
	kept := t.Notes[:0]
	for _, n := range t.Notes {
		if !strings.HasPrefix(n, "family not pinned") {
			kept = append(kept, n)
		}
	}
	t.Notes = kept
	if fam == policy.SlidingCounter && t.Anchor == "" {
		if c, ok := nearRoundEdge(t.Window, spent); ok {
			if err := p.counterAnchor(ctx, name, deadline, cl, &t, a, c); err != nil {
				return t, false, err
			}
		}
	}
	if fam == policy.FixedWindow || fam == policy.SlidingLog {
		// Nothing, then all: a window or a log; half the quota at 0 and half
		// at W/2 tells them apart (refusals cost in both without changing
		// what a burst at 1.25·W gets).
		cost, costEv := t.RefusedCost, t.RefusedEvidence
		t, err := p.splitTest(ctx, name, deadline, cl, t, a, time.Duration(t.Window.Value*float64(time.Second)))
		t.RefusedCost, t.RefusedEvidence = cost, costEv // measured above; the split test assumes refusals free
		return t, true, err
	}
	return t, false, nil
}

// readCurve names the family that fits the samples and sets its numbers on
// t, or says why none fits.
func readCurve(t *Tier, a int, all []sample, spent []time.Time) (policy.Algorithm, string, bool) {
	var ss []sample
	for _, s := range all {
		if s.got >= 0 {
			ss = append(ss, s)
		}
	}
	sortSamples(ss)
	if len(ss) < 3 {
		return "", "too few samples of a key's recovery fitted the budget (raise Budget)", false
	}
	desc := make([]string, len(ss))
	for i, s := range ss {
		desc[i] = s.String()
	}
	seen := fmt.Sprintf("keys spent with their %d and left alone got back %s", a, strings.Join(desc, ", "))
	// zeroEnd: the last sample of the leading zeros; whole: the first whole.
	zeroEnd, whole, partial := -1, -1, 0
	for i, s := range ss {
		switch {
		case s.got == 0 && zeroEnd == i-1:
			zeroEnd = i
		case s.got >= a && whole < 0:
			whole = i
		case s.got > 0 && s.got < a:
			partial++
		}
	}
	if whole < 0 {
		return "", seen + ": never the whole quota, so the curve's end was not seen", false
	}
	n := float64(a)
	f := ss[whole]
	switch {
	case partial == 0 && zeroEnd == whole-1 && zeroEnd >= 0:
		// Nothing, then all at once: the window lies between the last
		// nothing and the first all.
		z := ss[zeroEnd]
		lo, hi := (z.d - z.u).Seconds(), (f.d + f.u).Seconds()
		t.Window = Number{Value: (lo + hi) / 2, Low: math.Max(lo, 0), High: hi, Pinned: true,
			Evidence: fmt.Sprintf("nothing came back to a key left alone %s, all of it to one left alone %s", fmtS(z.d), fmtS(f.d))}
		t.Rate = Number{Value: n / t.Window.Value, Low: n / t.Window.High, High: n / math.Max(t.Window.Low, 1e-3), Pinned: true, Evidence: "N / W"}
		return policy.FixedWindow, seen + ": nothing, then the whole quota at once", true
	case partial == 0:
		return "", seen + ": the quota came back whole before any sample saw it come back in part or not at all (too coarse)", false
	}
	// Back in part: a bucket (from the start) or a sliding counter (only
	// after a window of nothing). Each sample bounds the refill time T
	// (bucket: got ≈ N·d/T) or the window W (counter anchored at the
	// first request: got ≈ N·(d−W)/W, nothing before W, whole by 2W),
	// within ±1 for the rounding of either.
	var zeroTill time.Duration
	if zeroEnd >= 0 {
		zeroTill = ss[zeroEnd].d
	}
	bucketLo, bucketHi := 0.0, math.Inf(1)
	counterLo, counterHi := 0.0, math.Inf(1)
	for _, s := range ss {
		dlo, dhi := math.Max((s.d-s.u).Seconds(), 1e-3), (s.d + s.u).Seconds()
		g := float64(s.got)
		if s.got >= a {
			// Whole: T ≤ d·N/(N−1) (the last token may round up);
			// counter: 2W − W/N ≤ d.
			bucketHi = math.Min(bucketHi, dhi*n/(n-1))
			counterHi = math.Min(counterHi, dhi/(2-1/n))
			continue
		}
		// Bucket: N·d/T ∈ [g−1, g+1].
		bucketLo = math.Max(bucketLo, n*dlo/(g+1))
		if g > 1 {
			bucketHi = math.Min(bucketHi, n*dhi/(g-1))
		}
		// Counter: d/W − 1 ∈ [(g−1)/N, (g+1)/N] when past W; nothing
		// back means d ≤ W·(1 + 1/N).
		counterLo = math.Max(counterLo, dlo/(1+(g+1)/n))
		if g > 1 {
			counterHi = math.Min(counterHi, dhi/(1+(g-1)/n))
		}
		if g > 0 {
			counterHi = math.Min(counterHi, dhi) // something back: past W
		}
	}
	isBucket := bucketLo <= bucketHi
	isCounter := counterLo <= counterHi && zeroEnd >= 0
	switch {
	case isBucket && !isCounter:
		r := Number{Value: n * 2 / (bucketLo + bucketHi), Low: n / bucketHi, High: n / bucketLo, Pinned: true,
			Evidence: fmt.Sprintf("keys spent and left alone came back in part, in proportion to the time left alone (%s)", strings.Join(desc, ", "))}
		t.Rate = r
		t.Window = Number{Value: n / r.Value, Low: bucketLo, High: bucketHi, Pinned: true, Evidence: "K / r"}
		t.Capacity.Low = t.Capacity.Value
		return policy.TokenBucket, seen + ": back one at a time from the start, in proportion to the time left alone: a bucket", true
	case isCounter && !isBucket:
		w := Number{Value: (counterLo + counterHi) / 2, Low: counterLo, High: counterHi, Pinned: true,
			Evidence: fmt.Sprintf("nothing back for %s, then in part, whole at %s: W within what every sample allows for a counter whose previous period fades over W", fmtS(zeroTill), fmtS(f.d))}
		t.Window = w
		t.Rate = Number{Value: n / w.Value, Low: n / w.High, High: n / math.Max(w.Low, 1e-3), Pinned: true, Evidence: "N / W"}
		// A counter over epoch windows spent just after an edge draws the
		// same curve: first anchoring only when no round W in range has
		// an edge just before the spend.
		t.Anchor = policy.AnchorFirst
		t.AnchorEvidence = fmt.Sprintf("nothing came back for a whole window after the keys' first request (%s ≈ W), and the keys were spent away from the edges in Unix time of every W in range that is a multiple of half a second", fmtS(zeroTill))
		if c, ok := nearRoundEdge(w, spent); ok {
			t.Anchor = ""
			t.AnchorEvidence = fmt.Sprintf("the keys were spent just after a multiple of %s in Unix time, where an epoch-aligned counter draws the same curve: anchoring not pinned", c)
		}
		return policy.SlidingCounter, seen + ": nothing for about a window, then back in part as the previous period's weight faded, whole by about two windows: a sliding counter", true
	case isBucket && isCounter:
		return "", seen + ": fits both a bucket and a sliding counter (too few samples to tell)", false
	}
	return "", seen + ": fits neither a bucket, a window nor a sliding counter", false
}

// counterAnchor tells a counter anchored at a key's first request from one
// over epoch windows of c: keys spent 0.7·c into an epoch window get back
// from 0.3·c on when epoch-aligned, nothing before W when anchored first.
// Samples between the two show which; the anchoring stays open otherwise.
func (p *prober) counterAnchor(ctx context.Context, name string, deadline time.Time, cl classifier, t *Tier, a int, c time.Duration) error {
	n := float64(a)
	wLo := time.Duration(t.Window.Low * float64(time.Second))
	lo, hi := c*3/10+time.Duration(1.2*float64(c)/n), wLo
	if hi-lo < 100*time.Millisecond || time.Until(deadline) < c+hi+2*time.Second {
		t.AnchorEvidence += " (no time or room left to tell them apart)"
		return nil
	}
	off := time.Duration(time.Now().UnixNano() % int64(c))
	sleep(ctx, (c*7/10-off+c)%c)
	third := (hi - lo) / 4
	ss, at, err := p.ladderAt(ctx, name, cl, a, []time.Duration{lo + third, lo + 2*third, lo + 3*third})
	if err != nil {
		return err
	}
	epochAt := time.Duration(at.UnixNano() % int64(c))
	var zero, some int
	var desc []string
	for _, s := range ss {
		// Only samples surely between the epoch edge (+ a share) and W.
		if s.got < 0 || s.d-s.u < c-epochAt+time.Duration(1.2*float64(c)/n) || s.d+s.u > wLo {
			continue
		}
		desc = append(desc, s.String())
		if s.got == 0 {
			zero++
		} else {
			some++
		}
	}
	switch {
	case zero > 0 && some == 0:
		t.Anchor = policy.AnchorFirst
		t.AnchorEvidence = fmt.Sprintf("keys spent %s into an epoch window of %s got back %s: nothing before W, where an epoch-aligned counter would have given some back after its edge", fmtS(epochAt), c, strings.Join(desc, ", "))
	case some > 0 && zero == 0:
		t.Anchor = policy.AnchorEpoch
		t.AnchorEvidence = fmt.Sprintf("keys spent %s into an epoch window of %s got back %s: some after the next multiple of %s in Unix time, before W after their first request", fmtS(epochAt), c, strings.Join(desc, ", "), c)
		t.Window = Number{Value: c.Seconds(), Low: c.Seconds(), High: c.Seconds(), Pinned: true, Evidence: fmt.Sprintf("the round window within the range whose Unix-time edges the quota waited for (%s)", t.Window.Evidence)}
		t.Rate = Number{Value: n / c.Seconds(), Low: n / c.Seconds(), High: n / c.Seconds(), Pinned: true, Evidence: "N / W"}
	default:
		t.AnchorEvidence += fmt.Sprintf("; keys spent %s into an epoch window of %s got back %s: still not told apart", fmtS(epochAt), c, orNone(strings.Join(desc, ", "), "no sample in between"))
	}
	return nil
}

// nearRoundEdge reports a round window c within w's range (a multiple of
// half a second) with an edge in Unix time shortly before one of the spend
// instants: an epoch-aligned counter of c spent there first gives back
// after c − off, which the range cannot tell from W when off is below its
// width (or a tenth of c).
func nearRoundEdge(w Number, spent []time.Time) (time.Duration, bool) {
	const step = 500 * time.Millisecond
	width := time.Duration((w.High - w.Low) * float64(time.Second))
	for c := time.Duration(math.Ceil(w.Low*float64(time.Second)/float64(step))) * step; c.Seconds() <= w.High; c += step {
		if c <= 0 {
			continue
		}
		for _, s := range spent {
			if off := time.Duration(s.UnixNano() % int64(c)); off <= max(width, c/10) {
				return c, true
			}
		}
	}
	return 0, false
}

// offEdges waits until a quarter past a multiple of half a second in Unix
// time, so keys spent next lie away from the edges of round epoch windows.
func offEdges(ctx context.Context) {
	const grid = 500 * time.Millisecond
	off := time.Duration(time.Now().UnixNano() % int64(grid))
	sleep(ctx, (grid/2-off+grid)%grid)
}

func sortSamples(ss []sample) {
	for i := 1; i < len(ss); i++ {
		for j := i; j > 0 && ss[j].d < ss[j-1].d; j-- {
			ss[j], ss[j-1] = ss[j-1], ss[j]
		}
	}
}
