package checks

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/rlverify/rlverify/history"
)

// calibrationStream is checkCalibration as a stream. Calibrate phases are
// records (history.ReadRecords gives them before the first event), so it
// knows from the start which events it judges: those of a calibrate
// phase, which it keeps (copies) — a burst of one more than the quota and
// its probes, bounded by the phases, not by the run. At the end it judges
// them with checkCalibration itself, on an index of those events alone
// (the keys' groups hold the same events in the same order as Run's,
// restricted to the phases). What it needs of the whole run is the timing
// tolerance (declared, or sampled as retry-after's: every tolStep-th event
// in file order, which is why the streamer must know n, SetEvents), and
// the run's latest answer (none: calibration reads only its phases).
//
// A run without a calibrate phase (the common soak) is a SKIP decided by
// the records: nothing is done per event.
type calibrationStream struct {
	ix     *index
	phases map[string]bool
	kept   []keptEvent
	tol    tolSample
}

// keptEvent is a copy of an event the stream handed, with its file
// position.
type keptEvent struct {
	e   history.Event
	seq uint64
}

// tolSample is the default timing tolerance's sample taken from a stream
// (timingTolerance in memory): the latency of every tolStep(n)-th event in
// file order, n the events the stream hands (SetEvents).
type tolSample struct {
	events int64 // -1: not told
	lat    []int64
}

func (t *tolSample) add(p interface{ declared() bool }, e *history.Event, seq uint64) {
	if t.events >= 0 && !p.declared() && int64(seq) < t.events && seq%uint64(tolStep(t.events)) == 0 {
		t.lat = append(t.lat, e.Recv-e.Sent)
	}
}

// settle is the tolerance of a stream that handed n events, or why it is
// not known.
func (t *tolSample) settle(ix *index, n uint64) (int64, string) {
	switch {
	case ix.p.Tolerance.Timing.D() > 0:
		return int64(ix.p.Tolerance.Timing.D()), ""
	case t.events < 0:
		return 0, "the default timing tolerance samples every ⌈n/10,000⌉-th event of the file's n, and the streamer was not told n (Streamer.SetEvents)"
	case tolStep(t.events) != tolStep(int64(n)):
		return 0, fmt.Sprintf("the default timing tolerance samples every ⌈n/10,000⌉-th event of the file's n, and the streamer was told n = %d but was handed %d events", t.events, n)
	}
	return int64(toleranceOf(ix.p, slices.Clone(t.lat))), ""
}

func newCalibrationStream(ix *index) *calibrationStream {
	cs := &calibrationStream{ix: ix, tol: tolSample{events: -1}}
	for _, ph := range ix.h.Phases {
		if ph.Kind == "calibrate" {
			if cs.phases == nil {
				cs.phases = map[string]bool{}
			}
			cs.phases[ph.Name] = true
		}
	}
	return cs
}

func (cs *calibrationStream) declared() bool { return cs.ix.p.Tolerance.Timing.D() > 0 }

func (cs *calibrationStream) add(e *history.Event, seq uint64) {
	if cs.phases == nil {
		return
	}
	cs.tol.add(cs, e, seq)
	if cs.phases[e.Phase] {
		cs.kept = append(cs.kept, keptEvent{e: *e, seq: seq})
	}
}

func (cs *calibrationStream) result(n uint64) Result {
	if cs.phases == nil {
		return checkCalibration(cs.ix) // a SKIP: no calibrate phase
	}
	tol, why := cs.tol.settle(cs.ix, n)
	if why != "" {
		return Result{Verdict: Unknown, Summary: "not judged: " + why, Figures: map[string]float64{}}
	}
	cs.ix.tol = tol // the slack Streamer.Results discloses
	ix := cs.ix.subIndex(cs.kept)
	ix.tol = tol
	return checkCalibration(ix)
}

// subIndex is an index of kept alone (events of the run whose records
// are ix.h), in file order: Run's index restricted to them.
func (ix *index) subIndex(kept []keptEvent) *index {
	slices.SortFunc(kept, func(a, b keptEvent) int { return cmp.Compare(a.seq, b.seq) })
	h := *ix.h
	h.Events = make([]history.Event, len(kept))
	for i := range kept {
		h.Events[i] = kept[i].e
	}
	return newIndex(&h, ix.p, ix.o)
}
