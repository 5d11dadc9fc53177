package reports

import (
	"math"
	"slices"
	"time"

	"github.com/rlverify/rlverify/history"
)

// Limits of Traffic, which is for drawing only.
const (
	// MaxLaneOps is the most requests drawn one by one in the instance
	// lanes; a run with more draws its lanes from per-bin counts.
	MaxLaneOps = 2500
	// MaxTrafficBins bounds the bins of the per-second panel.
	MaxTrafficBins = 600
	// trafficBinsAim is how many bins a run shorter than 20 s is cut into;
	// from 20 s on a bin is one second (until MaxTrafficBins).
	trafficBinsAim = 60
)

// Traffic is every request of the run (all keys, all instances) in equal
// time bins, for the per-second panel, the instance lanes and the
// comparison's overlays. Bin i covers [Start + i·Width, Start + (i+1)·Width)
// by send time; every per-bin array has Bins entries.
type Traffic struct {
	Start int64 `json:"start"`
	// Width of a bin, ns: one second for runs of 20 s or more (coarser past
	// MaxTrafficBins seconds), else about a sixtieth of the run.
	Width int64 `json:"width"`
	Bins  int   `json:"bins"`
	// All counts every request per bin (Instance -1); Instances one series
	// per instance that got requests, by instance index.
	All       Series   `json:"all"`
	Instances []Series `json:"instances"`
	// Ops are the requests one by one, in send order, when there are at
	// most MaxLaneOps of them (else nil: the lanes use Instances).
	Ops *Ops `json:"ops,omitempty"`
}

// Ops are requests in columns (entry i of every column is request i), so
// the JSON keeps one line per column.
type Ops struct {
	ID       []uint64 `json:"id"`
	Instance []int    `json:"inst"`
	Sent     []int64  `json:"sent"`
	Recv     []int64  `json:"recv"`
	// Status is the HTTP status, 0 for no response.
	Status []int `json:"status"`
	// Outcome has one letter per request under the policy: a admitted, r
	// rejected, e error (no decision).
	Outcome string `json:"outcome"`
	// Key indexes Keys.
	Key  []int    `json:"key"`
	Keys []string `json:"keys"`
}

// Op is one request of Ops.
type Op struct {
	ID       uint64
	Instance int
	Key      string
	Sent     int64
	Recv     int64
	Status   int
	// Outcome is 'a' (admitted), 'r' (rejected) or 'e' (error).
	Outcome byte
}

// Len is the number of requests.
func (o *Ops) Len() int {
	if o == nil {
		return 0
	}
	return len(o.ID)
}

// Op returns request i; it is the zero Op when the columns disagree (a
// hand-edited document).
func (o *Ops) Op(i int) Op {
	if i >= len(o.ID) || i >= len(o.Instance) || i >= len(o.Sent) || i >= len(o.Recv) || i >= len(o.Status) || i >= len(o.Outcome) || i >= len(o.Key) {
		return Op{}
	}
	op := Op{ID: o.ID[i], Instance: o.Instance[i], Sent: o.Sent[i], Recv: o.Recv[i], Status: o.Status[i], Outcome: o.Outcome[i]}
	if k := o.Key[i]; k >= 0 && k < len(o.Keys) {
		op.Key = o.Keys[k]
	}
	return op
}

func (o *Ops) add(e *history.Event, outcome byte, keys map[string]int) {
	k, ok := keys[e.Key]
	if !ok {
		k = len(o.Keys)
		keys[e.Key] = k
		o.Keys = append(o.Keys, e.Key)
	}
	o.ID = append(o.ID, e.ID)
	o.Instance = append(o.Instance, e.Instance)
	o.Sent = append(o.Sent, e.Sent)
	o.Recv = append(o.Recv, e.Recv)
	o.Status = append(o.Status, e.Status)
	o.Outcome += string(outcome)
	o.Key = append(o.Key, k)
}

// trafficWidth is the bin width for a run spanning span ns.
func trafficWidth(span int64) int64 {
	sec := int64(time.Second)
	if span >= 20*sec {
		return max(sec, niceWidth((span+MaxTrafficBins-1)/MaxTrafficBins))
	}
	return niceWidth(max(span/trafficBinsAim, 1))
}

// buildTraffic bins every event of h over [lo, hi] (ns offsets).
func buildTraffic(h *history.History, lo, hi int64, oc []history.Outcome) *Traffic {
	tr := trafficGrid(lo, hi)
	// The bins are a timeline's buckets.
	grid := &Timeline{Start: tr.Start, Width: tr.Width, Buckets: tr.Bins}
	// In send order (ids break ties), as the lanes draw them.
	order := make([]int, len(h.Events))
	byInst := map[int][]int{}
	for i := range order {
		order[i] = i
	}
	sendOrder(h, order)
	var opKeys map[string]int
	if len(h.Events) <= MaxLaneOps {
		tr.Ops, opKeys = &Ops{}, map[string]int{}
	}
	for _, i := range order {
		e := &h.Events[i]
		byInst[e.Instance] = append(byInst[e.Instance], i)
		if tr.Ops != nil {
			letter := byte('e')
			switch oc[i] {
			case history.Admitted:
				letter = 'a'
			case history.Rejected:
				letter = 'r'
			}
			tr.Ops.add(e, letter, opKeys)
		}
	}
	tr.All = grid.series(h, order, -1, oc)
	insts := make([]int, 0, len(byInst))
	for in := range byInst {
		insts = append(insts, in)
	}
	slices.Sort(insts)
	for _, in := range insts {
		tr.Instances = append(tr.Instances, grid.series(h, byInst[in], in, oc))
	}
	return tr
}

// trafficGrid is Traffic's bins over [lo, hi], with no requests yet.
func trafficGrid(lo, hi int64) *Traffic {
	width := trafficWidth(hi - lo)
	start := lo / width * width
	n := int((hi-start)/width) + 1
	for n > MaxTrafficBins {
		width = niceWidth(width + 1)
		start = lo / width * width
		n = int((hi-start)/width) + 1
	}
	return &Traffic{Start: start, Width: width, Bins: n}
}

// End is the offset just past the last bin.
func (tr *Traffic) End() int64 { return tr.Start + int64(tr.Bins)*tr.Width }

// perSecondOf is count per bin as a rate per second.
func (tr *Traffic) perSecondOf(v int) float64 {
	return float64(v) * float64(time.Second) / float64(tr.Width)
}

// peakRate is the highest sent-per-second of any bin.
func (tr *Traffic) peakRate() float64 {
	top := 0.0
	a := &tr.All
	for i := 0; i < tr.Bins; i++ {
		top = math.Max(top, tr.perSecondOf(a.Admitted[i]+a.Rejected[i]+a.Errors[i]))
	}
	return top
}
