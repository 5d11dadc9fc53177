// Package limiters holds the reference rate-limiting algorithms and their
// state stores. Every algorithm decides at a time it is given (simulated time
// in tests); the Redis store takes time from Redis itself unless told to use
// the caller's time.
//
// Algorithms: token bucket, GCRA, fixed window (epoch-aligned), sliding-window
// log and sliding-window counter, each in memory (sharded, bounded) and in
// Redis (one Lua script per algorithm, atomic over every limit of a key).
// Resilient wraps a store-backed limiter with a timeout, a circuit breaker and
// the policy's declared failure mode.
//
// limiters imports only policy and the Redis client; it knows nothing of
// HTTP, attacks or checks, and must not import them.
package limiters

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rlverify/rlverify/policy"
)

// Fallback values of Decision.Fallback: which failure-mode path decided.
const (
	FallbackOpen   = policy.FailOpen   // admitted without the store
	FallbackClosed = policy.FailClosed // denied because the store is down: answer 503
	FallbackLocal  = policy.FailLocal  // decided by the per-instance local limiter
	FallbackQueue  = policy.FailQueue  // queued, then denied (queue full or wait expired)
)

// Decision is the answer for one request. The zero value is a denial with no
// advice.
type Decision struct {
	Allowed bool
	// Limit is the K or N of the limit that decided (the tightest one).
	Limit int64
	// Remaining is what is left of that limit after this decision.
	Remaining int64
	// RetryAfter is, for a denied request, how long until the same request
	// would be admitted if nothing else consumed; 0 when allowed. A request
	// whose cost exceeds a limit's capacity can never be admitted; its
	// RetryAfter is then the time to refill that limit completely.
	RetryAfter time.Duration
	// ResetAfter is how long until the limit is back to full (empty window).
	ResetAfter time.Duration
	// OmitRetryAfter asks the HTTP service to send no Retry-After header on
	// this denial (the faulty no-retry-after variant sets it). A service also
	// omits the header when RetryAfter is 0.
	OmitRetryAfter bool
	// Fallback is empty when the store decided. Otherwise it names the
	// failure-mode path that did (FallbackOpen, FallbackClosed, FallbackLocal,
	// FallbackQueue). With FallbackClosed (and a denied FallbackQueue) the
	// HTTP service answers 503 rather than 429. When Fallback is set, Limit
	// and Remaining are not backed by the shared store; services should omit
	// the RateLimit headers except for FallbackLocal.
	Fallback string
}

// Limiter decides requests for keys. Implementations are safe for concurrent
// use. key is the full store key of one tenant+action+version (see
// policy.Policy.LimitKey); a limiter with several limits derives one sub-key
// per limit from it.
type Limiter interface {
	// Allow decides a request of cost n for key at now. Stores that keep
	// their own clock (Redis TIME) ignore now. An error means the store
	// could not decide; the caller applies the failure mode.
	Allow(ctx context.Context, now time.Time, key string, n int) (Decision, error)
}

// Reloader is a Limiter whose limits can change in place (a declared
// limit change, policy.Change): the new limits, one for each of its own in
// their order, apply from the next decision on, and every key keeps its
// state.
type Reloader interface {
	Reload(limits []policy.Limit) error
}

// StaleAdvertiser is a Reloader whose service goes on advertising the
// limits it had before a change (faulty/advertises-old-limit): a service
// writes the changed limits in its headers unless AdvertisesOldLimits.
type StaleAdvertiser interface {
	AdvertisesOldLimits() bool
}

// AtLimiter is a Limiter that decides without a context or an error: the
// in-memory algorithms. AllowAt takes now as Unix nanoseconds and is the
// allocation-free fast path.
type AtLimiter interface {
	Limiter
	AllowAt(now int64, key string, n int) Decision
}

// ErrStore wraps every error caused by the state store being unavailable
// or slow, as opposed to a programming or configuration error.
var ErrStore = errors.New("limiter store unavailable")

// Closer is implemented by limiters that hold resources.
type Closer interface{ Close() error }

// validate checks the limits a constructor is given.
func validate(limits []policy.Limit) error {
	if len(limits) == 0 {
		return errors.New("limiters: no limits given")
	}
	if len(limits) > 8 {
		return fmt.Errorf("limiters: %d limits on one key; at most 8", len(limits))
	}
	for i, l := range limits {
		if l.Capacity <= 0 || l.Rate <= 0 || l.Count <= 0 || l.Window <= 0 {
			return fmt.Errorf("limiters: limit %d (%s) is not normalized: K=%d r=%g N=%d W=%s", i, l.Name, l.Capacity, float64(l.Rate), l.Count, l.Window)
		}
		if l.Count > policy.MaxCount || l.Capacity > policy.MaxCount {
			return fmt.Errorf("limiters: limit %d (%s): K=%d N=%d above %d", i, l.Name, l.Capacity, l.Count, policy.MaxCount)
		}
	}
	return nil
}

// New builds the in-memory limiter of family alg over limits.
func New(alg policy.Algorithm, limits []policy.Limit) (AtLimiter, error) {
	switch alg {
	case policy.TokenBucket:
		return NewTokenBucket(limits)
	case policy.GCRA:
		return NewGCRA(limits)
	case policy.FixedWindow:
		return NewFixedWindow(limits)
	case policy.SlidingLog:
		return NewSlidingLog(limits)
	case policy.SlidingCounter:
		return NewSlidingCounter(limits)
	}
	return nil, fmt.Errorf("limiters: unknown algorithm %q", alg)
}

// ScaleLimits returns limits scaled to share (0 < share ≤ 1) of each quota:
// buckets keep their window K/r with K' = ⌊K·share⌋ (at least 1) and
// r' = K'/W; windows keep W with N' = ⌊N·share⌋ (at least 1). Both views stay
// consistent. The local failure mode enforces these per instance.
func ScaleLimits(limits []policy.Limit, share float64) []policy.Limit {
	out := make([]policy.Limit, len(limits))
	for i, l := range limits {
		if share > 0 && share < 1 {
			n := max(1, int64(float64(l.Count)*share))
			l.Capacity, l.Count = n, n
			l.Rate = policy.Rate(float64(n) / l.W().Seconds())
		}
		out[i] = l
	}
	return out
}

// nanoPerToken: token levels in memory are counted in units of 1e-9 token.
// Integer arithmetic keeps decisions exact at equality (1.0 token is enough
// for one request) where floats would drift.
const nanoPerToken = 1_000_000_000

// refill returns the bucket level after dt at rate r tokens/s, capped at k.
func refill(level, k int64, r float64, dt int64) int64 {
	if dt <= 0 || level >= k {
		return min(level, k)
	}
	// Time to fill completely, in ns; beyond it the bucket is full.
	if float64(dt) >= float64(k-level)/r { // nano-tokens / (tokens/s) = ns
		return k
	}
	add := int64(float64(dt) * r) // ns·tokens/s = nano-tokens
	return min(k, level+add)
}

// waitFor returns how long (ns) a bucket at level needs to reach need at rate r,
// rounded up: advice is never too short.
func waitFor(level, need int64, r float64) int64 {
	if level >= need {
		return 0
	}
	return ceilDiv(float64(need-level), r)
}

// ceilDiv returns ⌈a/b⌉ as an int64.
func ceilDiv(a, b float64) int64 {
	q := a / b
	n := int64(q)
	if float64(n) < q {
		n++
	}
	return n
}
