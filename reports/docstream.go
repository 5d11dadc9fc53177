package reports

import (
	"cmp"
	"math"
	"slices"
	"sort"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// DocStream builds Build's document — byte for byte the same — from a
// history handed to it as a stream (history.Stream: send order, with each
// event's file position), in two passes: Add for every event, then Again
// and AddAgain for every event a second time, then Document.
//
// The first pass counts (Tally, the errors by status, a few counters per
// key); the second draws the timeline of the keys the first found
// busiest, and the run's traffic, bucket by bucket as the send times pass
// (each time bucket's latencies are held only until the stream leaves
// it), and makes the latency percentiles exact: it counts the distinct
// values of the Tally's three buckets that hold them (a bucket holds at
// most value/1,024 distinct values). Memory: the keys' counters (about
// 200 B a key), the drawn series (at most MaxTimelineKeys keys of
// MaxTimelineBuckets buckets) and one time bucket's latencies per series;
// nothing per event but for runs of at most MaxLaneOps events (their
// lanes are drawn one by one). Not safe for concurrent use.
type DocStream struct {
	h    *history.History
	p    *policy.Policy
	t    *Tally
	errs *checks.ErrorTally
	n    int64
	// lo and hi are the least send time and the latest send or receive
	// time of the events.
	lo, hi  int64
	maxRecv int64
	keys    map[string]*keyAcc
	// last is the key of the event Add had last (Compact's).
	last *keyAcc

	again bool
	exact []exactRank
	tl    *Timeline
	drawn map[string]*keyDraw
	// drawnBy is drawn by the keys' numbers (keyAcc.num): AddCompact's.
	drawnBy map[int32]*keyDraw
	tr      *Traffic
	all     *seriesDraw
	insts   map[int]*seriesDraw
	// oneInst is the run's one instance when it has one (-1 otherwise):
	// its series is then all's, drawn once.
	oneInst int
	ops     []opAt
}

// keyAcc is the first pass's count of one key.
type keyAcc struct {
	key  string
	num  int32       // the key's number: keys in the order Add first saw them
	n    int64       // every event, bypass variants too (the timeline's order)
	inst []instCount // usually one
	// first is the key's first event in (send, id, file) order: the
	// timeline's tier and origin.
	firstSent int64
	firstID   uint64
	firstSeq  uint64
	firstTier string
	// The key table's figures (bypass variants aside): at is the file
	// position of its first such event, tier that event's.
	ks     KeyStats
	nv     int64
	at     uint64
	from   int64
	to     int64
	atTier string
}

// instCount counts a key's events on one instance.
type instCount struct {
	inst int
	n    int64
}

// NewDocStream builds the document of the history whose records are rec
// (history.ReadRecords, or the Stream's History once read), judged under p.
func NewDocStream(rec *history.History, p *policy.Policy) *DocStream {
	return &DocStream{h: rec, p: p, t: NewTally(p), errs: checks.NewErrorTally(rec, p), lo: math.MaxInt64, hi: math.MinInt64, keys: map[string]*keyAcc{}}
}

// Errors are the errors counted so far, as checks.Errors counts them:
// the evidence gate's (checks.JudgeStreamed).
func (d *DocStream) Errors() *checks.ErrorTally { return d.errs }

// Stats are the run's counts, as Build's.
func (d *DocStream) Stats() history.Stats { return d.t.stats }

// Add counts e, the event at file position seq, in the stream's order.
func (d *DocStream) Add(e *history.Event, seq uint64) {
	d.n++
	d.t.Add(e)
	d.errs.Add(e, seq)
	d.lo, d.hi, d.maxRecv = min(d.lo, e.Sent), max(d.hi, e.Sent, e.Recv), max(d.maxRecv, e.Recv)
	// Runs of one key's events skip the map (a history's key strings are
	// interned by the decoder: equal ones compare by pointer).
	a := d.last
	if a == nil || a.key != e.Key {
		a = d.keys[e.Key]
	}
	if a == nil {
		a = &keyAcc{key: e.Key, num: int32(len(d.keys)), firstSent: e.Sent, firstID: e.ID, firstSeq: seq, firstTier: e.Tier}
		d.keys[e.Key] = a
	} else if c := cmp.Or(cmp.Compare(e.Sent, a.firstSent), cmp.Compare(e.ID, a.firstID), cmp.Compare(seq, a.firstSeq)); c < 0 {
		a.firstSent, a.firstID, a.firstSeq, a.firstTier = e.Sent, e.ID, seq, e.Tier
	}
	d.last = a
	a.n++
	if i := slices.IndexFunc(a.inst, func(c instCount) bool { return c.inst == e.Instance }); i >= 0 {
		a.inst[i].n++
	} else {
		a.inst = append(a.inst, instCount{e.Instance, 1})
	}
	if e.Variant != "" {
		return
	}
	if a.nv == 0 || seq < a.at {
		a.at, a.atTier = seq, e.Tier
	}
	if a.nv == 0 {
		a.from, a.to = e.Sent, e.Recv
	}
	a.nv++
	a.from, a.to = min(a.from, e.Sent), max(a.to, e.Recv)
	switch checks.Outcome(d.p, e) {
	case history.Admitted:
		a.ks.Admitted++
	case history.Rejected:
		a.ks.Rejected++
	default:
		a.ks.Errors++
	}
}

// exactRank finds one latency percentile exactly: the Tally's bucket b
// holds it, below are the decisions of the buckets below, counts the
// bucket's values by value.
type exactRank struct {
	b      int
	rank   int64 // the percentile's index among the bucket's values
	counts map[int64]int64
}

// keyDraw is the second pass's drawing of one key's timeline.
type keyDraw struct {
	kt    KeyTimeline
	all   *seriesDraw
	insts map[int]*seriesDraw
	level *levelDraw
}

type opAt struct {
	op  Op
	seq uint64
}

// Again prepares the second pass once Add has had every event; the
// document needs it whenever there were events.
func (d *DocStream) Again() bool {
	if d.again || d.n == 0 {
		return d.again
	}
	d.again = true
	if d.t.lat.n > 0 {
		for _, q := range []float64{0.50, 0.90, 0.99} {
			i := int64(rankIndex(int(d.t.lat.n), q))
			var seen int64
			for b, c := range d.t.lat.counts {
				if seen+c > i {
					d.exact = append(d.exact, exactRank{b: b, rank: i - seen, counts: map[int64]int64{}})
					break
				}
				seen += c
			}
		}
	}
	// The timeline's grid, as buildTimeline draws it.
	lo, hi := d.lo, d.hi
	for _, ph := range d.h.Phases {
		lo, hi = min(lo, ph.Start), max(hi, ph.End)
	}
	for _, f := range d.h.Faults {
		lo = min(lo, f.Start)
		hi = max(hi, f.Start, f.End)
	}
	if d.h.End != nil {
		hi = max(hi, d.h.End.Elapsed)
	}
	lo = max(lo, 0)
	d.tl = timelineGrid(lo, hi, d.n)
	d.tr, d.all, d.insts = trafficGrid(lo, hi), nil, map[int]*seriesDraw{}
	d.all = newSeriesDraw(&Timeline{Start: d.tr.Start, Width: d.tr.Width, Buckets: d.tr.Bins}, -1)
	d.oneInst = -1
	for _, a := range d.keys {
		for _, c := range a.inst {
			switch {
			case d.oneInst == -1:
				d.oneInst = c.inst
			case d.oneInst != c.inst:
				d.oneInst = -2
			}
		}
	}
	d.oneInst = max(d.oneInst, -1)

	// The busiest keys, as buildTimeline picks them.
	order := make([]*keyAcc, 0, len(d.keys))
	for _, a := range d.keys {
		order = append(order, a)
	}
	sort.Slice(order, func(i, j int) bool {
		if order[i].n != order[j].n {
			return order[i].n > order[j].n
		}
		return order[i].key < order[j].key
	})
	if len(order) > MaxTimelineKeys {
		d.tl.OmittedKeys = len(order) - MaxTimelineKeys
		order = order[:MaxTimelineKeys]
	}
	epoch := int64(0)
	if !d.h.Run.Start.IsZero() {
		epoch = d.h.Run.Start.UnixNano()
	}
	d.drawn, d.drawnBy = map[string]*keyDraw{}, map[int32]*keyDraw{}
	faults := storeFaultsUntil(d.h, d.p, d.maxRecv)
	for _, a := range order {
		kd := &keyDraw{kt: KeyTimeline{Key: a.key, Requests: a.n, FirstSent: a.firstSent, Tier: a.firstTier}, all: newSeriesDraw(d.tl, -1), insts: map[int]*seriesDraw{}}
		if tier, ok := d.p.TierFor(a.key); ok && len(tier.Limits) > 0 {
			l := tier.Limits[0]
			kd.kt.Limit = &l
			if kd.kt.Tier == "" {
				kd.kt.Tier = tier.Name
			}
			kd.kt.Envelope = d.tl.envelope(l, a.firstSent, epoch)
			kd.level = &levelDraw{t: d.tl, sim: newSim(l, epoch), lv: make([]float64, d.tl.Buckets), low: math.Inf(1), faults: faults}
		}
		if len(a.inst) > 1 {
			insts := slices.Clone(a.inst)
			slices.SortFunc(insts, func(x, y instCount) int { return cmp.Or(cmp.Compare(y.n, x.n), cmp.Compare(x.inst, y.inst)) })
			if len(insts) > MaxTimelineInstances {
				kd.kt.OmittedInstances = len(insts) - MaxTimelineInstances
				insts = insts[:MaxTimelineInstances]
			}
			for _, c := range insts {
				kd.insts[c.inst] = newSeriesDraw(d.tl, c.inst)
			}
		}
		d.drawn[a.key] = kd
		d.drawnBy[a.num] = kd
	}
	return true
}

// AddAgain is the second pass (see Again): e is the event at file
// position seq, in the stream's order again.
func (d *DocStream) AddAgain(e *history.Event, seq uint64) {
	if !d.again {
		return
	}
	o := checks.Outcome(d.p, e)
	if d.n <= MaxLaneOps {
		letter := byte('e')
		switch o {
		case history.Admitted:
			letter = 'a'
		case history.Rejected:
			letter = 'r'
		}
		d.ops = append(d.ops, opAt{Op{ID: e.ID, Instance: e.Instance, Key: e.Key, Sent: e.Sent, Recv: e.Recv, Status: e.Status, Outcome: letter}, seq})
	}
	d.again2(e.Sent, e.Recv, e.Instance, o, d.drawn[e.Key])
}

// Compact is an event as the second pass reads it: what AddCompact needs
// instead of the event, so that a caller can keep the first pass's events
// in a few bytes each (a spill file) rather than decode the history again.
type Compact struct {
	Sent, Recv int64
	Instance   int
	// Key is the event's key as a number: the keys in the order Add first
	// saw them, from 0.
	Key     int32
	Outcome history.Outcome
}

// Compact is e, which Add has just had (the last event added), as
// AddCompact reads it.
func (d *DocStream) Compact(e *history.Event) Compact {
	a := d.last
	if a == nil || a.key != e.Key {
		a = d.keys[e.Key]
	}
	num := int32(-1)
	if a != nil {
		num = a.num
	}
	return Compact{Sent: e.Sent, Recv: e.Recv, Instance: e.Instance, Key: num, Outcome: checks.Outcome(d.p, e)}
}

// Lanes says whether the document draws its requests one by one (runs of
// at most MaxLaneOps events): then the second pass needs the events
// themselves (AddAgain), not their Compact form.
func (d *DocStream) Lanes() bool { return d.n <= MaxLaneOps }

// AddCompact is AddAgain for an event given as Compact made in the first
// pass, in the same order; it must not be used when Lanes says so.
func (d *DocStream) AddCompact(c Compact) {
	if !d.again {
		return
	}
	d.again2(c.Sent, c.Recv, c.Instance, c.Outcome, d.drawnBy[c.Key])
}

// again2 is the second pass on one event's fields; kd is its key's
// drawing, if drawn.
func (d *DocStream) again2(sent, recv int64, instance int, o history.Outcome, kd *keyDraw) {
	lat := recv - sent
	if o == history.Admitted || o == history.Rejected {
		b := latBucket(max(lat, 0))
		for i := range d.exact {
			if d.exact[i].b == b {
				d.exact[i].counts[lat]++
			}
		}
	}
	d.all.add(sent, lat, o)
	if d.oneInst < 0 {
		s := d.insts[instance]
		if s == nil {
			s = newSeriesDraw(d.all.t, instance)
			d.insts[instance] = s
		}
		s.add(sent, lat, o)
	}
	if kd != nil {
		kd.all.add(sent, lat, o)
		if s := kd.insts[instance]; s != nil {
			s.add(sent, lat, o)
		}
		if kd.level != nil {
			kd.level.add(sent, o == history.Admitted)
		}
	}
}

// Document is Build's document for the events added, judged by rs; h is
// the history's records as Build would see them (its notes, integrity and
// end: the Stream's History, after judging's notes).
func (d *DocStream) Document(h *history.History, rs []checks.Result) *Document {
	doc := newDocument(h, d.p, rs)
	var secs []Second
	doc.Stats, doc.Elapsed, doc.Latency, secs = d.t.Figures(h)
	doc.PerSecond = secs
	if doc.Latency != nil && d.again {
		ps := []*int64{&doc.Latency.P50, &doc.Latency.P90, &doc.Latency.P99}
		for i, x := range d.exact {
			vs := make([]int64, 0, len(x.counts))
			for v := range x.counts {
				vs = append(vs, v)
			}
			slices.Sort(vs)
			var seen int64
			for _, v := range vs {
				if seen += x.counts[v]; seen > x.rank {
					*ps[i] = v
					break
				}
			}
		}
	}
	_, doc.Errors = d.errs.Result()
	doc.Keys = d.keyStats()
	if d.again {
		doc.Timeline = d.timeline()
	}
	return doc
}

// keyStats is keyStats' table from the counters.
func (d *DocStream) keyStats() []KeyStats {
	var order []*keyAcc
	for _, a := range d.keys {
		if a.nv > 0 {
			order = append(order, a)
		}
	}
	sort.Slice(order, func(i, j int) bool {
		if order[i].nv != order[j].nv {
			return order[i].nv > order[j].nv
		}
		return order[i].at < order[j].at
	})
	if len(order) > MaxKeyStats {
		order = order[:MaxKeyStats]
	}
	out := make([]KeyStats, len(order))
	for i, a := range order {
		ks := a.ks
		ks.Key, ks.Tier, ks.Span = a.key, a.atTier, a.to-a.from
		out[i] = ks
	}
	return withQuotas(out, d.p)
}

// timeline assembles the drawn series.
func (d *DocStream) timeline() *Timeline {
	t := d.tl
	tr := d.tr
	tr.All = d.all.done()
	if d.oneInst >= 0 {
		one := tr.All.clone()
		one.Instance = d.oneInst
		tr.Instances = []Series{one}
	}
	insts := make([]int, 0, len(d.insts))
	for in := range d.insts {
		insts = append(insts, in)
	}
	slices.Sort(insts)
	for _, in := range insts {
		tr.Instances = append(tr.Instances, d.insts[in].done())
	}
	if d.n <= MaxLaneOps {
		slices.SortFunc(d.ops, func(a, b opAt) int {
			return cmp.Or(cmp.Compare(a.op.Sent, b.op.Sent), cmp.Compare(a.op.ID, b.op.ID), cmp.Compare(a.seq, b.seq))
		})
		tr.Ops = &Ops{}
		keys := map[string]int{}
		for _, x := range d.ops {
			e := history.Event{ID: x.op.ID, Instance: x.op.Instance, Key: x.op.Key, Sent: x.op.Sent, Recv: x.op.Recv, Status: x.op.Status}
			tr.Ops.add(&e, x.op.Outcome, keys)
		}
	}
	t.Traffic = tr
	order := make([]*keyDraw, 0, len(d.drawn))
	for _, kd := range d.drawn {
		order = append(order, kd)
	}
	sort.Slice(order, func(i, j int) bool {
		if order[i].kt.Requests != order[j].kt.Requests {
			return order[i].kt.Requests > order[j].kt.Requests
		}
		return order[i].kt.Key < order[j].kt.Key
	})
	for _, kd := range order {
		kt := kd.kt
		kt.All = kd.all.done()
		insts := make([]int, 0, len(kd.insts))
		for in := range kd.insts {
			insts = append(insts, in)
		}
		slices.Sort(insts)
		for _, in := range insts {
			kt.Instances = append(kt.Instances, kd.insts[in].done())
		}
		if kd.level != nil {
			kt.Level = kd.level.done()
		}
		t.Keys = append(t.Keys, kt)
	}
	return t
}

// seriesDraw fills one Series in send order: a time bucket's latencies
// are kept until the stream leaves the bucket.
type seriesDraw struct {
	t    *Timeline
	s    Series
	cur  int
	lats []int64
}

func newSeriesDraw(t *Timeline, inst int) *seriesDraw {
	return &seriesDraw{t: t, s: Series{
		Instance: inst,
		Admitted: make([]int, t.Buckets), Rejected: make([]int, t.Buckets), Errors: make([]int, t.Buckets),
		LatencyP50: make([]int64, t.Buckets), LatencyP99: make([]int64, t.Buckets),
	}}
}

func (s *seriesDraw) add(sent, lat int64, o history.Outcome) {
	b := s.t.Bucket(sent)
	if b != s.cur {
		s.flush()
		s.cur = b
	}
	s.s.Requests++
	switch o {
	case history.Admitted:
		s.s.Admitted[b]++
	case history.Rejected:
		s.s.Rejected[b]++
	default:
		s.s.Errors[b]++
		return
	}
	s.lats = append(s.lats, lat)
}

func (s *seriesDraw) flush() {
	if len(s.lats) > 0 {
		r := ranks(s.lats, 0.50, 0.99)
		s.s.LatencyP50[s.cur], s.s.LatencyP99[s.cur] = r[0], r[1]
		s.lats = s.lats[:0]
	}
}

func (s *seriesDraw) done() Series { s.flush(); return s.s }

// clone is a copy of s that shares none of its slices.
func (s Series) clone() Series {
	s.Admitted, s.Rejected, s.Errors = slices.Clone(s.Admitted), slices.Clone(s.Rejected), slices.Clone(s.Errors)
	s.LatencyP50, s.LatencyP99 = slices.Clone(s.LatencyP50), slices.Clone(s.LatencyP99)
	return s
}

// levelDraw is Timeline.level in send order.
type levelDraw struct {
	t      *Timeline
	sim    levelSim
	lv     []float64
	b      int
	low    float64
	took   bool
	faults [][2]int64
}

func (l *levelDraw) add(sent int64, admitted bool) {
	for b := l.t.Bucket(sent); l.b < b; {
		l.close()
	}
	if !admitted {
		return
	}
	for _, w := range l.faults {
		if sent >= w[0] && sent <= w[1] {
			return
		}
	}
	l.sim.take(sent)
	l.low, l.took = math.Min(l.low, l.sim.at(sent)), true
}

// close ends bucket l.b.
func (l *levelDraw) close() {
	if !l.took {
		l.low = l.sim.at(l.t.Start + int64(l.b+1)*l.t.Width)
	}
	l.lv[l.b] = round3(l.low)
	l.b++
	l.low, l.took = math.Inf(1), false
}

func (l *levelDraw) done() []float64 {
	for l.b < len(l.lv) {
		l.close()
	}
	return l.lv
}
