package checks

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rlverify/rlverify/headers"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// DefaultMaxEvidence is the evidence cap per check when Options.MaxEvidence
// is zero.
const DefaultMaxEvidence = 5

// checker is the internal form of a check: it reads the shared index.
type checker struct {
	name, doc string
	run       func(ix *index) Result
}

var registry = []checker{
	{"oversell", docOversell, checkOversell},
	{"under-admission", docUnder, afterChange(checkUnder, fromKnownState)},
	{"token-bounds", docBounds, afterChange(checkBounds, fromKnownState)},
	{"retry-after", docRetry, afterChange(checkRetryAfter, fromKnownState)},
	{"headers", docHeaders, afterChange(checkHeaders, fromInForce)},
	{"isolation", docIsolation, checkIsolation},
	{"instances", docInstances, checkInstances},
	{"fail-mode", docFailMode, checkFailMode},
	{"downstream", docDownstream, checkDownstream},
	{"bypass", docBypass, checkBypass},
	{CalibrationCheck, docCalibration, checkCalibration},
	{"regions", docRegions, checkRegions},
	{DelayCheck, docDelay, checkDelay},
}

// All returns every checker in a stable order. Each Checker's Check builds
// its own index of the history; Run shares one index between all checks.
func All() []Checker {
	out := make([]Checker, len(registry))
	for i, c := range registry {
		c := c
		out[i] = Checker{Name: c.name, Doc: c.doc, Check: func(h *history.History, p *policy.Policy, o Options) Result {
			r := c.run(newIndex(h, p, o))
			r.Name = c.name
			return r
		}}
	}
	return out
}

// Names returns the checker names in the order of All.
func Names() []string {
	out := make([]string, len(registry))
	for i, c := range registry {
		out[i] = c.name
	}
	return out
}

// Validate returns an error naming the first unknown check name in names and
// listing the known ones.
func Validate(names []string) error {
	for _, n := range names {
		if !slices.Contains(Names(), n) {
			return fmt.Errorf("checks: unknown check %q (known: %s)", n, strings.Join(Names(), ", "))
		}
	}
	return nil
}

// Judge is what a run's verdict is made of: the evidence gate (see Gate)
// first, then Run's results with the checks turned off skipped and the
// violations other checks explain marked so (see Diagnose).
func Judge(h *history.History, p *policy.Policy, o Options) []Result {
	rs := skipOff(Run(h, p, o), p, o)
	return append([]Result{Gate(h, p, rs, o.MaxErrorRate)}, Diagnose(rs, horizonOf(p))...)
}

// skipOff replaces the results of the checks turned off (p's checks_off,
// o.Off) by skips saying so.
func skipOff(rs []Result, p *policy.Policy, o Options) []Result {
	off := append(append([]string(nil), p.ChecksOff...), o.Off...)
	for i := range rs {
		if slices.Contains(off, rs[i].Name) {
			why := "the policy's checks_off"
			if slices.Contains(o.Off, rs[i].Name) {
				why = "Checks.Off"
			}
			rs[i] = Result{Name: rs[i].Name, Verdict: Skip, Summary: "turned off by " + why + " (the promise is knowingly not kept, or not judged)"}
		}
	}
	return rs
}

// Run runs every check (or those named in o.Only, in the order of All) on h
// against p, sharing one sorted index of the history. An unknown name in
// o.Only yields a Result with verdict Unknown saying so; call Validate first
// to turn that into a usage error. Run is safe for concurrent use on
// histories that are not being modified.
func Run(h *history.History, p *policy.Policy, o Options) []Result {
	ix := newIndex(h, p, o)
	var out []Result
	want := map[string]bool{}
	for _, n := range o.Only {
		want[n] = true
	}
	var run []checker
	for _, c := range registry {
		if len(want) == 0 || want[c.name] {
			run = append(run, c)
		}
	}
	// Checks only read the index (each writes its own scratch), so they run
	// on all CPUs; the results keep the order of All.
	out = make([]Result, len(run))
	workers := min(runtime.GOMAXPROCS(0), len(run))
	var next sync.Mutex
	k := 0
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				next.Lock()
				i := k
				k++
				next.Unlock()
				if i >= len(run) {
					return
				}
				out[i] = run[i].run(ix)
				out[i].Name = run[i].name
				ix.discloseSlack(&out[i])
			}
		}()
	}
	wg.Wait()
	ix.attributeClockSteps(out)
	for _, n := range o.Only {
		if err := Validate([]string{n}); err != nil {
			out = append(out, Result{Name: n, Verdict: Unknown, Summary: err.Error()})
		}
	}
	return out
}

// rec is the compact form of one event used by every check.
type rec struct {
	lo, hi int64 // the decision interval: [Sent−slack, Recv+slack]
	idx    int32 // index in h.Events
	status int16 // HTTP status
	inst   int16 // Event.Instance, clamped to int16
	out    history.Outcome
	// limit is set for a refusal by the limit itself: a status the policy
	// declares rejected (429 by default), not a fail-closed 503.
	limit bool
	// variant is set for bypass probes (Event.Variant != "").
	variant bool
	// changed is set (with fault) when the request may have been decided
	// after a declared limit change of its tier was made: checks that
	// need the limits in force skip it, oversell still counts it.
	changed bool
	// fault is set when the interval overlaps a store fault window.
	fault bool
	// ra is the Retry-After of a 429 in the index (see fastRetryAfter);
	// 0 when not known from the record alone.
	ra uint16
	// wt is the request's cost (policy cost): 0 one token (unweighted),
	// wtPeek none, else that many (see tokens).
	wt uint16
}

// wtPeek is rec.wt of a cost-0 request; wtMax the most tokens a rec holds.
const (
	wtPeek = math.MaxUint16
	wtMax  = math.MaxUint16 - 1
)

// tokens is how many tokens r asked for: a weighted admission consumes
// that many at once, and a refusal is wrongful only when every limit had
// room for all of them.
func (r rec) tokens() int {
	switch r.wt {
	case 0:
		return 1
	case wtPeek:
		return 0
	}
	return int(r.wt)
}

// costWt is rec.wt for an event's cost.
func costWt(c history.Cost) uint16 {
	switch n := c.Tokens(); {
	case !c.Weighted():
		return 0
	case n == 0:
		return wtPeek
	case n > wtMax:
		return wtMax
	default:
		return uint16(n)
	}
}

// Values of rec.ra besides 0 (unknown: read the event).
const (
	raMissing = 1 // no Retry-After header
	raBase    = 2 // ra−raBase is the delay in seconds
)

// fastRetryAfter encodes the common Retry-After forms for rec.ra: absent,
// or short delay-seconds; anything else is left to headers.ParseRetryAfter
// (0).
func fastRetryAfter(s string) uint16 {
	if s == "" {
		return raMissing
	}
	if len(s) > 4 {
		return 0
	}
	n := uint16(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + uint16(c-'0')
	}
	return n + raBase
}

// group is all events of one key, sorted by (lo, hi, id).
type group struct {
	key  string
	tier *policy.Tier
	// exempt is set (and tier nil) for a key of an exempt class: never to
	// be refused.
	exempt *policy.Exempt
	recs   []rec
	// off is the position of recs[0] in index.recs.
	off   int32
	insts int // distinct instances among non-variant events
	// nVariant counts variant events.
	nVariant int
}

// index is the history sorted once and shared by all checks. Lazily computed
// results shared between checks live here too.
type index struct {
	h      *history.History
	p      *policy.Policy
	o      Options
	slack  int64
	groups []group // sorted by key
	// gid is the group of each event, by index in h.Events; pos its
	// position in recs.
	gid, pos []int32
	recs     []rec // all recs, grouped by key
	// startNs is Run.Start in Unix ns (for epoch-aligned windows).
	startNs int64
	// maxLat is the largest hi−lo of any event.
	maxLat int64
	// maxRecv is the latest Recv of any event (0 if none is later).
	maxRecv int64
	// regionPhase is set when some event's Phase starts with "region".
	regionPhase bool
	// changedFrom is, per tier a declared limit change applied to, the
	// earliest offset it may have been in force (limitchange.go).
	changedFrom map[string]int64
	// raised is set for a tier of changedFrom an applied change raised.
	raised map[string]bool
	insts  int // distinct instances in the run
	// untiered counts events whose key has no tier.
	untiered int
	// hdrs is the parsed rate-limit headers of each event, by index in
	// h.Events (see hdrs.go).
	hdrs []hdr
	// gen is the RateLimit header generation the policy declares.
	gen headers.Generation

	envOnce   sync.Once
	envCache  []keyEnvelope
	underOnce sync.Once
	underRes  *underResult
	// tol is the timing tolerance of refusals (see timingTolerance).
	tol int64
	// admByLo is every admitted request sorted by lo (admittedByStart).
	admOnce sync.Once
	admByLo []rec
	// attrCands is explainsRefusal's scratch.
	attrCands cands
	// attrScratch is sharingKeys' scratch (computeUnder runs once).
	attrScratch scratch
	// refusalP99 is the p99 latency of the refusals (delayTolerance).
	refusalLatOnce sync.Once
	refusalP99     int64
}

func newIndex(h *history.History, p *policy.Policy, o Options) *index {
	if o.MaxEvidence <= 0 {
		o.MaxEvidence = DefaultMaxEvidence
	}
	ix := &index{h: h, p: p, o: o, slack: int64(o.Slack) + int64(p.ClockQuantum), gen: headers.Generation(p.Headers.RateLimit)}
	if ix.slack < 0 {
		ix.slack = 0
	}
	ix.changedFrom, ix.raised = changedFrom(h, p)
	if !h.Run.Start.IsZero() {
		ix.startNs = h.Run.Start.UnixNano()
	}
	n := len(h.Events)
	// One pass over the events (they are large: every extra pass streams
	// the whole history through the cache): intern keys and build each
	// event's compact record and parsed headers in file order, in parallel
	// over consecutive parts of the history. Events are mostly already in
	// send order, so a counting sort by key keeps that order and only
	// out-of-order groups need sorting.
	kid := make([]int32, n)
	flat := make([]rec, n)
	ix.hdrs = make([]hdr, n)
	nparts := max(1, min(indexParts(), n/minIndexPart))
	parts := make([]indexPart, nparts)
	var wg sync.WaitGroup
	for pi := range parts {
		from, to := n*pi/nparts, n*(pi+1)/nparts
		if pi == nparts-1 {
			parts[pi].scan(ix, from, to, kid, flat)
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			parts[pi].scan(ix, from, to, kid, flat)
		}()
	}
	wg.Wait()
	// Merge the parts' keys (in file order: a key's tier is the first one
	// given) and renumber their key ids.
	ids := make(map[string]int32, len(parts[0].keys))
	var keys []string
	var counts []int32
	var tierOf []string
	instSeen := parts[0].insts
	for pi := range parts {
		pt := &parts[pi]
		pt.remap = make([]int32, len(pt.keys))
		for local, key := range pt.keys {
			id, ok := ids[key]
			if !ok {
				id = int32(len(keys))
				ids[key] = id
				keys = append(keys, key)
				counts = append(counts, 0)
				tierOf = append(tierOf, "")
			}
			pt.remap[local] = id
			counts[id] += pt.counts[local]
			if tierOf[id] == "" {
				tierOf[id] = pt.tierOf[local]
			}
		}
		ix.maxLat = max(ix.maxLat, pt.maxLat)
		ix.maxRecv = max(ix.maxRecv, pt.maxRecv)
		ix.regionPhase = ix.regionPhase || pt.regionPhase
		if pi > 0 {
			for in := range pt.insts {
				instSeen[in] = true
			}
		}
	}
	if nparts > 1 {
		for pi := range parts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pt := &parts[pi]
				ks := kid[n*pi/nparts : n*(pi+1)/nparts]
				for i, k := range ks {
					ks[i] = pt.remap[k]
				}
			}()
		}
		wg.Wait()
	}
	ix.insts = min(len(instSeen), 1024)
	ix.tol = int64(timingTolerance(h, p))
	// Order keys by name so results are deterministic.
	order := make([]int32, len(keys))
	for i := range order {
		order[i] = int32(i)
	}
	sort.Slice(order, func(a, b int) bool { return keys[order[a]] < keys[order[b]] })
	start := make([]int32, len(keys))
	pos := int32(0)
	for _, k := range order {
		start[k] = pos
		pos += counts[k]
	}
	ix.recs = make([]rec, n)
	ix.pos = make([]int32, n)
	fill := append([]int32(nil), start...)
	for i, k := range kid {
		ix.recs[fill[k]] = flat[i]
		fill[k]++
	}
	flat = nil
	rank := make([]int32, len(keys))
	for gi, k := range order {
		rank[k] = int32(gi)
	}
	ix.gid = kid
	for i, k := range kid {
		ix.gid[i] = rank[k]
	}
	ix.groups = make([]group, len(keys))
	var inst []int16
	for gi, k := range order {
		g := &ix.groups[gi]
		g.key = keys[k]
		g.recs = ix.recs[start[k] : start[k]+counts[k]]
		g.off = start[k]
		sortRecs(g.recs)
		tierName := tierOf[k]
		inst = inst[:0]
		for j := range g.recs {
			if g.recs[j].variant {
				g.nVariant++
				continue
			}
			if in := g.recs[j].inst; !slices.Contains(inst, in) && len(inst) < 64 {
				inst = append(inst, in)
			}
		}
		g.insts = len(inst)
		for j := range g.recs {
			ix.pos[g.recs[j].idx] = start[k] + int32(j)
		}
		if tierName != "" {
			if g.tier, _ = p.Tier(tierName); g.tier == nil {
				g.exempt, _ = p.ExemptNamed(tierName)
			}
		} else if g.tier, _ = p.TierFor(g.key); g.tier == nil {
			g.exempt, _ = p.ExemptFor(g.key)
		}
		if g.tier == nil && g.exempt == nil {
			ix.untiered += len(g.recs)
		}
	}
	return ix
}

// The parallel index pass: up to GOMAXPROCS parts of at least minIndexPart
// events (tests change both).
var (
	indexParts   = func() int { return runtime.GOMAXPROCS(0) }
	minIndexPart = 1 << 16
)

// indexPart is what newIndex gathers from one part of the events.
type indexPart struct {
	ids    map[string]int32
	keys   []string // by local id
	counts []int32
	tierOf []string
	// remap is the index-wide id of each local id.
	remap           []int32
	insts           map[int]bool
	maxLat, maxRecv int64
	regionPhase     bool
}

// scan builds the records (flat), parsed headers (ix.hdrs) and local key ids
// (kid) of events [from, to).
func (pt *indexPart) scan(ix *index, from, to int, kid []int32, flat []rec) {
	pt.ids = make(map[string]int32)
	pt.insts = map[int]bool{}
	hp := newHdrParser(ix.gen)
	last := ""
	lastID := int32(-1)
	lastPhase, phaseSeen := "", false
	lastInst := 0
	for i := from; i < to; i++ {
		e := &ix.h.Events[i]
		id := lastID
		if lastID < 0 || e.Key != last {
			var ok bool
			id, ok = pt.ids[e.Key]
			if !ok {
				id = int32(len(pt.keys))
				pt.ids[e.Key] = id
				pt.keys = append(pt.keys, e.Key)
				pt.counts = append(pt.counts, 0)
				pt.tierOf = append(pt.tierOf, "")
			}
			last, lastID = e.Key, id
		}
		kid[i] = id
		pt.counts[id]++
		if e.Tier != "" && pt.tierOf[id] == "" {
			pt.tierOf[id] = e.Tier
		}
		if len(pt.insts) < 1024 && (i == from || e.Instance != lastInst) {
			pt.insts[e.Instance] = true
			lastInst = e.Instance
		}
		r := ix.mkRec(e, i)
		if r.limit {
			r.ra = fastRetryAfter(e.RetryAfter)
		}
		if d := r.hi - r.lo; d > pt.maxLat {
			pt.maxLat = d
		}
		flat[i] = r
		hp.parse(ix, e, r, &ix.hdrs[i])
		pt.maxRecv = max(pt.maxRecv, e.Recv)
		if !pt.regionPhase && (!phaseSeen || e.Phase != lastPhase) {
			pt.regionPhase = strings.HasPrefix(e.Phase, "region")
			lastPhase, phaseSeen = e.Phase, true
		}
	}
}

// mkRec builds the compact record of event i.
func (ix *index) mkRec(e *history.Event, i int) rec {
	r := rec{lo: e.Sent - ix.slack, hi: e.Recv + ix.slack, idx: int32(i), status: int16(e.Status), out: Outcome(ix.p, e), variant: e.Variant != "",
		inst: int16(max(math.MinInt16, min(math.MaxInt16, e.Instance))), wt: costWt(e.Cost)}
	if r.hi < r.lo {
		r.hi = r.lo
	}
	r.limit = r.out == history.Rejected && ix.p.Statuses.Rejected.Has(e.Status)
	if len(ix.p.Statuses.Rejected) == 0 {
		r.limit = r.out == history.Rejected && e.Status == 429
	}
	// A decision the target says its failure mode made, or one that may
	// have been made during a store fault, is judged by fail-mode alone.
	// A decision made by another scope (an aggregate guard) is not judged
	// against the key's own limits either.
	r.fault = e.Fallback != "" || e.Scope != "" || (len(ix.h.Faults) > 0 && ix.inFault(r.lo, r.hi))
	if !r.fault && len(ix.changedFrom) > 0 {
		if ch, raised := ix.changed(e, r.hi); ch {
			// Decided under a changed limit (or perhaps): the checks
			// judge it from where the limits in force are known
			// (limitchange.go); oversell counts it against the declared
			// limits when the change lowered them (they bound it), not
			// when it raised them (judgeChangedLimits bounds it by the
			// raised ones).
			r.fault, r.changed = true, !raised
		}
	}
	return r
}

// horizonOf is the longest refill of any limit of p (W): violations of one
// key closer than that share its state.
func horizonOf(p *policy.Policy) int64 {
	var w time.Duration
	for _, t := range p.Tiers {
		for _, l := range t.Limits {
			w = max(w, l.W())
		}
	}
	return int64(w)
}

// Defaults of the timing tolerance (policy.Tolerance.Timing).
const (
	minTimingTolerance = 10 * time.Millisecond
	// windowTolerance is the share of the shortest window allowed.
	windowTolerance = 0.02
)

// timingTolerance is the declared tolerance, or the larger of 10ms, 2% of
// the policy's shortest window and twice the p99 request latency of h (a
// sample of at most 10,000 requests).
func timingTolerance(h *history.History, p *policy.Policy) time.Duration {
	if t := p.Tolerance.Timing.D(); t > 0 {
		return t
	}
	n := len(h.Events)
	step := tolStep(int64(n))
	lat := make([]int64, 0, n/step+1)
	for i := 0; i < n; i += step {
		lat = append(lat, h.Events[i].Recv-h.Events[i].Sent)
	}
	return toleranceOf(p, lat)
}

// tolStep is the default tolerance's sample step among n events: it reads
// the latency of every tolStep-th event in file order (at most 10,000).
func tolStep(n int64) int { return int(max(1, n/10000)) }

// toleranceOf is the default timing tolerance (none declared) from lat,
// the latencies of the sample tolStep takes; lat is sorted in place.
func toleranceOf(p *policy.Policy, lat []int64) time.Duration {
	tol := minTimingTolerance
	minW := time.Duration(math.MaxInt64)
	for _, t := range p.Tiers {
		for _, l := range t.Limits {
			if l.NeverRefills() {
				continue // no refill to be late for: a one-off quota is judged by counts
			}
			minW = min(minW, l.W())
		}
	}
	if minW < time.Duration(math.MaxInt64) {
		tol = max(tol, time.Duration(float64(minW)*windowTolerance))
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		tol = max(tol, 2*time.Duration(lat[len(lat)*99/100]))
	}
	return tol
}

// Outcome classifies e under p's response contract (policy.Statuses):
// admitted, rejected, or unknown (no response or an undeclared status).
func Outcome(p *policy.Policy, e *history.Event) history.Outcome {
	switch p.Statuses.Classify(e.Status, e.RetryAfter != "") {
	case policy.ClassAdmitted:
		return history.Admitted
	case policy.ClassRejected:
		return history.Rejected
	}
	return history.Unknown
}

// sortRecs sorts rs by cmpRec. A key's records in file order are nearly
// sorted already (out of order only among requests in flight together), so
// an insertion sort with a budget of moves, O(n + moves), does it in
// linear time; past the budget it falls back to O(n log n) pdqsort.
func sortRecs(rs []rec) {
	budget := 8*len(rs) + 64
	for i := 1; i < len(rs); i++ {
		x := rs[i]
		j := i
		for j > 0 && cmpRec(x, rs[j-1]) < 0 {
			j--
		}
		if j == i {
			continue
		}
		if budget -= i - j; budget < 0 {
			slices.SortFunc(rs, cmpRec)
			return
		}
		copy(rs[j+1:i+1], rs[j:i])
		rs[j] = x
	}
}

// searchLo returns the first index of rs (sorted by lo) with lo ≥ t, as
// slices.BinarySearchFunc does, galloping out from near.
func searchLo(rs []rec, near int, t int64) int {
	return gallop(rs, near, t, func(x rec) int64 { return x.lo })
}

// gallop returns the first index of xs (sorted by key) whose key is ≥ t,
// galloping out from near: O(log d) for an answer d places away, so a sweep
// whose targets move forward stays linear where a binary search over the
// whole slice costs O(log n) cache misses each time.
func gallop[T any](xs []T, near int, t int64, key func(T) int64) int {
	n := len(xs)
	near = min(max(near, 0), n)
	lo, hi := 0, n // the answer is in [lo, hi]
	if near < n && key(xs[near]) < t {
		lo = near + 1
		for step := 1; near+step < n; step *= 2 {
			if p := near + step; key(xs[p]) >= t {
				hi = p
				break
			} else {
				lo = p + 1
			}
		}
	} else {
		hi = near
		for step := 1; near-step >= 0; step *= 2 {
			if p := near - step; key(xs[p]) < t {
				lo = p + 1
				break
			} else {
				hi = p
			}
		}
	}
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if key(xs[m]) < t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func cmpRec(a, b rec) int {
	switch {
	case a.lo != b.lo:
		return cmpI64(a.lo, b.lo)
	case a.hi != b.hi:
		return cmpI64(a.hi, b.hi)
	}
	return cmpI64(int64(a.idx), int64(b.idx))
}

func cmpI64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (ix *index) ev(r rec) *history.Event { return &ix.h.Events[r.idx] }

// inFault reports whether [lo, hi] overlaps a store fault window, extended
// past its end by the policy's declared recovery time: the circuit breaker
// may stay open and connections may still be re-established after the store
// is back, and the failure mode keeps deciding meanwhile. Such decisions are
// judged by fail-mode alone.
func (ix *index) inFault(lo, hi int64) bool {
	grace := recoveryOf(ix.p)
	for _, f := range ix.h.Faults {
		if f.Kind != "store-down" && f.Kind != "store-slow" {
			continue
		}
		from, to := f.Span()
		if f.End != 0 {
			to += grace
		}
		if lo <= to && hi >= from {
			return true
		}
	}
	return false
}

// recoveryOf is the declared recovery time (1s when the policy was built in
// code without Validate).
func recoveryOf(p *policy.Policy) int64 {
	if d := p.Failure.Recovery.D(); d > 0 {
		return int64(d)
	}
	return int64(time.Second)
}

// collector keeps the first MaxEvidence violations and counts them all.
type collector struct {
	max   int
	total int
	items []Evidence
}

func (ix *index) collector() *collector { return &collector{max: ix.o.MaxEvidence} }

func (c *collector) add(e Evidence) {
	c.total++
	if len(c.items) < c.max {
		c.items = append(c.items, e)
	}
}

// idList builds the capped id list of evidence from recs.
func (ix *index) idList(rs []rec) ([]uint64, int) {
	all := make([]uint64, 0, min(len(rs), MaxIDs+1))
	for _, r := range rs {
		if len(all) > MaxIDs {
			break
		}
		all = append(all, ix.ev(r).ID)
	}
	got, _ := ids(all)
	return got, len(rs)
}

// result assembles a Result from a collector: fail when it holds
// violations, else the given verdict and summary.
func (c *collector) result(v Verdict, summary string, figs map[string]float64, failSummary string) Result {
	if figs == nil {
		figs = map[string]float64{}
	}
	figs["violations"] = float64(c.total)
	if c.total > 0 {
		v = Fail
		summary = failSummary
	}
	return Result{Verdict: v, Summary: summary, Evidence: c.items, Figures: figs}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return grouped(int64(n)) + " " + many
}

// grouped writes n with thousands separators ("13,709"), as every report
// writes counts (internal/human.Count, which checks does not import).
func grouped(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
