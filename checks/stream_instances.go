package checks

import (
	"fmt"

	"github.com/rlverify/rlverify/history"
)

// Instances on the streaming path.
//
// checkInstances judges the keys whose requests (variants aside) went to
// two or more instances, by the envelopes' certificates per instance and
// the refusals' evidence of shared state, which do not stream yet. A run
// where no key's did — every run against one instance, and most runs of
// keys pinned to instances — has nothing for it to judge: its result is
// Run's SKIP, which needs only the count of distinct instances. So the
// Streamer judges instances by watching, per key, the instance of its
// first request: when a key's requests go to a second one, the result
// would need the in-memory judgement, and InMemory says so after the
// first pass (the driver then judges the history in memory, saying why).
// A key seen on two instances that Run would not judge (no admission
// among its requests) also sends the run to memory: the watch errs on the
// side of the in-memory path, never the other way.

// streamsWhenUnspread are the checks a Streamer judges only while no
// key's requests go to two instances (InMemory); they are not in
// Streamable, which lists the checks it always judges.
var streamsWhenUnspread = []string{"instances"}

// instancesStream watches whether a key's requests went to two instances,
// and counts the run's distinct instances as the index does.
type instancesStream struct {
	ix *index
	// seen are the run's distinct instances, at most maxInstancesSeen.
	seen map[int]bool
	// last is the instance of the previous event (any: one was seen).
	last int
	any  bool
	// spread is the first key whose requests went to two instances, and
	// the two.
	spread     string
	spreadA, B int
}

// maxInstancesSeen bounds the instances counted (the index's bound).
const maxInstancesSeen = 1024

// instancesKey is a key's first instance (variants aside).
type instancesKey struct {
	inst int
	seen bool
}

func newInstancesStream(ix *index) *instancesStream {
	return &instancesStream{ix: ix, seen: map[int]bool{}}
}

func (s *instancesStream) add(e *history.Event, k *instancesKey) {
	if !s.any || e.Instance != s.last {
		if len(s.seen) < maxInstancesSeen {
			s.seen[e.Instance] = true
		}
		s.last, s.any = e.Instance, true
	}
	if e.Variant != "" || s.spread != "" {
		return
	}
	switch {
	case !k.seen:
		*k = instancesKey{inst: e.Instance, seen: true}
	case k.inst != e.Instance:
		s.spread, s.spreadA, s.B = e.Key, k.inst, e.Instance
	}
}

// inMemory says why the run needs the in-memory judgement ("" when not).
func (s *instancesStream) inMemory() string {
	if s.spread == "" {
		return ""
	}
	return fmt.Sprintf("instances: key %s's requests went to instances %d and %d, which only the in-memory path judges", s.spread, s.spreadA, s.B)
}

func (s *instancesStream) result() Result {
	if why := s.inMemory(); why != "" {
		return Result{Verdict: Unknown, Summary: "not judged: " + why + " (Streamer.InMemory)", Figures: map[string]float64{}}
	}
	return instancesUnspread(s.ix.collector(), len(s.seen))
}
