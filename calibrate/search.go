package calibrate

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/rlverify/rlverify/policy"
)

// The searches, and why they do not replay the traffic once per candidate.
//
// Arrivals are held in memory once, compactly: per key its times as int64
// Unix ns (8 bytes a request, plus 2 for the status), so memory is
// O(keys + requests) and a replay walks slices without parsing again.
//
// Capacity K at the declared rate (and count N at the declared window):
//   - admitAll gives, per key, in one pass over its arrivals, the smallest K
//     that admits all of them (the token bucket's largest deficit, GCRA's
//     largest TAT lead, the window families' largest count). A key whose
//     threshold is ≤ K cannot be refused at K, so a replay at K only walks
//     keys above it — at the answer, the few keys with the highest peaks.
//   - A target of 0 refusals is then answered without any replay: the
//     largest threshold of the tier. For a target share (or a per-key
//     share), refusals fall as K grows, so a binary search over
//     [1, largest threshold] finds the smallest K that meets the target in
//     ⌈log2(largest threshold)⌉ replays, each through the reference limiter
//     (limiters.New), of the keys above the candidate only.
//   - Cost: O(R) for the thresholds plus O(R_above(K)·log Kmax) for the
//     replays, R the tier's requests, R_above(K) those of keys above K.
//
// Rate r at the declared K (and window W at the declared N): candidates are
// the round numbers of a grid (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8 × 10^e
// per minute; 1 ms … 1 day for windows), refusals fall as r grows (rise as
// W grows), and a binary search over the grid replays, at each candidate,
// only the keys whose one-pass threshold at that rate (window) is above K
// (N): O(R) threshold passes plus the replays of the keys that can be
// refused, per candidate, O(log grid) candidates.
//
// Requests logged at the same instant (whole-second logs have many) give a
// lower bound with no replay: no algorithm admits more than K of a key at
// one instant (instantBound), so the search starts at the smallest K whose
// sure refusals fit the target.
//
// Monotony is what the binary search assumes; TestSearchMatchesBruteForce
// checks every answer against replaying every candidate in turn.

type searcher struct {
	t *Traffic
	g *group
	o *Options
	// span is the traffic's first to last arrival: a rate below one per
	// span, or a window longer than it, is not grounded by this traffic.
	span time.Duration
	// bound caches instantBound.
	bound int64
}

// meets reports whether a replay's refusals keep to the target.
func (s *searcher) meets(x tally) bool {
	if float64(x.legitRefused) > s.o.MaxRefused*float64(s.g.legitTotal)+1e-9 {
		return false
	}
	return s.o.MaxRefusedPerKey <= 0 || x.worstKeyShare <= s.o.MaxRefusedPerKey+1e-12
}

// thresholds returns each key's admitAll for base.
func (s *searcher) thresholds(base policy.Limit) ([]int64, int64) {
	thr := make([]int64, len(s.g.keys))
	var top int64
	for i, k := range s.g.keys {
		thr[i] = admitAll(base, s.t.times[k])
		if s.g.legit[i] > 0 {
			top = max(top, thr[i])
		}
	}
	return thr, max(top, 1)
}

// at replays the legitimate keys sel keeps at limit l.
func (s *searcher) at(l policy.Limit, sel func(i int) bool) (tally, error) {
	return s.t.replay(s.g, l.Algorithm, []policy.Limit{l}, func(i int) bool { return s.g.legit[i] > 0 && sel(i) }, nil)
}

func paramNames(a policy.Algorithm) (count, rate string) {
	if a.Bucketed() {
		return "capacity", "rate"
	}
	return "limit", "window"
}

// count finds the smallest capacity (limit) at base's rate (window).
func (s *searcher) count(base policy.Limit) (Recommended, error) {
	name, _ := paramNames(base.Algorithm)
	rec := Recommended{LimitName: base.Name, Algorithm: base.Algorithm, Param: name, Declared: fmt.Sprint(base.Count)}
	thr, top := s.thresholds(base)
	ok := func(n int64) (bool, error) {
		l, err := withCount(base, n)
		if err != nil {
			return false, err
		}
		rec.Replays++
		x, err := s.at(l, func(i int) bool { return thr[i] > n })
		return s.meets(x), err
	}
	// Smallest n in [1, top] with ok(n); ok(top) holds (nobody above it),
	// and no n below the instant bound can hold.
	lo, hi := int64(1), top
	// GCRA rounds its emission interval T to whole nanoseconds, so it can
	// admit K+1 at one instant when (K+1)·round(T) ≤ round(K·T), which
	// needs T ≤ K/2 + 1 ns (rates above 10^8/s): then it starts from 1.
	if b := s.instantBound(); base.Algorithm != policy.GCRA || 1e9/base.R() > float64(b)/2+1 {
		lo = min(b, top)
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		good, err := ok(mid)
		if err != nil {
			return rec, err
		}
		if good {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	l, err := withCount(base, lo)
	if err != nil {
		rec.Why = err.Error()
		return rec, nil
	}
	return s.finish(rec, l, fmt.Sprint(lo))
}

// above selects the keys whose admit-all threshold at l's rate (window)
// is above l's capacity (count): the only keys l can refuse. It is called
// from the replay's workers, one pass over each key's arrivals.
func (s *searcher) above(l policy.Limit) func(i int) bool {
	return func(i int) bool {
		ts := s.t.times[s.g.keys[i]]
		return int64(len(ts)) > l.Count && admitAll(l, ts) > l.Count
	}
}

// instantBound is the smallest capacity (count) that the requests logged
// at one same instant allow: no algorithm admits more than K (N) requests
// of a key at one instant, so a key's a legitimate arrivals at one instant
// lose at least a − K, whatever else happens. Below the returned K these
// sure refusals alone exceed the target, so the search starts there
// without replaying anything. One pass over the tier, once per tier.
func (s *searcher) instantBound() int64 {
	if s.bound > 0 {
		return s.bound
	}
	var sizes []int64 // legitimate arrivals per instant, > 1 only
	for i, k := range s.g.keys {
		ts, ab := s.t.times[k], s.g.abusive[i]
		for j := 0; j < len(ts); {
			n, e := int64(0), j
			for ; e < len(ts) && ts[e] == ts[j]; e++ {
				if ab == nil || !ab[e] {
					n++
				}
			}
			if n > 1 {
				sizes = append(sizes, n)
			}
			j = e
		}
	}
	budget := s.o.MaxRefused * float64(s.g.legitTotal)
	sure := func(k int64) (n float64) {
		for _, m := range sizes {
			n += float64(max(0, m-k))
		}
		return n
	}
	lo, hi := int64(1), int64(1)
	for _, m := range sizes {
		hi = max(hi, m)
	}
	for lo < hi { // sure falls as k grows
		mid := lo + (hi-lo)/2
		if sure(mid) <= budget+1e-9 {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	s.bound = lo
	return lo
}

// finish replays the found limit over every key that it can refuse
// (abusive ones included) for its outcome.
func (s *searcher) finish(rec Recommended, l policy.Limit, value string) (Recommended, error) {
	x, err := s.t.replay(s.g, l.Algorithm, []policy.Limit{l}, s.t.canRefuse(s.g, []policy.Limit{l}), nil)
	if err != nil {
		return rec, err
	}
	rec.Replays++
	rec.Found, rec.Value, rec.Limit, rec.Refused = true, value, l, s.g.outcome(x)
	return rec, nil
}

// rateGrid is round rates per second, ascending (per minute: 0.01 …
// 8·10^7).
var rateGrid = func() []float64 {
	var g []float64
	for e := -2; e <= 7; e++ {
		for _, m := range []float64{1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8} {
			g = append(g, m*math.Pow(10, float64(e))/60)
		}
	}
	return g
}()

// windowGrid is round windows, ascending.
var windowGrid = func() []time.Duration {
	var g []time.Duration
	for _, d := range []time.Duration{time.Millisecond, time.Second, time.Minute, time.Hour} {
		var ms []time.Duration
		switch d {
		case time.Millisecond:
			ms = []time.Duration{1, 2, 5, 10, 20, 50, 100, 200, 500}
		case time.Second:
			ms = []time.Duration{1, 2, 5, 10, 15, 20, 30}
		case time.Minute:
			ms = []time.Duration{1, 2, 5, 10, 15, 20, 30}
		case time.Hour:
			ms = []time.Duration{1, 2, 3, 6, 12, 24}
		}
		for _, m := range ms {
			g = append(g, m*d)
		}
	}
	return g
}()

// withRate returns base with the i-th candidate of the rate grid (bucket
// families) or window grid (window families), or false when it does not
// make a valid limit.
func withRate(base policy.Limit, i int) (policy.Limit, string, bool) {
	x := policy.Limit{Name: base.Name, Algorithm: base.Algorithm, ErrorBound: base.ErrorBound}
	var label string
	if base.Algorithm.Bucketed() {
		x.Capacity, x.Rate = base.Capacity, policy.Rate(rateGrid[i])
		label = policy.FormatRate(rateGrid[i])
	} else {
		x.Count, x.Window = base.Count, policy.Duration(windowGrid[i])
		label = windowGrid[i].String()
	}
	l, err := normalized(x)
	return l, label, err == nil
}

func gridLen(a policy.Algorithm) int {
	if a.Bucketed() {
		return len(rateGrid)
	}
	return len(windowGrid)
}

// rate finds the smallest round rate at base's capacity (bucket families)
// or the largest round window at base's count (window families).
func (s *searcher) rate(base policy.Limit) (Recommended, error) {
	_, name := paramNames(base.Algorithm)
	rec := Recommended{LimitName: base.Name, Algorithm: base.Algorithm, Param: name}
	bucket := base.Algorithm.Bucketed()
	if bucket {
		rec.Declared = policy.FormatRate(base.R())
	} else {
		rec.Declared = base.W().String()
	}
	var idx []int // valid grid indexes, ordered from laxest to strictest
	for i := 0; i < gridLen(base.Algorithm); i++ {
		l, _, ok := withRate(base, i)
		if ok && s.grounded(l) {
			idx = append(idx, i)
		}
	}
	if bucket { // laxest = highest rate
		sort.Sort(sort.Reverse(sort.IntSlice(idx)))
	}
	ok := func(k int) (bool, error) {
		l, _, _ := withRate(base, idx[k])
		rec.Replays++
		x, err := s.at(l, s.above(l))
		return s.meets(x), err
	}
	if len(idx) == 0 {
		rec.Why = "no round " + name + " makes a valid limit with " + rec.Declared
		return rec, nil
	}
	good, err := ok(0)
	if err != nil {
		return rec, err
	}
	if !good {
		rec.Why = fmt.Sprintf("no %s meets the target at %s %d: the capacity itself is too small", name, paramOf(base), base.Count)
		return rec, nil
	}
	// Largest k (strictest) with ok(k); ok is true on a prefix.
	lo, hi := 0, len(idx)-1
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		good, err := ok(mid)
		if err != nil {
			return rec, err
		}
		if good {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	l, label, _ := withRate(base, idx[lo])
	if lo == len(idx)-1 {
		rec.Why = fmt.Sprintf("the strictest round rate or window the traffic's span of %s can ground: a longer record may allow less", s.span)
	}
	return s.finish(rec, l, label)
}

// grounded reports whether the traffic says anything about l's rate: at
// least one refill per span (bucket families), a window no longer than
// the span (window families).
func (s *searcher) grounded(l policy.Limit) bool {
	if s.span <= 0 {
		return true
	}
	if l.Algorithm.Bucketed() {
		return l.R()*s.span.Seconds() >= 1
	}
	return l.W() <= s.span
}

func paramOf(l policy.Limit) string {
	c, _ := paramNames(l.Algorithm)
	return c
}

// countCurve is the refused share over capacity (count) at base's rate
// (window): about 16 points from 1 to the tier's largest threshold.
func (s *searcher) countCurve(base policy.Limit) (Curve, error) {
	name, _ := paramNames(base.Algorithm)
	c := Curve{Algorithm: base.Algorithm, Param: name}
	thr, top := s.thresholds(base)
	var xs []int64
	for _, f := range []float64{0, 1.0 / 16, 1.0 / 8, 3.0 / 16, 1.0 / 4, 5.0 / 16, 3.0 / 8, 1.0 / 2, 5.0 / 8, 3.0 / 4, 7.0 / 8, 1, 1.25, 1.5} {
		n := max(1, int64(math.Round(f*float64(top))))
		if len(xs) == 0 || n > xs[len(xs)-1] {
			xs = append(xs, n)
		}
	}
	if d := base.Count; d > 0 && !slices.Contains(xs, d) && d < 4*top {
		xs = append(xs, d)
		sort.Slice(xs, func(a, b int) bool { return xs[a] < xs[b] })
	}
	for _, n := range xs {
		l, err := withCount(base, n)
		if err != nil {
			continue
		}
		x, err := s.at(l, func(i int) bool { return thr[i] > n })
		if err != nil {
			return c, err
		}
		c.Points = append(c.Points, Point{X: float64(n), Label: fmt.Sprint(n), Share: share(x.legitRefused, s.g.legitTotal)})
	}
	return c, nil
}

// rateCurve is the refused share over the round rates (windows) from a
// sixteenth to sixteen times the declared one.
func (s *searcher) rateCurve(base policy.Limit) (Curve, error) {
	_, name := paramNames(base.Algorithm)
	c := Curve{Algorithm: base.Algorithm, Param: name}
	for i := 0; i < gridLen(base.Algorithm); i++ {
		l, label, ok := withRate(base, i)
		if !ok {
			continue
		}
		var x float64
		if base.Algorithm.Bucketed() {
			x = l.R()
			if x < base.R()/16 || x > base.R()*16 {
				continue
			}
		} else {
			x = l.W().Seconds()
			if x < base.W().Seconds()/16 || x > base.W().Seconds()*16 {
				continue
			}
		}
		y, err := s.at(l, s.above(l))
		if err != nil {
			return c, err
		}
		c.Points = append(c.Points, Point{X: x, Label: label, Share: share(y.legitRefused, s.g.legitTotal)})
	}
	return c, nil
}

func share(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}
