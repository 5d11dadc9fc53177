package checks

import (
	"cmp"
	"slices"
	"strings"

	"github.com/rlverify/rlverify/history"
)

// regionsStream is checkRegions as a stream. Regions applies when the
// policy declares a regions tolerance and the run used several instances,
// or when some event's phase starts with "region"; it then judges, per
// key, the count of the admissions the envelope judges over their span.
// State: the run's first instance and whether another was seen, the
// latest phase name; per key (regionsAcc) a count, the span and the
// admissions that may be among the evidence's first ids (MaxIDs + 1, more
// only among equal send times).
//
// The common soak declares no regions tolerance and has no region phase
// among its phase records: then nothing is kept per event but the phase
// name's check when it changes. Should an event of a region phase come
// without its record (a run cut in that phase), the counts are gathered in
// a second pass (Streamer.Again).
type regionsStream struct {
	ix *index
	// collect: the keys' counts are gathered in this pass.
	collect bool
	// again: the counts are gathered in the second pass (pass 1 did not).
	again bool
	inst  int
	seen  bool // inst is set
	multi bool // another instance was seen
	phase string
	// regionPhase: some event's phase starts with "region".
	regionPhase bool
}

// regionsAcc is what regions keeps of one key.
type regionsAcc struct {
	admitted    int
	first, last int64
	first1      firstIDs
}

// firstIDs keeps, of requests handed in send order, those that may be
// among the first MaxIDs + 1 (each counted tokens times) in Run's order
// (lo, hi, file position): MaxIDs + 1, more only among equal send times.
type firstIDs struct {
	recs []segRec
	kept int // tokens in recs
}

// add keeps r (the event id at seq) as tokens requests, if it may be
// among the first.
func (f *firstIDs) add(r rec, id, seq uint64, tokens int) {
	// Events come by send time: one sent later than the last kept, when
	// MaxIDs + 1 are kept, follows them all in Run's order too.
	if f.kept > MaxIDs && r.lo > f.recs[len(f.recs)-1].r.lo {
		return
	}
	f.recs = append(f.recs, segRec{r: r, id: id, seq: seq})
	f.kept += tokens
}

// merge adds o's requests (handed alongside f's).
func (f *firstIDs) merge(o firstIDs) {
	f.recs = append(f.recs, o.recs...)
	f.kept += o.kept
}

// ids are the ids idList gives on the requests (each tokens(r) times, in
// Run's order), and total.
func (f *firstIDs) ids(tokens func(rec) int, total int) ([]uint64, int) {
	fr := slices.Clone(f.recs)
	slices.SortFunc(fr, func(x, y segRec) int {
		return cmp.Or(cmp.Compare(x.r.lo, y.r.lo), cmp.Compare(x.r.hi, y.r.hi), cmp.Compare(x.seq, y.seq))
	})
	all := make([]uint64, 0, MaxIDs+1)
	for _, x := range fr {
		for range tokens(x.r) {
			if len(all) > MaxIDs {
				break
			}
			all = append(all, x.id)
		}
	}
	got, _ := ids(all)
	return got, total
}

func newRegionsStream(ix *index) *regionsStream {
	rs := &regionsStream{ix: ix, collect: ix.p.Tolerance.Regions > 0}
	for _, ph := range ix.h.Phases {
		if strings.HasPrefix(ph.Name, "region") {
			rs.collect = true
		}
	}
	return rs
}

func (rs *regionsStream) add(e *history.Event, seq uint64, r rec, sk *streamKey) {
	if !rs.seen {
		rs.inst, rs.seen = e.Instance, true
	} else if e.Instance != rs.inst {
		rs.multi = true
	}
	if !rs.regionPhase && e.Phase != rs.phase {
		rs.phase = e.Phase
		rs.regionPhase = strings.HasPrefix(e.Phase, "region")
	}
	if rs.collect {
		rs.gather(e, seq, r, sk)
	}
}

// applies is checkRegions' condition, once every event was added.
func (rs *regionsStream) applies() bool {
	return rs.ix.p.Tolerance.Regions > 0 && rs.multi || rs.regionPhase
}

// needAgain reports whether the counts must be gathered in a second pass.
func (rs *regionsStream) needAgain() bool {
	rs.again = !rs.collect && rs.applies()
	return rs.again
}

func (rs *regionsStream) addAgain(e *history.Event, seq uint64, r rec, sk *streamKey) {
	rs.gather(e, seq, r, sk)
}

// gather counts r (of e, at seq) among its key's admissions, as
// envelopes' admitted() does.
func (rs *regionsStream) gather(e *history.Event, seq uint64, r rec, sk *streamKey) {
	if sk.tier == nil || r.out != history.Admitted || r.fault || r.variant || r.tokens() == 0 {
		return
	}
	a := sk.regions
	if a == nil {
		a = &regionsAcc{first: r.lo, last: r.hi}
		sk.regions = a
	}
	a.admitted += r.tokens()
	a.first, a.last = min(a.first, r.lo), max(a.last, r.hi)
	a.first1.add(r, e.ID, seq, r.tokens())
}

func (rs *regionsStream) result(all map[string]*streamKey, n, n2 uint64) Result {
	if !rs.collect && rs.applies() && (!rs.again || n2 != n) {
		return Result{Verdict: Unknown, Summary: "not judged: the keys' admissions needed a second pass over the events (Streamer.Again), which did not see every event", Figures: map[string]float64{}}
	}
	applies := rs.applies()
	var keys []regionsKey
	if applies {
		for key, sk := range all {
			a := sk.regions
			if a == nil || a.admitted == 0 {
				continue
			}
			keys = append(keys, regionsKey{key: key, tier: sk.tier, admitted: a.admitted, first: a.first, last: a.last, ids: a.ids})
		}
		slices.SortFunc(keys, func(a, b regionsKey) int { return cmp.Compare(a.key, b.key) })
	}
	return rs.ix.judgeRegions(applies, keys)
}

// ids are the evidence's ids of the key's admissions, as idList gives
// them on admitted(): each admission once per token, in Run's order.
func (a *regionsAcc) ids() ([]uint64, int) { return a.first1.ids(rec.tokens, a.admitted) }
