package reports

import (
	"cmp"
	"math"
	"slices"
	"sort"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// Limits of the timeline, which is for drawing only: the checks always
// judge the full history.
const (
	// MaxTimelineKeys is how many keys get a timeline: the busiest.
	MaxTimelineKeys = 20
	// MaxTimelineInstances is how many instances of one key get their own
	// series (the busiest), when the key went to more than one.
	MaxTimelineInstances = 8
	// MaxTimelineBuckets bounds the number of time buckets.
	MaxTimelineBuckets = 2000
	// minTimelineBuckets is the fewest buckets aimed at; between the two the
	// aim is one bucket per two events.
	minTimelineBuckets = 400
)

// Timeline is the history downsampled into equal time buckets, per key, for
// the HTML plots. Bucket i covers [Start + i·Width, Start + (i+1)·Width);
// every series has Buckets entries. Events are placed by their Sent time.
type Timeline struct {
	// Start is the offset of bucket 0 (ns since the run start).
	Start int64 `json:"start"`
	// Width of one bucket, ns: 1, 2 or 5 × a power of ten, chosen so that
	// there are at most MaxTimelineBuckets.
	Width   int64 `json:"width"`
	Buckets int   `json:"buckets"`
	// Keys are the busiest keys (at most MaxTimelineKeys), busiest first.
	Keys []KeyTimeline `json:"keys"`
	// OmittedKeys counts the keys with events that have no timeline.
	OmittedKeys int `json:"omitted_keys,omitempty"`
	// Traffic is every request of the run in coarser bins (and one by one
	// when there are few): the per-second panel and the instance lanes.
	Traffic *Traffic `json:"traffic,omitempty"`
}

// KeyTimeline is one key's series.
type KeyTimeline struct {
	Key      string `json:"key"`
	Tier     string `json:"tier,omitempty"`
	Requests int64  `json:"requests"`
	// Limit is the first limit of the key's tier, which Envelope and Level
	// are computed for; nil when no tier applies (then both are empty).
	Limit *policy.Limit `json:"limit,omitempty"`
	// FirstSent is the send time of the key's first request: the origin of
	// Envelope.
	FirstSent int64 `json:"first_sent"`
	// Envelope[i] is the most admissions Limit allows from FirstSent to the
	// end of bucket i, starting full: K + r·t for buckets, N per window
	// touched for windows (epoch-aligned for fixed windows), (1 + error
	// bound)·N per window for sliding counters. Compare it with the
	// cumulative sum of All.Admitted.
	Envelope []float64 `json:"envelope,omitempty"`
	// Level[i] estimates the tokens left (buckets) or the remaining count
	// (windows) by simulating Limit on the admitted requests' send times
	// (but those sent while the store was down or slow, or within the
	// policy's recovery time after: the failure mode decides them):
	// the lowest value after an admission in bucket i, else the value at
	// its end. Below zero the limiter admitted more than the declared
	// algorithm would have (an estimate: send times, not decision times).
	Level []float64 `json:"level,omitempty"`
	// All is every request of the key; Instances one series per instance
	// (only when the key went to more than one).
	All       Series   `json:"all"`
	Instances []Series `json:"instances,omitempty"`
	// OmittedInstances counts instances past MaxTimelineInstances.
	OmittedInstances int `json:"omitted_instances,omitempty"`
}

// Series counts one key's requests (on one instance, or all) per bucket.
type Series struct {
	// Instance index into Run.Instances; -1 for all instances.
	Instance int   `json:"instance"`
	Requests int64 `json:"requests"`
	Admitted []int `json:"admitted"`
	Rejected []int `json:"rejected"`
	// Errors are requests with no decision (no response, other statuses).
	Errors []int `json:"errors"`
	// LatencyP50 and LatencyP99 are the decision latencies (Recv − Sent of
	// admitted and rejected requests sent in the bucket), ns; 0 when none.
	LatencyP50 []int64 `json:"latency_p50"`
	LatencyP99 []int64 `json:"latency_p99"`
}

// End is the offset just past the last bucket.
func (t *Timeline) End() int64 { return t.Start + int64(t.Buckets)*t.Width }

// Bucket returns the bucket that offset off falls in, clamped to the range.
func (t *Timeline) Bucket(off int64) int {
	if t.Width <= 0 || t.Buckets == 0 {
		return 0
	}
	i := (off - t.Start) / t.Width
	return int(min(max(i, 0), int64(t.Buckets-1)))
}

// buildTimeline draws h under p; oc holds each event's outcome, g its
// events by key.
func buildTimeline(h *history.History, p *policy.Policy, oc []history.Outcome, g keyGroups) *Timeline {
	if len(h.Events) == 0 {
		return nil
	}
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for i := range h.Events {
		e := &h.Events[i]
		lo, hi = min(lo, e.Sent), max(hi, e.Sent, e.Recv)
	}
	for _, ph := range h.Phases {
		lo, hi = min(lo, ph.Start), max(hi, ph.End)
	}
	for _, f := range h.Faults {
		lo = min(lo, f.Start)
		hi = max(hi, f.Start, f.End)
	}
	if h.End != nil {
		hi = max(hi, h.End.Elapsed)
	}
	lo = max(lo, 0)
	t := timelineGrid(lo, hi, int64(len(h.Events)))
	t.Traffic = buildTraffic(h, lo, hi, oc)

	// Group events by key, busiest first.
	keys := make([]int, len(g.keys)) // indices into g
	for k := range keys {
		keys[k] = k
	}
	sort.Slice(keys, func(a, b int) bool {
		na, nb := len(g.idx[keys[a]]), len(g.idx[keys[b]])
		if na != nb {
			return na > nb
		}
		return g.keys[keys[a]] < g.keys[keys[b]]
	})
	if len(keys) > MaxTimelineKeys {
		t.OmittedKeys = len(keys) - MaxTimelineKeys
		keys = keys[:MaxTimelineKeys]
	}
	epoch := int64(0)
	if !h.Run.Start.IsZero() {
		epoch = h.Run.Start.UnixNano()
	}
	for _, gk := range keys {
		k, idx := g.keys[gk], slices.Clone(g.idx[gk])
		// In send order (ids break ties), so the simulation is causal.
		sendOrder(h, idx)
		kt := KeyTimeline{Key: k, Requests: int64(len(idx)), FirstSent: h.Events[idx[0]].Sent}
		kt.Tier = h.Events[idx[0]].Tier
		if tier, ok := p.TierFor(k); ok && len(tier.Limits) > 0 {
			l := tier.Limits[0]
			kt.Limit = &l
			if kt.Tier == "" {
				kt.Tier = tier.Name
			}
		}
		kt.All = t.series(h, idx, -1, oc)
		perInst := map[int][]int{}
		for _, i := range idx {
			perInst[h.Events[i].Instance] = append(perInst[h.Events[i].Instance], i)
		}
		if len(perInst) > 1 {
			insts := make([]int, 0, len(perInst))
			for in := range perInst {
				insts = append(insts, in)
			}
			sort.Slice(insts, func(a, b int) bool {
				na, nb := len(perInst[insts[a]]), len(perInst[insts[b]])
				if na != nb {
					return na > nb
				}
				return insts[a] < insts[b]
			})
			if len(insts) > MaxTimelineInstances {
				kt.OmittedInstances = len(insts) - MaxTimelineInstances
				insts = insts[:MaxTimelineInstances]
			}
			slices.Sort(insts)
			for _, in := range insts {
				kt.Instances = append(kt.Instances, t.series(h, perInst[in], in, oc))
			}
		}
		if kt.Limit != nil {
			kt.Envelope = t.envelope(*kt.Limit, kt.FirstSent, epoch)
			kt.Level = t.level(h, idx, *kt.Limit, epoch, oc, storeFaults(h, p))
		}
		t.Keys = append(t.Keys, kt)
	}
	return t
}

// timelineGrid is the timeline's buckets over [lo, hi] for a history of
// n events.
func timelineGrid(lo, hi, n int64) *Timeline {
	target := min(max(n/2, minTimelineBuckets), MaxTimelineBuckets)
	width := niceWidth((hi - lo + target) / target)
	var start, k int64
	for {
		start = lo / width * width
		k = (hi-start)/width + 1
		if k <= MaxTimelineBuckets {
			break
		}
		width = niceWidth(width + 1)
	}
	return &Timeline{Start: start, Width: width, Buckets: int(k)}
}

// niceWidth returns the smallest 1, 2 or 5 × 10^k ns that is ≥ w (≥ 1 µs).
func niceWidth(w int64) int64 {
	for p := int64(1000); ; p *= 10 {
		for _, m := range []int64{1, 2, 5} {
			if m*p >= w {
				return m * p
			}
		}
		if p > math.MaxInt64/100 {
			return p * 10
		}
	}
}

func (t *Timeline) series(h *history.History, idx []int, inst int, oc []history.Outcome) Series {
	s := Series{
		Instance: inst, Requests: int64(len(idx)),
		Admitted: make([]int, t.Buckets), Rejected: make([]int, t.Buckets), Errors: make([]int, t.Buckets),
		LatencyP50: make([]int64, t.Buckets), LatencyP99: make([]int64, t.Buckets),
	}
	bs := make([]int32, len(idx)) // the bucket of each idx
	for j, i := range idx {
		b := t.Bucket(h.Events[i].Sent)
		bs[j] = int32(b)
		switch oc[i] {
		case history.Admitted:
			s.Admitted[b]++
		case history.Rejected:
			s.Rejected[b]++
		default:
			s.Errors[b]++
		}
	}
	// The decisions' latencies laid out bucket by bucket (a counting sort),
	// then two percentiles selected from each.
	at := make([]int, t.Buckets+1)
	for b := range t.Buckets {
		at[b+1] = at[b] + s.Admitted[b] + s.Rejected[b]
	}
	lats := make([]int64, at[t.Buckets])
	next := slices.Clone(at[:t.Buckets])
	for j, i := range idx {
		if o := oc[i]; o == history.Admitted || o == history.Rejected {
			e, b := &h.Events[i], bs[j]
			lats[next[b]] = e.Recv - e.Sent
			next[b]++
		}
	}
	for b := range t.Buckets {
		if l := lats[at[b]:at[b+1]]; len(l) > 0 {
			r := ranks(l, 0.50, 0.99)
			s.LatencyP50[b], s.LatencyP99[b] = r[0], r[1]
		}
	}
	return s
}

// keyGroups are the indices of a history's events by key: keys[k] in the
// order of its first event, idx[k] its events in history order.
type keyGroups struct {
	keys []string
	idx  [][]int
}

// groupByKey groups h's events by key. The lists share one array, filled
// by a counting sort: appending to one slice per key cost more than the
// rest of the timeline.
func groupByKey(h *history.History) keyGroups {
	id := map[string]int{}
	of := make([]int32, len(h.Events))
	var g keyGroups
	var count []int
	for i := range h.Events {
		k, ok := id[h.Events[i].Key]
		if !ok {
			k = len(count)
			id[h.Events[i].Key] = k
			g.keys = append(g.keys, h.Events[i].Key)
			count = append(count, 0)
		}
		of[i] = int32(k)
		count[k]++
	}
	at := make([]int, len(count)+1)
	for k, c := range count {
		at[k+1] = at[k] + c
	}
	all := make([]int, len(h.Events))
	next := slices.Clone(at[:len(count)])
	for i, k := range of {
		all[next[k]] = i
		next[k]++
	}
	g.idx = make([][]int, len(count))
	for k := range count {
		g.idx[k] = all[at[k]:at[k+1]:at[k+1]]
	}
	return g
}

// sendOrder sorts idx (indices of h's events) by send time, ids breaking
// ties, stably; a history is mostly in that order already.
func sendOrder(h *history.History, idx []int) {
	bySend := func(a, b int) int {
		ea, eb := &h.Events[a], &h.Events[b]
		if c := cmp.Compare(ea.Sent, eb.Sent); c != 0 {
			return c
		}
		return cmp.Compare(ea.ID, eb.ID)
	}
	if !slices.IsSortedFunc(idx, bySend) {
		slices.SortStableFunc(idx, bySend)
	}
}

// envelope is the cumulative allowance of l from first to each bucket end.
func (t *Timeline) envelope(l policy.Limit, first, epoch int64) []float64 {
	env := make([]float64, t.Buckets)
	w := int64(l.W())
	for i := range env {
		end := t.Start + int64(i+1)*t.Width
		d := max(end-first, 0)
		var v float64
		switch l.Algorithm {
		case policy.TokenBucket, policy.GCRA:
			v = l.K() + l.R()*float64(d)/1e9
		case policy.FixedWindow:
			touched := floorDiv(epoch+first+d, w) - floorDiv(epoch+first, w) + 1
			v = float64(l.Count) * float64(touched)
		case policy.SlidingCounter:
			v = (1 + l.ErrorBound) * float64(l.Count) * float64(d/w+1)
		default:
			v = float64(l.Count) * float64(d/w+1)
		}
		env[i] = round3(v)
	}
	return env
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// levelSim simulates a declared limit on admission times: at(t) is the level
// at t without consuming, take(t) consumes one at t. Times never decrease.
type levelSim interface {
	at(t int64) float64
	take(t int64)
}

type bucketSim struct {
	k, r   float64
	tokens float64
	last   int64
	begun  bool
}

func (s *bucketSim) at(t int64) float64 {
	if !s.begun {
		return s.k
	}
	return math.Min(s.k, s.tokens+s.r*float64(t-s.last)/1e9)
}

func (s *bucketSim) take(t int64) {
	s.tokens = s.at(t) - 1
	s.last, s.begun = t, true
}

// logSim: sliding log, the remaining count in the rolling window (t−W, t].
type logSim struct {
	n, w  int64
	times []int64
}

func (s *logSim) at(t int64) float64 {
	i := 0
	for i < len(s.times) && s.times[i] <= t-s.w {
		i++
	}
	s.times = s.times[i:]
	return float64(s.n - int64(len(s.times)))
}

func (s *logSim) take(t int64) { s.at(t); s.times = append(s.times, t) }

// windowSim: fixed (aligned to the epoch) or sliding-counter windows.
type windowSim struct {
	n, w, epoch   int64
	counter       bool
	idx, cur, prv int64
	begun         bool
}

func (s *windowSim) roll(t int64) {
	i := floorDiv(s.epoch+t, s.w)
	switch {
	case !s.begun:
		s.idx, s.begun = i, true
	case i == s.idx+1:
		s.prv, s.cur, s.idx = s.cur, 0, i
	case i > s.idx+1:
		s.prv, s.cur, s.idx = 0, 0, i
	}
}

func (s *windowSim) at(t int64) float64 {
	s.roll(t)
	used := float64(s.cur)
	if s.counter {
		into := float64(s.epoch+t-s.idx*s.w) / float64(s.w)
		used += float64(s.prv) * (1 - into)
	}
	return float64(s.n) - used
}

func (s *windowSim) take(t int64) { s.roll(t); s.cur++ }

func newSim(l policy.Limit, epoch int64) levelSim {
	switch l.Algorithm {
	case policy.TokenBucket, policy.GCRA:
		return &bucketSim{k: l.K(), r: l.R()}
	case policy.FixedWindow:
		return &windowSim{n: l.Count, w: int64(l.W()), epoch: epoch}
	case policy.SlidingCounter:
		return &windowSim{n: l.Count, w: int64(l.W()), epoch: epoch, counter: true}
	}
	return &logSim{n: l.Count, w: int64(l.W())}
}

// storeFaults are the windows in which the store was down or slow, each
// with the policy's recovery time after it: the failure mode decides then,
// not the bucket (as the fail-mode and oversell checks judge them).
func storeFaults(h *history.History, p *policy.Policy) [][2]int64 {
	for _, f := range h.Faults {
		if f.End == 0 && (f.Kind == "store-down" || f.Kind == "store-slow") {
			// The latest Recv, found only for an open fault: it reads every event.
			last := int64(0)
			for i := range h.Events {
				last = max(last, h.Events[i].Recv)
			}
			return storeFaultsUntil(h, p, last)
		}
	}
	return storeFaultsUntil(h, p, 0)
}

// storeFaultsUntil is storeFaults for a history whose latest receive time
// is last (≥ 0).
func storeFaultsUntil(h *history.History, p *policy.Policy, last int64) [][2]int64 {
	var out [][2]int64
	last = max(last, 0)
	for _, f := range h.Faults {
		if f.Kind != "store-down" && f.Kind != "store-slow" {
			continue
		}
		end := f.End
		if end == 0 {
			end = last
		}
		out = append(out, [2]int64{f.Start, end + int64(p.Failure.Recovery.D())})
	}
	return out
}

// level simulates l on the admitted send times of idx (in send order),
// leaving out admissions inside the store fault windows.
func (t *Timeline) level(h *history.History, idx []int, l policy.Limit, epoch int64, oc []history.Outcome, faults [][2]int64) []float64 {
	inFault := func(at int64) bool {
		for _, w := range faults {
			if at >= w[0] && at <= w[1] {
				return true
			}
		}
		return false
	}
	sim := newSim(l, epoch)
	lv := make([]float64, t.Buckets)
	j := 0
	for b := range lv {
		end := t.Start + int64(b+1)*t.Width
		low, took := math.Inf(1), false
		for ; j < len(idx) && (h.Events[idx[j]].Sent < end || b == t.Buckets-1); j++ {
			e := &h.Events[idx[j]]
			if oc[idx[j]] != history.Admitted || inFault(e.Sent) {
				continue
			}
			sim.take(e.Sent)
			low, took = math.Min(low, sim.at(e.Sent)), true
		}
		if !took {
			low = sim.at(end)
		}
		lv[b] = round3(low)
	}
	return lv
}
