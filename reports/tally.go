package reports

import (
	"math/bits"
	"time"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// Tally gathers a document's run figures — Stats, Elapsed, Latency and
// PerSecond — from events handed to it one at a time (a history.Stream),
// in memory that does not grow with the events: about 450 KB of latency
// counts and at most MaxSeconds+1 seconds.
//
// Stats, Elapsed, PerSecond, Latency.Decisions and Latency.Max are exactly
// Build's. Latency.P50, P90 and P99 are approximate: the value of the
// same rank rounded down to 11 significant bits, so within 0.1% of Build's
// exact figure and never above it (values below 2,048 ns are exact). The
// zero value is not usable: see NewTally. Not safe for concurrent use.
type Tally struct {
	p       *policy.Policy
	stats   history.Stats
	maxRecv int64
	lat     latHist
	secs    []Second
}

// NewTally tallies events judged under p's response contract.
func NewTally(p *policy.Policy) *Tally { return &Tally{p: p} }

// Add counts e.
func (t *Tally) Add(e *history.Event) {
	o := checks.Outcome(t.p, e)
	t.stats.Requests++
	switch o {
	case history.Admitted:
		t.stats.Admitted++
	case history.Rejected:
		t.stats.Rejected++
	default:
		t.stats.Errors++
	}
	t.maxRecv = max(t.maxRecv, e.Recv)
	if o == history.Admitted || o == history.Rejected {
		t.lat.add(e.Recv - e.Sent)
	}
	if s := e.Sent / int64(time.Second); s >= 0 && s <= MaxSeconds {
		for int(s) >= len(t.secs) {
			t.secs = append(t.secs, Second{T: len(t.secs)})
		}
		switch o {
		case history.Admitted:
			t.secs[s].Admitted++
		case history.Rejected:
			t.secs[s].Rejected++
		default:
			t.secs[s].Errors++
		}
	}
}

// Figures are the run figures of the events added, for a history whose
// records (End, Faults) are h's; h's events are not read.
func (t *Tally) Figures(h *history.History) (stats history.Stats, elapsed int64, lat *Latency, secs []Second) {
	if h.End != nil {
		elapsed = h.End.Elapsed
	} else {
		elapsed = max(0, t.maxRecv)
	}
	if t.lat.n > 0 {
		r := t.lat.ranks(0.50, 0.90, 0.99)
		lat = &Latency{Decisions: t.lat.n, P50: r[0], P90: r[1], P99: r[2], Max: t.lat.max}
	}
	return t.stats, elapsed, lat, t.perSecond(h, elapsed)
}

// perSecond is perSecond's table from the counted seconds.
func (t *Tally) perSecond(h *history.History, elapsed int64) []Second {
	if len(h.Faults) == 0 || elapsed <= 0 || elapsed > int64(MaxSeconds)*int64(time.Second) {
		return nil
	}
	n := int(elapsed/int64(time.Second)) + 1
	out := make([]Second, n)
	for i := range out {
		out[i].T = i
		if i < len(t.secs) {
			out[i] = t.secs[i]
		}
	}
	markFaults(out, h.Faults, elapsed)
	return out
}

// latHist counts latencies (ns, ≥ 0) in buckets of 11 significant bits:
// values below 2·latSub exactly, every larger one in a bucket of width
// 2^e holding values of at least latSub·2^e, so a bucket's lower end is
// within 1/latSub of every value in it.
type latHist struct {
	counts []int64
	n, max int64
}

const (
	latSubBits = 10
	latSub     = 1 << latSubBits
)

func latBucket(v int64) int {
	if v < 2*latSub {
		return int(v)
	}
	e := bits.Len64(uint64(v)) - latSubBits - 1 // v>>e is in [latSub, 2·latSub)
	return (e+1)*latSub + int(v>>e) - latSub
}

// latLow is the least value of bucket b.
func latLow(b int) int64 {
	if b < 2*latSub {
		return int64(b)
	}
	e := b/latSub - 1
	return int64(b%latSub+latSub) << e
}

func (l *latHist) add(v int64) {
	v = max(v, 0)
	b := latBucket(v)
	if b >= len(l.counts) {
		l.counts = append(l.counts, make([]int64, b+1-len(l.counts))...)
	}
	l.counts[b]++
	l.n++
	l.max = max(l.max, v)
}

// ranks are the nearest-rank percentiles qs (as ranks does), each the
// lower end of the bucket holding that rank.
func (l *latHist) ranks(qs ...float64) []int64 {
	out := make([]int64, len(qs))
	for j, q := range qs {
		i := int64(rankIndex(int(l.n), q))
		var seen int64
		for b, c := range l.counts {
			if seen += c; seen > i {
				out[j] = latLow(b)
				break
			}
		}
	}
	return out
}
