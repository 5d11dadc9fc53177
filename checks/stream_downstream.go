package checks

import (
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// downStream is checkDownstream as a stream. The sink's readings are
// records (history.ReadRecords gives them before the first event); per key
// it keeps what checkDownstream counts of the key's requests (downKey:
// admissions, unanswered requests, the span of its requests, and the
// admissions the envelope does not bound — decided by the failure mode or
// another scope, or cost-0 peeks — which only a fault or a peek makes
// grow), and for the run its instances (at most 1,024, as the index) and
// latest receive time. Nothing per event; nothing at all without a sink.
// The judgement at the end is checkDownstream's own (judgeDownstream).
type downStream struct {
	ix      *index
	insts   map[int]bool
	maxRecv int64
}

func newDownStream(ix *index) *downStream {
	return &downStream{ix: ix, insts: map[int]bool{}}
}

func (d *downStream) add(e *history.Event, r rec, k *streamKey) {
	if len(d.ix.h.Sink) == 0 {
		return
	}
	if len(d.insts) < 1024 {
		d.insts[e.Instance] = true
	}
	d.maxRecv = max(d.maxRecv, e.Recv)
	if k.down == nil {
		k.down = &downKey{}
	}
	k.down.add(d.ix, r, e.Scope)
}

func (d *downStream) result(all map[string]*streamKey) Result {
	ix := d.ix
	if len(ix.h.Sink) == 0 {
		return ix.collector().result(Skip, "no downstream records in this run (no sink, JSON counter or Prometheus source)", map[string]float64{}, "")
	}
	ix.insts = min(len(d.insts), 1024)
	ix.maxRecv = d.maxRecv
	per := make(map[string]*downKey, len(all))
	for key, k := range all {
		if k.down != nil {
			per[key] = k.down
		}
	}
	return ix.judgeDownstream(per, func(key string) *policy.Tier {
		if k := all[key]; k != nil && k.tier != nil {
			return k.tier
		}
		t, _ := ix.p.TierFor(key)
		return t
	})
}
