package checks

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rlverify/rlverify/headers"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// The streaming judgement (docs/streaming.md).
//
// Run judges a history in memory through one shared index. A Streamer
// judges the same history handed to it one event at a time in send order
// (history.Stream's order: send time, receive time, file position), with
// state bounded by the policy and the events in flight, not by the run:
// for soaks too long to hold. It gives the verdict, summary, figures and
// evidence Run gives, for the checks that stream so far (Streamable); the
// rest are judged in memory.
//
// Evidence: Run's collector keeps the first MaxEvidence violations in the
// order the check adds them (a pass in file order, a pass per key in key
// order, …). A streaming pass meets violations in another order, so it
// keeps each with the position the in-memory pass adds it at, and only
// the MaxEvidence first by that position (orderedCollector).

// Streamable lists the checks a Streamer judges, in the order of All
// (delay only under a policy that declares no delay: StreamableUnder).
func Streamable() []string {
	return []string{"oversell", "under-admission", "token-bounds", "retry-after", "headers", "isolation", "fail-mode", "downstream", "bypass", CalibrationCheck, "regions", DelayCheck}
}

// Streamer judges a history event by event. Not safe for concurrent use.
type Streamer struct {
	ix       *index
	oversell *oversellStream
	bounds   *boundsStream
	headers  *headersStream
	retry    *retryStream
	down     *downStream
	cal      *calibrationStream
	fail     *failStream
	bypass   *bypassStream
	regions  *regionsStream
	under    *underStream
	inst     *instancesStream
	names    []string
	// n counts the events of Add, n2 those of AddAgain.
	n, n2 uint64
	// tol is the default timing tolerance's sample, taken when sampleTol
	// (a check needs it: retry-after, under-admission, isolation, and
	// calibration on a run with a calibrate phase).
	tol       tolSample
	sampleTol bool
	// keys is the state of each key the checks share (its tier) and keep.
	keys map[string]*streamKey
	// lastKey and last are the key of the event Add had last and its
	// state: runs of one key's events skip the map.
	lastKey string
	last    *streamKey
}

// streamKey is what the streaming checks keep of one key.
type streamKey struct {
	tier     *policy.Tier
	bounds   boundsKey
	oversell *oversellKey
	down     *downKey
	retry    retryKey
	regions  *regionsAcc
	under    *underKey
	inst     instancesKey
}

// NewStreamer judges, against p, the events of the history whose records
// (run header, faults, phases, sinks, end: history.ReadRecords) are rec;
// its events are not read. o.Only names the checks to run, which must all
// be Streamable (empty: all that stream).
func NewStreamer(rec *history.History, p *policy.Policy, o Options) (*Streamer, error) {
	names := o.Only
	if len(names) == 0 {
		names = Streamable()
	}
	for _, n := range names {
		if ok, why := streamsUnder(p, n); !ok {
			return nil, fmt.Errorf("checks: %q %s (streaming: %v); judge it in memory", n, why, Streamable())
		}
	}
	if o.MaxEvidence <= 0 {
		o.MaxEvidence = DefaultMaxEvidence
	}
	ix := &index{h: rec, p: p, o: o, slack: max(0, int64(o.Slack)+int64(p.ClockQuantum)), gen: headers.Generation(p.Headers.RateLimit)}
	if !rec.Run.Start.IsZero() {
		ix.startNs = rec.Run.Start.UnixNano()
	}
	s := &Streamer{ix: ix, names: names, keys: map[string]*streamKey{}, tol: tolSample{events: -1}}
	if slices.Contains(names, "oversell") || slices.Contains(names, "bypass") {
		// Bypass reads oversell's judgement of the plain keys.
		s.oversell = newOversellStream(ix)
	}
	if slices.Contains(names, "bypass") {
		s.bypass = newBypassStream(ix, s.oversell)
	}
	if slices.Contains(names, "token-bounds") {
		s.bounds = newBoundsStream(ix)
	}
	if slices.Contains(names, "headers") {
		s.headers = newHeadersStream(ix)
	}
	if slices.Contains(names, "retry-after") {
		s.retry = newRetryStream(ix)
	}
	if slices.Contains(names, "downstream") {
		s.down = newDownStream(ix)
	}
	if slices.Contains(names, "fail-mode") {
		s.fail = newFailStream(ix)
	}
	if slices.Contains(names, CalibrationCheck) {
		s.cal = newCalibrationStream(ix)
	}
	if slices.Contains(names, "regions") {
		s.regions = newRegionsStream(ix)
	}
	if slices.Contains(names, "under-admission") || slices.Contains(names, "isolation") {
		s.under = newUnderStream(ix, slices.Contains(names, "isolation"))
	}
	if s.retry != nil {
		s.retry.tol = &s.tol
	}
	if s.under != nil {
		s.under.tol = &s.tol
	}
	if s.cal != nil {
		s.cal.tol = &s.tol
	}
	s.sampleTol = s.retry != nil || s.under != nil || s.cal != nil && s.cal.phases != nil
	if slices.Contains(names, "instances") {
		s.inst = newInstancesStream(ix)
	}
	return s, nil
}

// SetEvents tells the streamer, before the first Add, how many events the
// stream will hand it: n is history.ReadRecords' (or ScanRecords') n, the
// event lines it counted without decoding them (the records' Events, lines
// it had to decode, are added). Retry-after's default timing tolerance
// samples every ⌈n/10,000⌉-th event in file order, as Run does: without
// n, or when the stream hands a number of events that samples others (a
// cut last line, which the records count, does not), retry-after is
// UNKNOWN, saying why, on a run with refusals to judge whose policy
// declares no tolerance.timing.
func (s *Streamer) SetEvents(n int64) {
	s.tol.events = n + int64(len(s.ix.h.Events))
}

// Add judges e, the event at position seq among the file's events
// (history.Stream.Seq). Events must come in the stream's order.
func (s *Streamer) Add(e *history.Event, seq uint64) {
	s.n++
	if s.sampleTol {
		s.tol.add(s.ix.p, e, seq)
	}
	r := s.ix.mkRec(e, 0)
	s.ix.maxLat = max(s.ix.maxLat, r.hi-r.lo)
	k := s.last
	if k == nil || s.lastKey != e.Key {
		k = s.keys[e.Key]
	}
	if k == nil {
		// The key's tier: the one its first event gives (a key's events
		// give one), else the policy's for its name.
		k = &streamKey{}
		if e.Tier != "" {
			k.tier, _ = s.ix.p.Tier(e.Tier)
		} else {
			k.tier, _ = s.ix.p.TierFor(e.Key)
		}
		k.bounds.firstLo = r.lo
		s.keys[e.Key] = k
	}
	s.lastKey, s.last = e.Key, k
	if s.oversell != nil {
		s.oversell.add(e, seq, r, k)
	}
	if s.bounds != nil {
		s.bounds.add(e, seq, r, k)
	}
	if s.headers != nil {
		s.headers.add(e, seq, r, k.tier)
	}
	if s.retry != nil {
		s.retry.add(e, seq, r, k)
	}
	if s.down != nil {
		s.down.add(e, r, k)
	}
	if s.cal != nil {
		s.cal.add(e, seq)
	}
	if s.fail != nil {
		s.fail.add(e, seq, r, k.tier)
	}
	if s.bypass != nil {
		s.bypass.add(e, seq, r, k) // after oversell's: a union is born from the plain key's state
	}
	if s.regions != nil {
		s.regions.add(e, seq, r, k)
	}
	if s.under != nil {
		s.under.add(e, seq, r, k)
	}
	if s.inst != nil {
		s.inst.add(e, &k.inst)
	}
}

// InMemory reports, once Add has had every event, whether the history
// needs the in-memory judgement after all, and why: instances judges on
// the stream only a run where no key's requests went to two or more
// instances (see instancesStream). Its result is then UNKNOWN, saying so;
// the driver judges the history in memory instead.
func (s *Streamer) InMemory() (why string, ok bool) {
	if s.inst != nil {
		if why := s.inst.inMemory(); why != "" {
			return why, true
		}
	}
	return "", false
}

// Again reports, once Add has had every event, whether the checks need
// the events a second time — AddAgain for each, in the same order — before
// Results: oversell judges a second time the segments of its keys that
// its first pass could not clear (see oversellStream), and retry-after
// judges its refusals there, once the first pass has gathered what they
// are judged by (see retryStream); fail-mode the flagged segments of the
// recoveries after its faults and the spans of the failures outside them
// (failStream), bypass its unions' flagged segments and the control
// requests (bypassStream), regions its counts when a region phase came
// without its record (regionsStream).
func (s *Streamer) Again() bool {
	again := false
	if s.oversell != nil && !s.oversell.again {
		s.oversell.again = s.oversell.needAgain()
		again = s.oversell.again
	}
	if s.retry != nil && !s.retry.asked {
		s.retry.asked = true
		s.retry.again = s.retry.needAgain(s.n, s.keys)
		again = again || s.retry.again
	}
	if s.regions != nil && !s.regions.again && s.regions.needAgain() {
		again = true
	}
	if s.fail != nil && !s.fail.asked && s.fail.needAgain() {
		again = true
	}
	if s.bypass != nil && !s.bypass.asked && s.bypass.needAgain() {
		again = true
	}
	if s.under != nil && !s.under.asked {
		again = s.under.needAgain(s.n) || again
	}
	return again
}

// MayAgain says, before the first pass, whether Again is likely to ask for
// the events a second time: retry-after and under-admission do whenever
// the run has refusals to judge, fail-mode, bypass and regions often;
// oversell only for the rare segments its first pass could not clear. A
// driver may then keep the first pass's events in a form quicker to read
// back than the history (the root package's spill of whole events).
func (s *Streamer) MayAgain() bool {
	return s.retry != nil || s.under != nil || s.fail != nil || s.bypass != nil || s.regions != nil
}

// AddAgain is Add's second pass (see Again): e is the event at position
// seq, in the stream's order again.
func (s *Streamer) AddAgain(e *history.Event, seq uint64) {
	s.n2++
	over := s.oversell != nil && s.oversell.again
	retry := s.retry != nil && s.retry.again
	regions := s.regions != nil && s.regions.again
	fail := s.fail != nil && s.fail.asked
	bypass := s.bypass != nil && s.bypass.us.again
	under := s.under != nil && s.under.again
	if !over && !retry && !regions && !fail && !bypass && !under {
		return
	}
	k := s.keys[e.Key]
	if k == nil {
		return
	}
	r := s.ix.mkRec(e, 0)
	if over {
		s.oversell.addAgain(e, seq, r, k)
	}
	if retry {
		s.retry.addAgain(e, seq, r, k)
	}
	if regions {
		s.regions.addAgain(e, seq, r, k)
	}
	if fail {
		s.fail.addAgain(e, seq, r, k.tier)
	}
	if bypass {
		s.bypass.addAgain(e, seq, r)
	}
	if under {
		s.under.addAgain(e, seq, r, k)
	}
}

// Results are the verdicts of the events added, as Run gives them for
// Options.Only = the streamer's checks.
func (s *Streamer) Results() []Result {
	var out []Result
	for _, n := range Names() {
		if !slices.Contains(s.names, n) {
			continue
		}
		var r Result
		switch n {
		case "oversell":
			if !s.oversell.again && s.oversell.needAgain() || s.oversell.again && s.n2 != s.n {
				r = Result{Verdict: Unknown, Summary: fmt.Sprintf("not judged: %s of the keys' admissions needed a second pass over the events (Streamer.Again), which did not see every event (%d of %d)",
					plural(s.oversell.flagged, "segment", "segments"), s.n2, s.n), Figures: map[string]float64{}}
				break
			}
			r = s.oversell.result(s.keys)
		case "token-bounds":
			r = s.bounds.result(s.keys)
		case "retry-after":
			if !s.retry.asked && s.retry.needAgain(s.n, s.keys) || s.retry.again && s.n2 != s.n {
				r = Result{Verdict: Unknown, Summary: fmt.Sprintf("not judged: %s needed a second pass over the events (Streamer.Again), which did not see every event (%d of %d)",
					plural(s.retry.candidates, "refusal", "refusals"), s.n2, s.n), Figures: map[string]float64{}}
				break
			}
			r = s.retry.result(s.keys)
		case "headers":
			r = s.headers.result()
		case "downstream":
			r = s.down.result(s.keys)
		case "bypass":
			r = s.bypass.result(s.keys, s.n, s.n2)
		case "fail-mode":
			r = s.fail.result(s.n, s.n2)
		case CalibrationCheck:
			r = s.cal.result(s.n)
		case "regions":
			r = s.regions.result(s.keys, s.n, s.n2)
		case DelayCheck:
			r = checkDelay(s.ix) // a SKIP (streamsUnder)
		case "under-admission", "isolation":
			if !s.under.asked && s.under.needAgain(s.n) || s.under.again && s.n2 != s.n {
				r = Result{Verdict: Unknown, Summary: fmt.Sprintf("not judged: %s needed a second pass over the events (Streamer.Again), which did not see every event (%d of %d)",
					plural(s.under.candidates, "refusal", "refusals"), s.n2, s.n), Figures: map[string]float64{}}
				break
			}
			if n == "isolation" {
				r = s.under.isolation()
				break
			}
			r = s.under.result()
		case "instances":
			r = s.inst.result()
		}
		r.Name = n
		// The slacks, and the warnings against the run's widest interval
		// (index.maxLat, tracked by Add).
		s.ix.discloseSlack(&r)
		out = append(out, r)
	}
	return out
}

// orderedCollector is a collector whose violations come out of order: it
// keeps the max first by their position (pass, then within the pass) in
// the in-memory check's order, and counts them all.
type orderedCollector struct {
	max   int
	total int
	items []ordered
}

type ordered struct {
	pass int
	key  string // the key's group (key order) for per-key passes
	sub  uint64 // the part of the key's judgement (a limit, an instance)
	at   uint64 // the position within the pass (or within the key)
	ev   Evidence
}

func cmpOrdered(a, b ordered) int {
	return cmp.Or(cmp.Compare(a.pass, b.pass), cmp.Compare(a.key, b.key), cmp.Compare(a.sub, b.sub), cmp.Compare(a.at, b.at))
}

func (c *orderedCollector) add(o ordered) {
	c.total++
	if len(c.items) == c.max && cmpOrdered(o, c.items[c.max-1]) >= 0 {
		return
	}
	i, _ := slices.BinarySearchFunc(c.items, o, cmpOrdered)
	c.items = slices.Insert(c.items, i, o)
	if len(c.items) > c.max {
		c.items = c.items[:c.max]
	}
}

func (c *orderedCollector) collector() *collector {
	col := &collector{max: c.max, total: c.total}
	for _, o := range c.items {
		col.items = append(col.items, o.ev)
	}
	return col
}

// boundsStream is checkBounds as a stream. Per key it keeps the tier, the
// last 8 reports (pass 2) and, until the key has had as many possibly
// consuming requests as its quota, the reports waiting for every request
// that could have consumed before them (pass 3): boundsKey, in the
// Streamer's streamKey.
type boundsStream struct {
	ix   *index
	oc   *obsCache
	col  orderedCollector
	seen int
}

type boundsReport struct {
	lo, hi int64
	rem    int64
	id     uint64
	at     uint64
	out    history.Outcome
}

type boundsKey struct {
	n uint64 // events of the key so far
	// prev are the last 8 reports (pass 2), np how many there were.
	prev [8]boundsReport
	np   int
	// Pass 3: firstLo is the lo of the key's first event, consumed the
	// possibly consuming requests so far, waiting the reports not yet
	// judged (their hi not yet passed), done once no report can fail.
	firstLo  int64
	consumed int64
	waiting  []boundsReport
	done     bool
}

func newBoundsStream(ix *index) *boundsStream {
	return &boundsStream{ix: ix, oc: ix.newObsCache(), col: orderedCollector{max: ix.o.MaxEvidence}}
}

func (b *boundsStream) add(e *history.Event, seq uint64, r rec, sk *streamKey) {
	ix := b.ix
	k := &sk.bounds
	at := k.n
	k.n++
	t := sk.tier
	if t == nil {
		return
	}
	single := len(t.Limits) == 1
	// Pass 3 first: the reports waiting for this key's requests decided
	// before r.lo are complete.
	if single && !t.Limits[0].PerInstance() && !k.done {
		b.settle(e.Key, t, k, r.lo)
		if t.Limits[0].CountsRejected() || r.out != history.Rejected {
			k.consumed += int64(r.tokens()) // a weighted request consumes its cost
		}
	}
	// Pass 1: this response alone.
	rem := int64(-1)
	if ix.judgedResponse(r) {
		rem = b.pass1(e, seq, r, t)
	}
	if rem < 0 {
		return
	}
	rep := boundsReport{lo: r.lo, hi: r.hi, rem: rem, id: e.ID, at: at, out: r.out}
	// Pass 2: remaining never grows faster than the refill.
	if l := &t.Limits[0]; l.Algorithm.Bucketed() {
		for j := k.np - 1; j >= 0 && j >= k.np-8; j-- {
			p := &k.prev[j%8]
			if p.hi >= r.lo {
				continue
			}
			gain := l.R() * float64(r.hi-p.lo) / 1e9
			bound := float64(p.rem) + gain
			if r.out != history.Admitted || r.tokens() == 0 {
				bound++ // r consumed nothing
			}
			if float64(rem) >= bound+eps {
				b.col.add(ordered{pass: 2, key: e.Key, at: at, ev: Evidence{Key: e.Key, Limit: l.Name, From: p.lo, To: r.hi, Bound: bound, Observed: float64(rem),
					RequestIDs: []uint64{p.id, e.ID}, TotalIDs: 2,
					Message: fmt.Sprintf("request %d of key %s reported %d remaining, but request %d (surely decided earlier) reported %d and the bucket can refill only %s tokens in between",
						e.ID, e.Key, rem, p.id, p.rem, fmtF(gain))}})
				break
			}
		}
		k.prev[k.np%8] = rep
		k.np++
	}
	if !t.Limits[0].PerInstance() && !k.done && !r.fault {
		k.waiting = append(k.waiting, rep)
	}
}

// pass1 judges one response's remaining on its own, and returns what it
// reported against its tier's single limit for passes 2 and 3 (-1: none).
func (b *boundsStream) pass1(e *history.Event, seq uint64, r rec, t *policy.Tier) int64 {
	rem, lim, xrem, ok := remaining(e, b.oc)
	if !ok {
		return -1
	}
	b.seen++
	maxK := int64(0)
	for _, l := range t.Limits {
		maxK = max(maxK, l.Count)
	}
	if lim < 0 {
		lim = maxK
	}
	single := len(t.Limits) == 1
	cost := int64(r.tokens())
	bad := func(bound float64, format string, args ...any) {
		b.col.add(ordered{pass: 1, at: seq, ev: Evidence{Key: e.Key, Limit: limitNames(t), From: r.lo, To: r.hi, Bound: bound, Observed: float64(rem),
			RequestIDs: []uint64{e.ID}, TotalIDs: 1, Message: fmt.Sprintf("request %d of key %s: ", e.ID, e.Key) + fmt.Sprintf(format, args...)}})
	}
	switch {
	case rem < 0:
		bad(0, "reported %d remaining (negative)", rem)
	case rem > lim || rem > maxK:
		bad(float64(min(lim, maxK)), "reported %d remaining, more than the limit %d", rem, min(lim, maxK))
	case r.out == history.Admitted && cost == 1 && rem >= lim && tierHasCount(t, lim):
		bad(float64(lim-1), "was admitted yet reported the whole quota (%d) remaining; after consuming at most %d can remain", rem, lim-1)
	case r.out == history.Admitted && cost > 1 && rem > lim-cost && tierHasCount(t, lim):
		bad(float64(lim-cost), "was admitted at cost %d yet reported %d remaining; after consuming %d of %d at most %d can remain", cost, rem, cost, lim, lim-cost)
	case single && r.out == history.Rejected && rem >= max(cost, 1):
		if cost > 1 {
			bad(float64(cost-1), "got 429 at cost %d while reporting %d remaining on a single-limit tier", cost, rem)
			break
		}
		bad(0, "got 429 while reporting %d remaining on a single-limit tier", rem)
	case single && xrem >= 0 && xrem != rem:
		bad(float64(xrem), "X-RateLimit-Remaining %d and %s disagree", xrem, counterName(b.ix.gen, "remaining", rem))
	default:
		if single && lim == t.Limits[0].Count && rem <= math.MaxInt32 {
			return rem
		}
	}
	return -1
}

// settle judges (pass 3) the waiting reports of key whose hi is before
// upTo: every request of the key that could have consumed by their
// decision has been counted. Once the key has had its quota of possibly
// consuming requests no report can fail: its state for pass 3 goes.
func (b *boundsStream) settle(key string, t *policy.Tier, k *boundsKey, upTo int64) {
	l := &t.Limits[0]
	keep := k.waiting[:0]
	for _, w := range k.waiting {
		if w.hi >= upTo {
			keep = append(keep, w)
			continue
		}
		if low := l.Count - k.consumed; w.rem < low {
			b.col.add(ordered{pass: 3, key: key, at: w.at, ev: Evidence{Key: key, Limit: l.Name, From: k.firstLo, To: w.hi, Bound: float64(low), Observed: float64(w.rem),
				RequestIDs: []uint64{w.id}, TotalIDs: 1,
				Message: fmt.Sprintf("request %d of key %s reported %d remaining, but at most %d of the key's requests could have consumed by its decision from a whole quota of %d, so at least %d remained",
					w.id, key, w.rem, k.consumed, l.Count, low)}})
		}
	}
	k.waiting = keep
	if k.consumed >= l.Count {
		k.done, k.waiting = true, nil
	}
}

func (b *boundsStream) result(all map[string]*streamKey) Result {
	for key, k := range all {
		if t := k.tier; t != nil && len(t.Limits) == 1 && !t.Limits[0].PerInstance() && !k.bounds.done {
			b.settle(key, t, &k.bounds, math.MaxInt64)
		}
	}
	col := b.col.collector()
	figs := map[string]float64{"responses_with_remaining": float64(b.seen)}
	if b.seen == 0 {
		return col.result(Skip, "no response reported a remaining count", figs, "")
	}
	return col.result(Pass, fmt.Sprintf("%s reported remaining counts within bounds and consistent", plural(b.seen, "response", "responses")), figs,
		fmt.Sprintf("%s reported impossible remaining counts", plural(col.total, "response", "responses")))
}

// headersStream is checkHeaders as a stream: every response on its own,
// through the full parse (checkHeaders' table of parsed headers is a fast
// path that answers only when the full parse finds nothing). Per key it
// keeps the tier.
type headersStream struct {
	ix      *index
	oc      *obsCache
	col     orderedCollector
	checked int
	maxW    map[*policy.Tier]int64
	probs   []string
}

func newHeadersStream(ix *index) *headersStream {
	h := &headersStream{ix: ix, oc: ix.newObsCache(), col: orderedCollector{max: ix.o.MaxEvidence}, maxW: map[*policy.Tier]int64{}}
	for ti := range ix.p.Tiers {
		t := &ix.p.Tiers[ti]
		for li := range t.Limits {
			h.maxW[t] = max(h.maxW[t], windowSeconds(&t.Limits[li]))
		}
	}
	return h
}

func (h *headersStream) add(e *history.Event, seq uint64, r rec, t *policy.Tier) {
	ix := h.ix
	hp := ix.p.Headers
	if !hp.RateLimit.Declared() && !hp.XRateLimit {
		return
	}
	if t == nil || !ix.judgedResponse(r) {
		return
	}
	if hp.On == policy.HeadersOnAdmitted && r.out != history.Admitted {
		return
	}
	h.checked++
	probs := h.probs[:0]
	if hp.RateLimit.Declared() {
		probs = checkRateLimit(h.oc.read(e), t, h.maxW[t], probs)
	}
	if hp.XRateLimit {
		probs = ix.checkXRateLimit(e, r, t, h.maxW[t], probs)
	}
	h.probs = probs
	if len(probs) == 0 {
		return
	}
	ev := Evidence{Key: e.Key, Limit: limitNames(t), From: r.lo, To: r.hi, RequestIDs: []uint64{e.ID}, TotalIDs: 1,
		Message: fmt.Sprintf("request %d (status %d): %s", e.ID, e.Status, strings.Join(probs, "; "))}
	if slices.ContainsFunc(probs, func(p string) bool { return strings.HasSuffix(p, " is missing") }) {
		ev.Cause = CauseMissingHeader
	}
	h.col.add(ordered{pass: 1, at: seq, ev: ev})
}

func (h *headersStream) result() Result {
	ix := h.ix
	hp := ix.p.Headers
	col := h.col.collector()
	figs := map[string]float64{}
	if !hp.RateLimit.Declared() && !hp.XRateLimit {
		return col.result(Skip, "the policy declares neither RateLimit nor X-RateLimit headers", figs, "")
	}
	figs["responses_checked"] = float64(h.checked)
	if h.checked == 0 {
		return col.result(Skip, "no admitted or 429 responses outside fault windows", figs, "")
	}
	return col.result(Pass, fmt.Sprintf("%s %s valid and consistent with the policy", plural(h.checked, "response's", "responses'"), strings.Join(headerKinds(ix), " and ")), figs,
		fmt.Sprintf("%s with missing or wrong rate-limit headers", plural(col.total, "response", "responses")))
}
