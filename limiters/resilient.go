package limiters

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rlverify/rlverify/policy"
)

// Observer receives what a Resilient limiter does; the HTTP service
// implements it with metrics. Methods are called synchronously on the
// decision path and must be fast and safe for concurrent use.
type Observer interface {
	// OnDecision reports one decision of tier: outcome is "allowed",
	// "denied" or "error"; fallback is Decision.Fallback ("" when the store
	// decided).
	OnDecision(tier, outcome, fallback string)
	// OnStoreLatency reports the duration of one store call, failed or not.
	OnStoreLatency(d time.Duration)
	// OnStoreError reports a failed store call.
	OnStoreError(err error)
	// OnCircuit reports a breaker transition to CircuitClosed, CircuitOpen
	// or CircuitHalfOpen.
	OnCircuit(state string)
}

// NopObserver ignores everything.
type NopObserver struct{}

func (NopObserver) OnDecision(string, string, string) {}
func (NopObserver) OnStoreLatency(time.Duration)      {}
func (NopObserver) OnStoreError(error)                {}
func (NopObserver) OnCircuit(string)                  {}

// Circuit breaker states.
const (
	CircuitClosed   = "closed"
	CircuitOpen     = "open"
	CircuitHalfOpen = "half-open"
)

// Decision outcomes reported to Observer.OnDecision.
const (
	OutcomeAllowed = "allowed"
	OutcomeDenied  = "denied"
	OutcomeError   = "error"
)

// QueuePoll is how often a queued request checks whether the store is back.
const QueuePoll = 5 * time.Millisecond

// Resilient wraps a store-backed Limiter with a per-call timeout, a circuit
// breaker and the policy's declared failure mode. Errors wrapping ErrStore
// (and timeouts) count as store failures and are answered by the failure
// mode; other errors (a broken script, a bad reply) are returned as they are.
//
// Breaker: after Failure.BreakerFailures consecutive store failures the
// circuit opens for Failure.BreakerCooldown (measured with Now); then one
// probe call is let through (half-open): success closes it, failure opens it
// again. While it is open the store is not called.
//
// Build it with NewResilient; the exported fields may be changed before first
// use only. Safe for concurrent use.
type Resilient struct {
	Store Limiter
	// Local decides in the local failure mode (per-instance, in memory).
	Local   Limiter
	Failure policy.Failure
	// Tier labels the decisions reported to Observer.
	Tier     string
	Observer Observer
	// Now is the breaker's clock (time.Now when nil). Store latency is
	// measured with the real clock.
	Now func() time.Time

	mu       sync.Mutex
	state    string
	fails    int
	openedAt time.Time
	probing  bool
	queue    chan struct{}
}

// NewResilient wraps store. alg and limits build the local fallback limiter
// (at Failure.LocalShare of each limit) when the mode is local. Zero fields
// of f get policy's defaults. obs may be nil.
func NewResilient(store Limiter, alg policy.Algorithm, limits []policy.Limit, f policy.Failure, obs Observer) (*Resilient, error) {
	if store == nil {
		return nil, errors.New("limiters: NewResilient: nil store")
	}
	if f.Mode == "" {
		f.Mode = policy.FailOpen
	}
	if f.StoreTimeout <= 0 {
		f.StoreTimeout = policy.Duration(DefaultRedisTimeout)
	}
	if f.BreakerFailures <= 0 {
		f.BreakerFailures = 5
	}
	if f.BreakerCooldown <= 0 {
		f.BreakerCooldown = policy.Duration(time.Second)
	}
	if obs == nil {
		obs = NopObserver{}
	}
	r := &Resilient{Store: store, Failure: f, Observer: obs, state: CircuitClosed}
	switch f.Mode {
	case policy.FailOpen, policy.FailClosed:
	case policy.FailLocal:
		share := f.LocalShare
		if share <= 0 {
			share = 1
		}
		local, err := New(alg, ScaleLimits(limits, share))
		if err != nil {
			return nil, err
		}
		r.Local = local
	case policy.FailQueue:
		if f.QueueSize <= 0 {
			r.Failure.QueueSize = 100
		}
		if f.QueueWait <= 0 {
			r.Failure.QueueWait = policy.Duration(time.Second)
		}
		r.queue = make(chan struct{}, r.Failure.QueueSize)
	default:
		return nil, fmt.Errorf("limiters: NewResilient: unknown failure mode %q", f.Mode)
	}
	return r, nil
}

func (r *Resilient) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Circuit returns the breaker state.
func (r *Resilient) Circuit() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state
}

// Allow implements Limiter.
func (r *Resilient) Allow(ctx context.Context, now time.Time, key string, n int) (Decision, error) {
	d, err := r.allow(ctx, now, key, n)
	switch {
	case err != nil:
		r.Observer.OnDecision(r.Tier, OutcomeError, "")
	case d.Allowed:
		r.Observer.OnDecision(r.Tier, OutcomeAllowed, d.Fallback)
	default:
		r.Observer.OnDecision(r.Tier, OutcomeDenied, d.Fallback)
	}
	return d, err
}

func (r *Resilient) allow(ctx context.Context, now time.Time, key string, n int) (Decision, error) {
	if !r.acquire() {
		return r.fallback(ctx, now, key, n)
	}
	d, err, stored := r.try(ctx, now, key, n)
	if stored {
		return r.fallback(ctx, now, key, n)
	}
	return d, err
}

// try calls the store once (the breaker already let it through). stored
// reports a store failure, which the caller answers with the failure mode.
func (r *Resilient) try(ctx context.Context, now time.Time, key string, n int) (d Decision, err error, storeFailed bool) {
	cctx, cancel := context.WithTimeout(ctx, r.Failure.StoreTimeout.D())
	start := time.Now()
	d, err = r.Store.Allow(cctx, now, key, n)
	r.Observer.OnStoreLatency(time.Since(start))
	cancel()
	if err == nil {
		r.success()
		return d, nil, false
	}
	r.Observer.OnStoreError(err)
	if errors.Is(err, ErrStore) || errors.Is(err, context.DeadlineExceeded) {
		r.failure()
		return Decision{}, err, true
	}
	r.release()
	return Decision{}, err, false
}

// acquire reports whether the store may be called now.
func (r *Resilient) acquire() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch r.state {
	case CircuitClosed:
		return true
	case CircuitOpen:
		if r.now().Sub(r.openedAt) < r.Failure.BreakerCooldown.D() {
			return false
		}
		r.state = CircuitHalfOpen
		r.Observer.OnCircuit(CircuitHalfOpen)
	}
	if r.probing {
		return false
	}
	r.probing = true
	return true
}

func (r *Resilient) success() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fails, r.probing = 0, false
	if r.state != CircuitClosed {
		r.state = CircuitClosed
		r.Observer.OnCircuit(CircuitClosed)
	}
}

func (r *Resilient) failure() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fails++
	r.probing = false
	if r.state == CircuitHalfOpen || (r.state == CircuitClosed && r.fails >= r.Failure.BreakerFailures) {
		r.state, r.openedAt = CircuitOpen, r.now()
		r.Observer.OnCircuit(CircuitOpen)
	}
}

// release ends a probe that failed for a reason other than the store.
func (r *Resilient) release() {
	r.mu.Lock()
	r.probing = false
	r.mu.Unlock()
}

// retryHint is the advice given when the store cannot decide: the rest of
// the breaker's cooldown when it is open, else the whole cooldown, at least
// 1 s.
func (r *Resilient) retryHint() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.Failure.BreakerCooldown.D()
	if r.state == CircuitOpen {
		d -= r.now().Sub(r.openedAt)
	}
	return max(d, time.Second)
}

func (r *Resilient) fallback(ctx context.Context, now time.Time, key string, n int) (Decision, error) {
	switch r.Failure.Mode {
	case policy.FailOpen:
		return Decision{Allowed: true, Fallback: FallbackOpen}, nil
	case policy.FailLocal:
		d, err := r.Local.Allow(ctx, now, key, n)
		d.Fallback = FallbackLocal
		return d, err
	case policy.FailQueue:
		return r.wait(ctx, now, key, n)
	}
	return Decision{RetryAfter: r.retryHint(), Fallback: FallbackClosed}, nil
}

// wait holds the request in the bounded queue until the store decides it,
// QueueWait passes, or ctx ends. A full queue rejects at once.
func (r *Resilient) wait(ctx context.Context, now time.Time, key string, n int) (Decision, error) {
	deny := Decision{Fallback: FallbackQueue}
	select {
	case r.queue <- struct{}{}:
	default:
		deny.RetryAfter = r.retryHint()
		return deny, nil
	}
	defer func() { <-r.queue }()
	start := time.Now()
	deadline := time.NewTimer(r.Failure.QueueWait.D())
	defer deadline.Stop()
	tick := time.NewTicker(QueuePoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			deny.RetryAfter = r.retryHint()
			return deny, nil
		case <-deadline.C:
			deny.RetryAfter = r.retryHint()
			return deny, nil
		case <-tick.C:
		}
		if !r.acquire() {
			continue
		}
		d, err, failed := r.try(ctx, now.Add(time.Since(start)), key, n)
		if !failed {
			return d, err
		}
	}
}

// Reload implements Reloader: the store's limiter and the local fallback
// (at Failure.LocalShare of each limit) take limits in place. An error
// names the part that cannot change in place.
func (r *Resilient) Reload(limits []policy.Limit) error {
	s, ok := r.Store.(Reloader)
	if !ok {
		return fmt.Errorf("limiters: the store's limiter (%T) cannot change its limits in place", r.Store)
	}
	if err := s.Reload(limits); err != nil {
		return err
	}
	if r.Local == nil {
		return nil
	}
	l, ok := r.Local.(Reloader)
	if !ok {
		return fmt.Errorf("limiters: the local fallback (%T) cannot change its limits in place", r.Local)
	}
	share := r.Failure.LocalShare
	if share <= 0 {
		share = 1
	}
	return l.Reload(ScaleLimits(limits, share))
}
