package attacks

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/rlverify/rlverify/faults"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// runPhase runs one phase and returns its record.
func (e *Engine) runPhase(ctx context.Context, ph *Phase) (*history.Phase, error) {
	start := e.off()
	var rec *history.Phase
	var err error
	if len(ph.Costs) > 0 {
		cycles, note, cerr := e.resolveCosts(ph)
		switch {
		case cerr != nil:
			return nil, cerr
		case cycles == nil:
			return &history.Phase{Start: start, End: e.off(), Notes: []string{note}}, nil
		}
		e.costs.m.Store(ph.Name, cycles)
		defer e.costs.m.Delete(ph.Name)
	}
	switch ph.Kind {
	case KindBurst:
		n := ph.Requests
		if n == 0 {
			// Default: enough to drain the key whatever its quota.
			lim, lerr := e.limitFor(e.Key(ph.Key))
			if lerr != nil {
				return nil, lerr
			}
			n = int(min(2*lim.Count+DefaultBypassExtra, MaxBurstRequests))
		}
		rec, err = e.burst(ctx, ph, ph.Key, e.share(n), -1)
	case KindBoundary:
		rec, err = e.boundary(ctx, ph)
	case KindIdle:
		rec, err = e.idle(ctx, ph)
	case KindRate:
		rec, err = e.rate(ctx, ph, []weighted{{tenant: ph.Key, key: e.Key(ph.Key), w: 1}})
	case KindTenants:
		ws := make([]weighted, 0, len(ph.Tenants))
		var notes []string
		for _, t := range ph.Tenants {
			key := e.Key(t.Key)
			switch {
			case t.Long:
				key = e.longKey(t.Key)
			case t.Length > 0 && e.o.Policy.Identity.MaxLength > 0 && t.Length > e.o.Policy.Identity.MaxLength:
				notes = append(notes, fmt.Sprintf("tenant %s (length %d): not sent, the policy's identity.max_length is %d", t.Key, t.Length, e.o.Policy.Identity.MaxLength))
				continue
			case t.Length > 0:
				if k, kerr := e.keys.paddedKey(t.Key, t.Length); kerr == nil {
					key = k
				}
			}
			ws = append(ws, weighted{tenant: t.Key, key: key, w: t.Weight})
		}
		if len(ws) == 0 {
			rec = &history.Phase{Notes: notes}
			break
		}
		rec, err = e.rate(ctx, ph, ws)
		if rec != nil {
			rec.Notes = append(rec.Notes, notes...)
		}
	case KindFault:
		rec, err = e.fault(ctx, ph)
	case KindRetry:
		rec, err = e.retry(ctx, ph)
	case KindSpread:
		rec, err = e.spread(ctx, ph)
	case KindProbe:
		rec, err = e.probe(ctx, ph)
	case KindBypass:
		rec, err = e.bypass(ctx, ph)
	case KindCalibrate:
		rec, err = e.calibrate(ctx, ph)
	default:
		err = fmt.Errorf("phase kind %s is not supported by this engine", ph.Kind)
	}
	if rec == nil {
		rec = &history.Phase{}
	}
	if rec.Start == 0 {
		rec.Start = start
	}
	rec.End = e.off()
	return rec, err
}

// warm opens n keep-alive connections to each instance in use so a burst
// does not pay for TCP handshakes.
func (e *Engine) warm(ctx context.Context, insts map[int]int) {
	var wg sync.WaitGroup
	for inst, n := range insts {
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(inst int) {
				defer wg.Done()
				hr, err := http.NewRequestWithContext(ctx, http.MethodGet, e.o.Instances[inst]+"/healthz", nil)
				if err != nil {
					return
				}
				resp, err := e.client.Do(hr)
				if err == nil {
					resp.Body.Close()
				}
			}(inst)
		}
	}
	wg.Wait()
}

// burst sends n requests for the logical key tenant released together at
// offset at (a negative at: as soon as everything is ready), by last-byte
// synchronisation on plain HTTP and through a barrier otherwise.
func (e *Engine) burst(ctx context.Context, ph *Phase, tenant string, n int, at int64) (*history.Phase, error) {
	rs := make([]*req, max(n, 0))
	for i := range rs {
		rs[i] = e.newReq(ph, tenant, e.pickInstance(ph, i))
	}
	return e.burstOf(ctx, rs, at)
}

// burstOf releases the prepared requests rs together at offset at (negative:
// as soon as they are ready) and returns the phase record with the spread
// of send times and, when aimed, the aim error.
func (e *Engine) burstOf(ctx context.Context, rs []*req, at int64) (*history.Phase, error) {
	n := len(rs)
	if n == 0 {
		return &history.Phase{}, nil
	}
	if !e.reserve(int64(n)) {
		return &history.Phase{}, nil
	}
	per := map[int]int{}
	for _, r := range rs {
		per[r.inst]++
	}
	asap := at < 0
	sent, release, staged, ok, err := e.rawBurst(ctx, rs, at)
	if err != nil {
		return nil, err
	}
	if !ok {
		sent, release, err = e.clientBurst(ctx, rs, per, at)
		if err != nil {
			return nil, err
		}
		staged = release // warmed connections, nothing staged
	}
	spread := make([]int64, n)
	for i, s := range sent {
		spread[i] = s - release
	}
	spread = sortedCopy(spread)
	rec := &history.Phase{
		Start: release, Requests: int64(n), Staged: max(release-staged, 0),
		SpreadP50: percentile(spread, 0.5), SpreadP99: percentile(spread, 0.99), SpreadMax: spread[len(spread)-1],
	}
	if !asap {
		rec.Target = at
		rec.AimError = percentile(sortedCopy(sent), 0.5) - at
	}
	return rec, nil
}

// clientBurst releases rs through a barrier over warmed net/http
// connections (used for https targets).
func (e *Engine) clientBurst(ctx context.Context, rs []*req, per map[int]int, at int64) ([]int64, int64, error) {
	n := len(rs)
	e.warm(ctx, per)
	type prepared struct {
		hr *http.Request
		ev *history.Event
	}
	ps := make([]prepared, n)
	for i, r := range rs {
		ev, hr, err := e.build(ctx, r)
		if err != nil {
			return nil, 0, err
		}
		ps[i] = prepared{hr: hr, ev: ev}
	}
	gate := make(chan struct{})
	var ready, done sync.WaitGroup
	sent := make([]int64, n)
	for i := range ps {
		ready.Add(1)
		done.Add(1)
		go func(i int) {
			defer done.Done()
			p := ps[i]
			ready.Done()
			<-gate
			p.ev.Sent = e.off()
			resp, err := e.client.Do(p.hr)
			if err == nil {
				if err = checkHeaderCount(resp, e.maxHeaders()); err == nil {
					_, err = drain(resp)
				} else {
					resp.Body.Close()
				}
			}
			if err != nil && ctx.Err() != nil {
				err = errCancelled
			}
			p.ev.Recv = e.off()
			sent[i] = p.ev.Sent
			e.record(p.ev, resp, err)
		}(i)
	}
	ready.Wait()
	if at >= 0 {
		e.sleepUntil(ctx, at)
	}
	release := e.off()
	for i := range ps {
		ps[i].ev.Intended = max(at, release)
	}
	close(gate)
	done.Wait()
	return sent, release, nil
}

// drain reads resp's body (at most 1 MiB) and closes it; see drainKeep.
func drain(resp *http.Response) (int64, error) { return drainKeep(resp, 1<<20) }

// boundary aims one burst just before a window edge and one just after.
func (e *Engine) boundary(ctx context.Context, ph *Phase) (*history.Phase, error) {
	key := e.Key(ph.Key)
	lim, err := e.limitFor(key)
	if err != nil {
		return nil, err
	}
	n := ph.Requests
	if n == 0 {
		n = int(min(lim.Count, MaxBurstRequests))
	}
	n = e.share(n)
	before, after := ph.Before.D(), ph.After.D()
	if before == 0 {
		before = DefaultEdgeOffset
	}
	if after == 0 {
		after = DefaultEdgeOffset
	}
	w := lim.W()
	lead := edgeLead + before
	var edge int64
	// late is how much later than edge the edge may lie (a first-anchored
	// window opened somewhere in its opener's [send, receive]).
	var late int64
	switch ph.Align {
	case "headers":
		edge, err = e.headerEdge(ctx, ph, key, w, lead)
		if err != nil {
			return nil, err
		}
	case "first":
		sent, recv, err := e.openWindow(ctx, ph)
		if err != nil {
			return nil, err
		}
		edge, late = sent+int64(w), recv-sent
	default:
		// Next epoch-aligned edge far enough ahead to warm up.
		nowWall := e.wall(e.off())
		edgeWall := nowWall.Add(lead).Truncate(w).Add(w)
		edge = edgeWall.Sub(e.start).Nanoseconds()
	}
	if away := time.Duration(edge - e.off()); away > e.o.MaxDuration {
		return nil, fmt.Errorf("the next %s window edge is %s away, beyond MaxDuration", w, away)
	}
	r1, err := e.burst(ctx, ph, ph.Key, n, edge-int64(before))
	if err != nil || ctx.Err() != nil {
		return r1, err
	}
	r2, err := e.burst(ctx, ph, ph.Key, n, edge+late+int64(after))
	rec := &history.Phase{
		Start: r1.Start, Requests: r1.Requests + r2.Requests, Target: edge,
		SpreadP50: max(r1.SpreadP50, r2.SpreadP50), SpreadP99: max(r1.SpreadP99, r2.SpreadP99),
		SpreadMax: max(r1.SpreadMax, r2.SpreadMax), Staged: max(r1.Staged, r2.Staged),
		AimError: absMax(r1.AimError, r2.AimError),
	}
	return rec, err
}

// openWindow sends the key's first request of a boundary phase aligned
// "first": it opens the key's window (when the key has none open: the
// plan's key must be fresh), somewhere in [sent, recv].
func (e *Engine) openWindow(ctx context.Context, ph *Phase) (sent, recv int64, err error) {
	if !e.reserve(1) {
		return 0, 0, fmt.Errorf("align: first: the request budget (MaxRequests) is spent")
	}
	r := e.newReq(ph, ph.Key, e.pickInstance(ph, 0))
	r.intended = e.off()
	ev := e.do(ctx, r)
	if ev.Status == 0 {
		return 0, 0, fmt.Errorf("align: first: the request that opens the window failed: %s", ev.Err)
	}
	return ev.Sent, ev.Recv, nil
}

func absMax(a, b int64) int64 {
	if a < 0 {
		a = -a
	}
	if b < 0 {
		b = -b
	}
	return max(a, b)
}

// idle waits for a duration or until every bucket used so far is full.
func (e *Engine) idle(ctx context.Context, ph *Phase) (*history.Phase, error) {
	d := ph.Duration.D()
	var notes []string
	if ph.Until == "full" {
		var worst time.Duration
		once := map[string]bool{}
		consider := func(t *policy.Tier) {
			for _, l := range t.Limits {
				if l.NeverRefills() {
					// A one-off quota never fills again: waiting for it
					// would outlast any run. The phases after this one
					// start from what is left, so an admission past the
					// quota is oversell (a refill that must not happen).
					once[t.Name+" "+l.Name] = true
					continue
				}
				worst = max(worst, l.W())
			}
		}
		e.keysUsed.Range(func(k, _ any) bool {
			if t, ok := e.tierOf(k.(string)); ok {
				consider(t)
			}
			return true
		})
		if ph.Key != "" {
			if t, ok := e.tierOf(e.Key(ph.Key)); ok {
				consider(t)
			}
		}
		// A bucket refills completely in K/r = W; a window empties in W.
		d = worst + 50*time.Millisecond
		if len(once) > 0 {
			names := make([]string, 0, len(once))
			for n := range once {
				names = append(names, n)
			}
			sort.Strings(names)
			notes = append(notes, fmt.Sprintf("not waited for %s: a one-off quota never refills; the phases after this one start from what is left of it", strings.Join(names, ", ")))
		}
	}
	if d > e.o.MaxDuration {
		return nil, fmt.Errorf("idle for %s exceeds MaxDuration %s", d, e.o.MaxDuration)
	}
	e.o.Sleep(ctx, d)
	return &history.Phase{Notes: notes}, nil
}

type weighted struct {
	// tenant is the plan's logical key, key the key sent for it.
	tenant, key string
	w           float64
}

// rate runs an open-model phase: requests leave at the times of vegeta's
// pacers whether or not earlier ones have returned, from a pool of up to
// Concurrency workers (see pool). A hit that finds every worker busy leaves
// when one frees up and counts as late; hits the phase had no time for are
// dropped. Keys are drawn by weight.
func (e *Engine) rate(ctx context.Context, ph *Phase, keys []weighted) (*history.Phase, error) {
	rate := float64(ph.Rate)
	if ph.RateX > 0 {
		lim, err := e.limitFor(keys[0].key)
		if err != nil {
			return nil, err
		}
		rate = ph.RateX * lim.R()
		if rate > MaxRate {
			return nil, fmt.Errorf("rate_x %g of %s is %g/s, beyond %d/s", ph.RateX, policy.FormatRate(lim.R()), rate, MaxRate)
		}
	}
	r0 := rate / float64(e.o.Shards)
	r1 := float64(ph.RateTo) / float64(e.o.Shards)
	dur := ph.Duration.D()
	limit := uint64(0)
	if ph.Requests > 0 {
		limit = uint64(e.share(ph.Requests))
	}
	if dur == 0 {
		dur = time.Duration(float64(limit)/r0*float64(time.Second)) + time.Second
	}
	// One hit per interval: exact for fractional rates (a shard's share of
	// 5/s is 2.5/s), where Freq: int(r0) per second would truncate.
	per := time.Duration(math.Round(float64(time.Second) / r0))
	var pacer vegeta.Pacer = vegeta.ConstantPacer{Freq: 1, Per: per}
	var slope float64
	if r1 > 0 {
		slope = (r1 - r0) / dur.Seconds()
		pacer = vegeta.LinearPacer{StartAt: vegeta.Rate{Freq: int(max(1, r0)), Per: time.Second}, Slope: slope}
	}
	expected := uint64(r0*dur.Seconds() + slope*dur.Seconds()*dur.Seconds()/2)
	if limit > 0 {
		expected = min(expected, limit)
	}
	budget := int64(e.o.MaxRequests) - e.sent.Load()
	if budget <= 0 {
		e.stopReason.CompareAndSwap("", fmt.Sprintf(history.ReasonBound+"MaxRequests %d", e.o.MaxRequests))
		return &history.Phase{Start: e.off(), Notes: []string{"not run: the request budget (MaxRequests) is spent"}}, nil
	}
	if int64(expected) > budget {
		expected = uint64(max(budget, 0))
		limit = expected
		e.stopReason.CompareAndSwap("", fmt.Sprintf(history.ReasonBound+"MaxRequests %d", e.o.MaxRequests))
	}
	if limit > 0 {
		pacer = countedPacer{Pacer: pacer, limit: limit}
	}
	conc := ph.Concurrency
	if conc == 0 {
		conc = 256
	}
	p := e.newPool(ctx, ph, keys)
	p.per, p.r0, p.slope = per, r0, slope
	p.phaseStart = e.off()
	_, stopped := p.schedule(ctx, pacer, dur, conc)
	sentN := p.sentN.Load()
	span := time.Duration(p.lastSent.Load() - p.phaseStart).Seconds()
	rec := &history.Phase{Start: p.phaseStart, Requests: sentN, Late: p.late.Load(), Wanted: r0 + slope*dur.Seconds()/2}
	if span > 0 {
		rec.Rate = float64(sentN) / span
	}
	if !stopped && int64(expected) > sentN {
		rec.Dropped = int64(expected) - sentN
	}
	if sentN == 0 && expected == 0 && !stopped {
		rec.Notes = append(rec.Notes, fmt.Sprintf("no request was due within the phase's %s: the rate sends one every %s", dur, per))
	}
	return rec, nil
}

// intendedOffset returns when hit number seq (from 0) should leave: for
// vegeta's ConstantPacer of one hit per interval `per`, hit k leaves at
// (k+1)·per (the pacer waits one interval before the first hit); for its
// LinearPacer starting at r0 per second and rising by slope per second², hit
// 0 leaves at once and hit k when r0·t + slope·t²/2 = k.
func intendedOffset(seq uint64, per time.Duration, r0, slope float64) int64 {
	k := float64(seq)
	if slope == 0 {
		return int64(seq+1) * int64(per)
	}
	// k = r0·t + slope·t²/2
	disc := r0*r0 + 2*slope*k
	if disc < 0 {
		return 0
	}
	t := (-r0 + sqrtF(disc)) / slope
	return int64(t * float64(time.Second))
}

// fault injects or clears a fault through the environment and records the
// window in the history.
func (e *Engine) fault(ctx context.Context, ph *Phase) (*history.Phase, error) {
	if e.o.Faults == nil || !e.o.Faults.Supports(ph.Fault) {
		return nil, fmt.Errorf("the environment cannot inject %s faults (run the plan with Store redis, or Env docker)", ph.Fault)
	}
	if e.o.Shard != 0 {
		return &history.Phase{}, nil // one shard drives the faults
	}
	e.faultMu.Lock()
	defer e.faultMu.Unlock()
	if e.openFaults == nil {
		e.openFaults = map[string]history.Fault{}
	}
	switch ph.Action {
	case "inject":
		param, target := faultParam(ph)
		if ph.Fault == faults.LimitChange {
			// The history records the new limits beside the change's name.
			c, ok := e.o.Policy.ChangeNamed(strings.TrimSpace(ph.Param))
			if !ok {
				return nil, fmt.Errorf("inject %s: the policy declares no change %q", ph.Fault, ph.Param)
			}
			var ls []string
			for _, l := range c.Limits {
				ls = append(ls, l.Describe())
			}
			target = fmt.Sprintf("tier %s: %s", c.Tier, strings.Join(ls, ", "))
		}
		began := e.off()
		if err := e.o.Faults.Inject(ctx, ph.Fault, param); err != nil {
			return nil, fmt.Errorf("inject %s: %w", ph.Fault, err)
		}
		f := history.Fault{Kind: ph.Fault, Start: e.off(), Injecting: began, Param: ph.Param, Target: target}
		if h, ok := e.lastHook(ph.Fault, "inject"); ok {
			f.Hooks = append(f.Hooks, h)
		}
		e.openFaults[ph.Fault] = f
	case "clear":
		began := e.off()
		if err := e.o.Faults.Clear(ctx, ph.Fault); err != nil {
			return nil, fmt.Errorf("clear %s: %w", ph.Fault, err)
		}
		if f, ok := e.openFaults[ph.Fault]; ok {
			f.End, f.Cleared = began, e.off()
			if h, ok := e.lastHook(ph.Fault, "clear"); ok {
				f.Hooks = append(f.Hooks, h)
			}
			delete(e.openFaults, ph.Fault)
			if err := e.o.Writer.WriteFault(f); err != nil {
				return nil, err
			}
		}
	}
	return &history.Phase{}, nil
}

// lastHook is the user's command that just injected or cleared kind, when
// a hook did it.
func (e *Engine) lastHook(kind, action string) (history.FaultHook, bool) {
	if h, ok := e.o.Faults.(interface {
		LastHook(kind, action string) (history.FaultHook, bool)
	}); ok {
		return h.LastHook(kind, action)
	}
	return history.FaultHook{}, false
}

// faultParam is the param handed to the fault injector and the target
// recorded in the history. A clock skew applies to one instance: its param
// is the signed skew followed by "@" and the instance index ("+2s@0").
func faultParam(ph *Phase) (param, target string) {
	if ph.Fault != "clock-skew" {
		return ph.Param, ""
	}
	return fmt.Sprintf("%s@%d", strings.TrimSpace(ph.Param), ph.Instance), fmt.Sprintf("instance %d", ph.Instance)
}

// countedPacer stops a pacer after limit hits.
type countedPacer struct {
	vegeta.Pacer
	limit uint64
}

// Pace implements vegeta.Pacer.
func (c countedPacer) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	if hits >= c.limit {
		return 0, true
	}
	return c.Pacer.Pace(elapsed, hits)
}
