package attacks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlverify/rlverify/faults"
	"github.com/rlverify/rlverify/headers"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// Defaults for the engine's safety limits.
const (
	DefaultMaxRequests = 200_000
	DefaultMaxDuration = 10 * time.Minute
	DefaultTimeout     = 5 * time.Second
	// DefaultPath is the path the built-in environments' requests ask for
	// when neither the target URL nor the plan gives one.
	DefaultPath = "/api"
)

// Options configure an Engine. Instances, Policy and Writer are required.
type Options struct {
	// Instances are the base URLs of the target's instances.
	Instances []string
	// Policy is the declared policy (used to aim at windows and wait for
	// refills, never to judge).
	Policy *policy.Policy
	// Writer receives every event as it completes.
	Writer *history.Writer
	// Faults and Sink come from the environment; either may be nil.
	Faults faults.Injector
	Sink   faults.SinkReader
	// Client sends the requests; a tuned keep-alive client when nil. A
	// grpc:// instance (a rate-limit service) needs one whose transport
	// speaks the protocol and reads InfoOf(request context).
	Client *http.Client
	// Now is the engine's clock (time.Now when nil). Offsets in the history
	// are differences of its readings, monotonic when it is time.Now.
	Now func() time.Time
	// Sleep waits (time.Sleep-like, but returns early when ctx ends).
	Sleep func(ctx context.Context, d time.Duration)
	// MaxRequests and MaxDuration bound the run (defaults above).
	MaxRequests int64
	MaxDuration time.Duration
	// Timeout bounds one request.
	Timeout time.Duration
	// Shard (0-based) of Shards runs a deterministic share of the plan.
	Shard, Shards int
	// Seed makes random choices (instances, jitter, variants) repeatable.
	Seed int64
	// RunID tags keys so runs never share limiter state; random when empty.
	RunID string
	// KeepKeys sends the plan's keys unchanged (real API keys of an external
	// service) instead of tagging them with RunID. They are then secrets:
	// the history and everything derived from it get Redact(key) instead.
	KeepKeys bool
	// Progress, when set, is called after every phase and every ~250ms.
	Progress func(Progress)
	// LateTolerance: a send later than this after its intended time counts
	// as late (default 10ms).
	LateTolerance time.Duration
	// Request shapes every request (method, headers, body), over the plan's
	// and each phase's own shape; typically the command line's --method,
	// --header and --body.
	Request Request
	// DefaultPath is asked for when neither a target URL nor the plan gives
	// a path (default "/").
	DefaultPath string
	// Keys maps the plan's logical keys to keys the target accepts (a keys
	// file); nil generates keys tagged with the run id.
	Keys *KeyFile
	// MaxProbeWait caps how long a probe waits for its instant (0: only
	// --max-duration); a probe beyond it is not sent and its phase says so.
	MaxProbeWait time.Duration
	// MaxHeaderBytes and MaxHeaders bound one response's header section
	// (defaults DefaultMaxHeaderBytes, DefaultMaxHeaders); a response past
	// them is an error.
	MaxHeaderBytes int64
	MaxHeaders     int
	// StartAt, when set, is the wall-clock instant the run begins: Run waits
	// until then, so shards on several machines start together. It must lie
	// ahead, by at most MaxStartWait (see CheckStart).
	StartAt time.Time
}

// Summary is what a run did.
type Summary struct {
	RunID       string
	Start       time.Time
	Elapsed     time.Duration
	Requests    int64
	Interrupted bool
	Reason      string
	Phases      []history.Phase
}

// Engine runs plans. One Engine runs one plan once.
type Engine struct {
	o Options
	// recordDate keeps each response's Date header (a plan that steps an
	// instance's clock: the header shows whether the step took effect).
	recordDate bool
	// costs are the running phases' weighted costs (cost.go).
	costs  phaseCosts
	client *http.Client
	// bases are the instances' URLs split for building requests.
	bases []base
	// defShape is the plan-less shape (Options.Request alone); shapes the
	// compiled shape of each phase, by phase name.
	defShape *shape
	shapes   map[string]*shape
	defPath  string
	// plain is each instance's request-target when nothing changes it.
	plain []string
	keys  *keyMapper
	start time.Time
	rng   *mrand.Rand
	rngMu sync.Mutex
	// counters
	seq                  atomic.Uint64
	sent, adm, rej, errs atomic.Int64
	// samples counts the answers that kept a body sample (maxBodySamples).
	samples       atomic.Int64
	cur           atomic.Pointer[phaseProgress]
	lastRejection sync.Map     // key -> rejection
	keysUsed      sync.Map     // key -> struct{}
	stopReason    atomic.Value // string
	// writeErr is the history writer's first error; stopWrite ends the run
	// with it, so a full disk never gets load nobody records.
	writeErr   atomic.Pointer[error]
	stopWrite  context.CancelCauseFunc
	rrNext     atomic.Uint64
	faultMu    sync.Mutex
	openFaults map[string]history.Fault
	// downBase is the downstream's reading before the run, by key.
	downBase map[string]int64
}

type rejection struct {
	recv       int64
	retryAfter time.Duration
}

// New checks o and returns an engine.
func New(o Options) (*Engine, error) {
	if len(o.Instances) == 0 {
		return nil, errors.New("attacks: no target instances")
	}
	var bases []base
	for _, in := range o.Instances {
		b, err := parseBase(in)
		if err != nil {
			return nil, fmt.Errorf("attacks: %w", err)
		}
		if b.scheme == SchemeGRPC && o.Client == nil {
			return nil, fmt.Errorf("attacks: target %s is a rate-limit service: its requests need a client whose transport speaks the protocol", in)
		}
		bases = append(bases, b)
	}
	if o.Policy == nil || o.Writer == nil {
		return nil, errors.New("attacks: a policy and a history writer are required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = sleepCtx
	}
	if o.MaxRequests <= 0 {
		o.MaxRequests = DefaultMaxRequests
	}
	if o.MaxDuration <= 0 {
		o.MaxDuration = DefaultMaxDuration
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Shards <= 0 {
		o.Shards = 1
	}
	if o.Shard < 0 || o.Shard >= o.Shards {
		return nil, fmt.Errorf("attacks: shard %d of %d is out of range", o.Shard+1, o.Shards)
	}
	if o.LateTolerance <= 0 {
		o.LateTolerance = 10 * time.Millisecond
	}
	if o.RunID == "" {
		var b [3]byte
		_, _ = rand.Read(b[:])
		o.RunID = hex.EncodeToString(b[:])
	}
	def, field, err := o.Request.fromCaller().compile(bodyFiles{})
	if err != nil {
		return nil, fmt.Errorf("attacks: request %s: %w", field, err)
	}
	e := &Engine{o: o, client: o.Client, bases: bases, defShape: def, defPath: o.DefaultPath}
	if e.defPath == "" {
		e.defPath = "/"
	}
	if e.client == nil {
		e.client = NewClient(o.Timeout)
		e.client.Transport.(*http.Transport).MaxResponseHeaderBytes = e.maxHeaderBytes()
	}
	e.keys = newKeyMapper(o.Policy, o.RunID, o.KeepKeys, o.Keys)
	for _, b := range bases {
		e.plain = append(e.plain, b.requestTarget("", e.defPath, nil))
	}
	e.rng = mrand.New(mrand.NewPCG(uint64(o.Seed), uint64(o.Shard)))
	e.stopReason.Store("")
	return e, nil
}

// NewClient returns an HTTP client tuned for load: keep-alive connections
// without a per-host cap, no compression, no proxy.
func NewClient(timeout time.Duration) *http.Client {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: MaxConcurrency,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	return &http.Client{Transport: tr, Timeout: timeout, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// off is the engine's time since start in ns.
func (e *Engine) off() int64 { return e.o.Now().Sub(e.start).Nanoseconds() }

// Key returns the key sent for the plan's logical key (see keyMapper.key:
// a generated key carries the run id after its tier prefix; a keys file or
// --keep-keys gives the user's own). Run resolves every key of the plan
// before it sends anything, so here the key is known.
func (e *Engine) Key(planKey string) string {
	k, err := e.keys.key(planKey)
	if err != nil {
		return planKey
	}
	return k
}

// longKey is the long key sent for a tenant with Long set (see
// keyMapper.longKey).
func (e *Engine) longKey(planKey string) string {
	k, err := e.keys.longKey(planKey)
	if err != nil {
		return e.Key(planKey)
	}
	return k
}

// recordedKey is a sent key as the history shows it (redacted when it is
// the user's own).
func (e *Engine) recordedKey(key string) string { return e.keys.recorded(key) }

// Run executes p, writing run (its Start is set here) and every event to the
// writer. It returns when the plan ends, ctx is cancelled (Summary marked
// interrupted, no error), or a fatal error occurs. The history always gets
// its end record and sink counts.
func (e *Engine) Run(ctx context.Context, p *Plan, run history.Run) (Summary, error) {
	p, tierNotes := e.expandTiers(p)
	run.Notes = append(run.Notes, tierNotes...)
	if err := e.prepareRun(p); err != nil {
		return Summary{}, err
	}
	e.recordDate = p.StepsClock()
	if d := e.settle(p); d > 0 {
		// The user's own keys may have been used by an earlier run: the
		// checks assume every key starts with a whole quota, so give them
		// time to refill first.
		if d > e.o.MaxDuration {
			return Summary{}, &PrepareError{fmt.Errorf("the plan's real keys need %s to refill before the run, beyond MaxDuration %s", d, e.o.MaxDuration)}
		}
		run.Notes = append(run.Notes, fmt.Sprintf("waited %s before the first request so the reused keys (KeysFile, KeepKeys) start with a whole quota", d.Round(time.Millisecond)))
		e.o.Sleep(ctx, d)
	}
	// After the refill wait: the start instant is the shards' common one.
	if err := e.waitForStart(ctx); err != nil {
		return Summary{}, err
	}
	e.start = e.o.Now()
	run.Start = e.start
	run.Plan = p.Name
	if e.o.Shards > 1 {
		run.Shard = fmt.Sprintf("%d/%d", e.o.Shard+1, e.o.Shards)
	}
	run.Seed = e.o.Seed
	if run.ID == "" {
		run.ID = e.o.RunID
	}
	if err := e.o.Writer.WriteRun(run); err != nil {
		return Summary{}, err
	}
	sum := Summary{RunID: e.o.RunID, Start: e.start}
	limitCtx, cancel := context.WithTimeout(ctx, e.o.MaxDuration)
	defer cancel()
	runCtx, stopWrite := context.WithCancelCause(limitCtx)
	defer stopWrite(nil)
	e.stopWrite = stopWrite

	// Flush and report progress regularly so an interrupted run loses nothing
	// that finished more than a moment ago.
	tick := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	e.sample()
	go func() {
		defer wg.Done()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for n := 1; ; n++ {
			select {
			case <-tick:
				return
			case <-t.C:
				if n%SampleEvery == 0 {
					e.sample()
				}
				e.wrote(e.o.Writer.Flush())
				e.progress()
			}
		}
	}()

	var runErr error
	if e.o.Sink != nil {
		// The first reading is the baseline: what the downstream counted
		// before this run is not this run's.
		rs, err := e.o.Sink.Read(runCtx, e.start)
		if err != nil {
			runErr = fmt.Errorf("read the downstream before the run: %w", err)
		} else {
			e.downBase = map[string]int64{}
			for _, s := range rs {
				e.downBase[s.Key] = s.Arrivals
			}
		}
	}
	for i := range p.Phases {
		if runErr != nil || e.stopReason.Load().(string) != "" {
			break
		}
		ph := &p.Phases[i]
		if runCtx.Err() != nil {
			break
		}
		e.beginPhase(i, len(p.Phases), ph)
		rec, err := e.runPhase(runCtx, ph)
		if rec != nil {
			rec.Name, rec.Kind = ph.Name, ph.Kind
			sum.Phases = append(sum.Phases, *rec)
			if werr := e.o.Writer.WritePhase(*rec); werr != nil && runErr == nil {
				runErr = werr
			}
		}
		if err != nil {
			runErr = fmt.Errorf("phase %s (%s): %w", ph.Name, ph.Kind, err)
			break
		}
		if e.o.Sink != nil && ph.Kind != KindFault {
			if err := e.readDownstream(runCtx, ph.Name); err != nil {
				runErr = err
				break
			}
		}
		e.progressEnd(runCtx.Err() != nil)
	}
	close(tick)
	wg.Wait()
	e.sample()
	e.client.CloseIdleConnections()

	sum.Elapsed = time.Duration(e.off())
	sum.Requests = e.sent.Load()
	switch {
	case ctx.Err() != nil:
		sum.Interrupted, sum.Reason = true, history.ReasonSignal+context.Cause(ctx).Error()
	case e.writeErr.Load() != nil:
		werr := *e.writeErr.Load()
		sum.Interrupted, sum.Reason = true, "stopped: the history cannot be written: "+werr.Error()
		// Later failures to record (the phase, the end) are this one.
		runErr = fmt.Errorf("the history cannot be written, so the run stopped after %d requests: %w", e.sent.Load(), werr)
	case limitCtx.Err() != nil:
		sum.Interrupted, sum.Reason = true, fmt.Sprintf(history.ReasonBound+"MaxDuration %s", e.o.MaxDuration)
	case e.stopReason.Load().(string) != "":
		sum.Interrupted, sum.Reason = true, e.stopReason.Load().(string)
	case runErr != nil:
		sum.Interrupted, sum.Reason = true, runErr.Error()
	}
	if e.o.Faults != nil {
		if err := e.clearFaults(); err != nil && runErr == nil {
			// The service may be left in the fault: the user must know.
			runErr = err
		}
		e.faultMu.Lock()
		for _, f := range e.openFaults {
			f.End, f.Cleared = e.off(), e.off()
			_ = e.o.Writer.WriteFault(f)
		}
		e.openFaults = nil
		e.faultMu.Unlock()
	}
	if e.o.Sink != nil && e.downBase != nil {
		if err := e.readDownstream(context.WithoutCancel(ctx), ""); err != nil && runErr == nil {
			runErr = err
		}
	}
	var late, dropped int64
	for _, ph := range sum.Phases {
		late += ph.Late
		dropped += ph.Dropped
	}
	end := history.End{Elapsed: int64(sum.Elapsed), Interrupted: sum.Interrupted, Reason: sum.Reason,
		Requests: sum.Requests, Late: late, Dropped: dropped}
	if err := e.o.Writer.WriteEnd(end); err != nil && runErr == nil {
		runErr = err
	}
	if err := e.o.Writer.Flush(); err != nil && runErr == nil {
		runErr = err
	}
	e.progress()
	return sum, runErr
}

// prepareRun compiles every phase's request shape (the plan's, the phase's,
// then Options.Request over them) and gives every logical key of the plan its
// key, so nothing is sent when a shape or the keys file does not fit.
func (e *Engine) prepareRun(p *Plan) error {
	e.shapes = map[string]*shape{}
	for i := range p.Phases {
		ph := &p.Phases[i]
		sh, field, err := p.PhaseRequest(ph).merge(e.o.Request.fromCaller()).compile(p.bodyFiles())
		if err != nil {
			return &PrepareError{fmt.Errorf("phase %s: request %s: %w", ph.Name, field, err)}
		}
		e.shapes[ph.Name] = sh
	}
	for _, k := range PlanKeys(p) {
		if _, err := e.keys.key(k); err != nil {
			return &PrepareError{err}
		}
	}
	return nil
}

// settle is how long the plan's keys need to refill completely when they
// are the user's own (they may have been used before this run); 0 for
// generated keys, which are new.
func (e *Engine) settle(p *Plan) time.Duration {
	if !e.keys.secret() {
		return 0
	}
	var w time.Duration
	for _, k := range PlanKeys(p) {
		if t, ok := e.tierOf(e.Key(k)); ok {
			for _, l := range t.Limits {
				w = max(w, l.W())
			}
		}
	}
	if w == 0 {
		return 0
	}
	return w + 50*time.Millisecond
}

// PrepareError is a plan that cannot be run as given (its request shape or
// keys): nothing was sent and nothing written.
type PrepareError struct{ Err error }

func (e *PrepareError) Error() string { return e.Err.Error() }
func (e *PrepareError) Unwrap() error { return e.Err }

// readDownstream records what reached the downstream since the baseline,
// for this run's keys and in aggregate ("*"), after phase (empty: at the
// end of the run).
func (e *Engine) readDownstream(ctx context.Context, phase string) error {
	rs, err := e.o.Sink.Read(ctx, e.start)
	if err != nil {
		when := "after phase " + phase
		if phase == "" {
			when = "at the end of the run"
		}
		return fmt.Errorf("read the downstream %s: %w", when, err)
	}
	at := e.off()
	for _, s := range rs {
		if s.Key != "*" && !e.ownKey(s.Key) {
			continue
		}
		s.Arrivals -= e.downBase[s.Key]
		if s.Key != "*" {
			s.Key = e.recordedKey(s.Key)
		}
		s.Phase, s.At = phase, at
		if err := e.o.Writer.WriteSink(s); err != nil {
			return err
		}
	}
	return nil
}

func (e *Engine) ownKey(k string) bool {
	_, ok := e.keysUsed.Load(k)
	return ok
}

// share returns this shard's part of n.
func (e *Engine) share(n int) int {
	s := n / e.o.Shards
	if e.o.Shard < n%e.o.Shards {
		s++
	}
	return s
}

// req is one request to send.
type req struct {
	// key is the key sent for the phase's logical key; the event records
	// it (redacted when secret) whatever a variant sent instead.
	key string
	// tenant is the plan's logical key ({tenant}).
	tenant string
	// send, when set, replaces key as the identity values sent (bypass
	// variants: another spelling, or two values for a repeated identity).
	send    []string
	variant string
	inst    int
	phase   string
	// shape is the phase's request shape (nil: the engine's default).
	shape *shape
	// path replaces the shape's path (relative to the target's base path,
	// or the whole request-target when absPath); query adds parameters.
	path    string
	absPath bool
	query   []string
	xff     string
	// cost is what the request asks for (zero: unweighted, no cost sent).
	cost     history.Cost
	intended int64
	// id is the event id ({i}), set by newEvent.
	id uint64
}

// identity is what r sends as its identity.
func (r *req) identity() []string {
	if r.send != nil {
		return r.send
	}
	return []string{r.key}
}

// sendKey is the identity r sends ({key}): the variant's spelling when it
// sends one value, else the key.
func (r *req) sendKey() string {
	if len(r.send) == 1 {
		return r.send[0]
	}
	return r.key
}

// newReq prepares a request of phase ph for the logical key tenant.
func (e *Engine) newReq(ph *Phase, tenant string, inst int) *req {
	return &req{key: e.Key(tenant), tenant: tenant, inst: inst, phase: ph.Name, shape: e.shapes[ph.Name]}
}

// newID returns the next event id, unique across shards of one plan.
func (e *Engine) newID() uint64 {
	c := e.seq.Add(1) - 1
	return c*uint64(e.o.Shards) + uint64(e.o.Shard) + 1
}

// reserve takes n sends from the request budget; false when exhausted.
func (e *Engine) reserve(n int64) bool {
	if e.sent.Add(n) > e.o.MaxRequests {
		e.sent.Add(-n)
		e.stopReason.CompareAndSwap("", fmt.Sprintf(history.ReasonBound+"MaxRequests %d", e.o.MaxRequests))
		return false
	}
	return true
}

// pickInstance chooses the instance of the i-th request of a phase.
func (e *Engine) pickInstance(ph *Phase, i int) int {
	n := len(e.o.Instances)
	switch ph.Instances {
	case "pinned":
		return ph.Instance % n
	case "random":
		e.rngMu.Lock()
		defer e.rngMu.Unlock()
		return e.rng.IntN(n)
	}
	_ = i
	return int(e.rrNext.Add(1)-1) % n
}

// prepare creates r's event (assigning its id) and renders the request.
func (e *Engine) prepare(r *req) (*history.Event, wireReq) {
	if c := e.costs.of(r.phase, r.key); c != nil && !r.cost.Weighted() {
		r.cost = c.take()
	}
	ev := e.newEvent(r)
	w := e.wire(r)
	if p := e.pathOf(r); p != e.plain[r.inst] {
		ev.Path = e.recordedPath(r, p)
	}
	return ev, w
}

// recordedPath is path as the history shows it: a secret key in it is
// redacted.
func (e *Engine) recordedPath(r *req, path string) string {
	if e.keys.secret() && r.key != "" {
		return strings.ReplaceAll(path, r.key, e.recordedKey(r.key))
	}
	return path
}

// pathOf is r's request-target without its identity parameters.
func (e *Engine) pathOf(r *req) string {
	sh := r.shape
	if sh == nil {
		sh = e.defShape
	}
	if r.absPath {
		return absTarget(r.path, r.query)
	}
	path := r.path
	if path == "" {
		v := vars{key: r.sendKey(), tenant: r.tenant, tier: e.keys.tier(r.key), run: e.o.RunID, i: r.id}
		path = sh.path.render(&v)
	}
	return e.bases[r.inst].requestTarget(path, e.defPath, r.query)
}

// build makes the net/http request for r.
func (e *Engine) build(ctx context.Context, r *req) (*history.Event, *http.Request, error) {
	ev, w := e.prepare(r)
	hr, err := w.http(ctx, e.bases[r.inst])
	return ev, hr, err
}

// record fills e from the response and writes it.
func (e *Engine) record(ev *history.Event, resp *http.Response, err error) {
	if err != nil {
		ev.Status = 0
		ev.Err = err.Error()
	} else {
		ev.Status = resp.StatusCode
		ev.Fields = headers.FromHTTP(resp.Header)
		if e.recordDate {
			// Only a well-formed date is kept, in its canonical form.
			if t, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
				ev.Date = t.UTC().Format(http.TimeFormat)
			}
		}
	}
	switch e.classify(ev) {
	case policy.ClassAdmitted:
		e.adm.Add(1)
	case policy.ClassRejected:
		e.rej.Add(1)
		if ra, ok := retryAdvice(ev.RetryAfter, e.wall(ev.Recv)); ok {
			e.noteRejection(ev.Key, rejection{recv: ev.Recv, retryAfter: ra})
		}
	default:
		e.errs.Add(1)
		if resp != nil && unexpected(resp) && e.samples.Add(1) <= maxBodySamples {
			ev.Body = bodySample(resp)
			if e.keys.secret() && ev.Key != "" {
				ev.Body = strings.ReplaceAll(ev.Body, ev.Key, e.recordedKey(ev.Key))
			}
		}
	}
	if e.keys.secret() {
		// The one place a run's events are recorded: a secret key is
		// redacted, and scrubbed from every other value too, as a target
		// may echo it (X-RateLimit-Limit: KEY, an error naming the URL).
		cp := *ev
		cp.Key = e.recordedKey(ev.Key)
		e.keys.scrub.Event(&cp)
		e.wrote(e.o.Writer.WriteEvent(&cp))
		return
	}
	e.wrote(e.o.Writer.WriteEvent(ev))
}

// wrote stops the run at the history writer's first error.
func (e *Engine) wrote(err error) {
	if err == nil || e.writeErr.Load() != nil {
		return
	}
	if e.writeErr.CompareAndSwap(nil, &err) && e.stopWrite != nil {
		e.stopWrite(err)
	}
}

// classify reads ev under the declared response contract.
func (e *Engine) classify(ev *history.Event) policy.Class {
	return e.o.Policy.Statuses.Classify(ev.Status, ev.RetryAfter != "")
}

// noteRejection remembers rj as the last rejection of key unless one
// received later is already known (responses of a burst complete in any
// order).
func (e *Engine) noteRejection(key string, rj rejection) {
	for {
		old, loaded := e.lastRejection.LoadOrStore(key, rj)
		if !loaded {
			return
		}
		if prev := old.(rejection); prev.recv >= rj.recv || e.lastRejection.CompareAndSwap(key, prev, rj) {
			return
		}
	}
}

// wall converts an offset to wall-clock time.
func (e *Engine) wall(off int64) time.Time { return e.start.Add(time.Duration(off)) }

// retryAdvice is the wait a Retry-After value advises, as a client honours
// it (headers.ParseRetryAfter relative to now, the receive time): a date in
// the past, which the retry-after check counts invalid, means at once.
func retryAdvice(v string, now time.Time) (time.Duration, bool) {
	d, err := headers.ParseRetryAfter(v, now)
	return d, err == nil || errors.Is(err, headers.ErrDateInPast)
}

// do sends r now, records it and returns the recorded event.
func (e *Engine) do(ctx context.Context, r *req) *history.Event {
	ev, hr, err := e.build(ctx, r)
	if err != nil {
		ev.Sent, ev.Recv = e.off(), e.off()
		e.record(ev, nil, err)
		return ev
	}
	ev.Sent = e.off()
	resp, err := e.client.Do(hr)
	if err == nil {
		if err = checkHeaderCount(resp, e.maxHeaders()); err == nil {
			_, err = drainKeep(resp, 1<<20)
		} else {
			resp.Body.Close()
		}
	}
	if err != nil && ctx.Err() != nil {
		err = errCancelled
	}
	ev.Recv = e.off()
	e.record(ev, resp, err)
	return ev
}

// spinWindow is how long before an aimed instant sleepUntil stops sleeping
// and starts polling the clock: timers wake up late by tens to hundreds of
// microseconds, polling does not.
const spinWindow = 2 * time.Millisecond

// sleepUntil returns at offset at (or when ctx ends): it sleeps through all
// but the last spinWindow, then polls the clock. The poll is bounded in real
// time, so an injected clock that does not move cannot hang it.
func (e *Engine) sleepUntil(ctx context.Context, at int64) {
	if d := time.Duration(at-e.off()) - spinWindow; d > 0 {
		e.o.Sleep(ctx, d)
	}
	if e.off() >= at {
		return
	}
	limit := time.Now().Add(spinWindow + time.Millisecond)
	for e.off() < at && ctx.Err() == nil && time.Now().Before(limit) {
		runtime.Gosched()
	}
}

func (e *Engine) newEvent(r *req) *history.Event {
	e.keysUsed.Store(r.key, struct{}{})
	ev := &history.Event{
		ID: e.newID(), Key: r.key, Instance: r.inst, Phase: r.phase, Intended: r.intended,
		Tier: e.keys.tier(r.key),
	}
	r.id = ev.ID
	if r.variant != "" {
		ev.Variant = r.variant
	}
	ev.Cost = r.cost
	return ev
}

// tierOf is the tier of a sent key.
func (e *Engine) tierOf(key string) (*policy.Tier, bool) {
	if name := e.keys.tier(key); name != "" {
		return e.o.Policy.Tier(name)
	}
	return nil, false
}

// limitFor returns the first limit of key's tier.
func (e *Engine) limitFor(key string) (policy.Limit, error) {
	t, ok := e.tierOf(key)
	if !ok {
		return policy.Limit{}, fmt.Errorf("key %q matches no tier of policy %s and there is no default tier", key, e.o.Policy.Name)
	}
	return t.Limits[0], nil
}

// percentile of sorted xs (nearest rank).
func percentile(xs []int64, p float64) int64 {
	if len(xs) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(xs)))) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(xs) {
		i = len(xs) - 1
	}
	return xs[i]
}

func sortedCopy(xs []int64) []int64 {
	s := append([]int64(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s
}

// clearFaults ends any fault left injected at the end of a run (an
// interrupted run, a phase that failed), and says which could not be
// cleared (it was silent: a failing clear command left the service in the
// fault unnoticed).
func (e *Engine) clearFaults() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e.faultMu.Lock()
	open := maps.Clone(e.openFaults)
	e.faultMu.Unlock()
	var errs []error
	for _, k := range faults.Kinds {
		if !e.o.Faults.Supports(k) {
			continue
		}
		if err := e.o.Faults.Clear(ctx, k); err != nil {
			if _, injected := open[k]; injected {
				errs = append(errs, fmt.Errorf("clear %s at the end of the run: %w", k, err))
			}
		}
	}
	return errors.Join(errs...)
}

func sqrtF(x float64) float64 { return math.Sqrt(x) }

// SampleEvery is how many 250 ms ticks pass between resource samples (5 s).
const SampleEvery = 20

// sample records the harness's heap and goroutines, so long runs show that
// streaming the history keeps them flat.
func (e *Engine) sample() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	_ = e.o.Writer.WriteSample(history.Sample{At: e.off(), HeapBytes: ms.HeapAlloc, Goroutines: runtime.NumGoroutine(), Requests: e.sent.Load()})
}
