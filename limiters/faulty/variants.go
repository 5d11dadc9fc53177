package faulty

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlverify/rlverify/limiters"
	"github.com/rlverify/rlverify/policy"
)

// NewUnweightedFixedWindow returns a plain fixed window (N per epoch-aligned
// W) meant to be presented as a sliding-window log. A burst of N just before
// a boundary and N just after it is admitted: it breaks "≤ N in any rolling
// W" (the boundary double burst). With client != nil the window lives in
// Redis.
func NewUnweightedFixedWindow(client redis.Scripter, limits []policy.Limit) (limiters.Limiter, error) {
	if client != nil {
		return limiters.NewRedis(policy.FixedWindow, client, limits)
	}
	return limiters.NewFixedWindow(limits)
}

// NewLocalOnly returns a correct in-memory limiter of family alg that a run
// believes shares its state in Redis. Each instance counts alone, so N
// instances behind a load balancer admit N× the quota: it breaks "one quota
// across instances".
func NewLocalOnly(alg policy.Algorithm, limits []policy.Limit) (limiters.Limiter, error) {
	return limiters.New(alg, limits)
}

// NewInstanceClock returns a Redis token bucket whose time comes from the
// instance's clock (now, shifted by skew) instead of Redis TIME. Instances
// with different clocks refill the shared bucket by their own reckoning: a
// clock ahead credits tokens that have not accrued yet, so it breaks
// "admitted ≤ K + r·Δt" by r·skew (and a clock behind under-admits).
func NewInstanceClock(client redis.Scripter, limits []policy.Limit, now func() time.Time, skew time.Duration) (limiters.Limiter, error) {
	if now == nil {
		now = time.Now
	}
	return limiters.NewRedis(policy.TokenBucket, client, limits, limiters.Clock(func() time.Time { return now().Add(skew) }))
}

// NoRetryAfter decides correctly but gives no retry advice: every denial has
// RetryAfter 0 and OmitRetryAfter set, so the service sends 429 without a
// Retry-After header. It breaks "every 429 carries a valid Retry-After".
type NoRetryAfter struct{ limiters.Limiter }

// Allow implements limiters.Limiter.
func (l NoRetryAfter) Allow(ctx context.Context, now time.Time, key string, n int) (limiters.Decision, error) {
	d, err := l.Limiter.Allow(ctx, now, key, n)
	if err == nil && !d.Allowed {
		d.RetryAfter, d.OmitRetryAfter = 0, true
	}
	return d, err
}

// ShortRetryAfter decides correctly but advises half the true wait. A client
// that honours Retry-After is denied again: it breaks "a request sent right
// after the advised wait is admitted".
type ShortRetryAfter struct{ limiters.Limiter }

// Allow implements limiters.Limiter.
func (l ShortRetryAfter) Allow(ctx context.Context, now time.Time, key string, n int) (limiters.Decision, error) {
	d, err := l.Limiter.Allow(ctx, now, key, n)
	if err == nil && !d.Allowed {
		d.RetryAfter /= 2
	}
	return d, err
}

// RemainingOffByOne reports one more remaining than there is: correct
// decisions, a wrong count in the headers (token-bounds, headers).
type RemainingOffByOne struct{ limiters.Limiter }

// Allow implements limiters.Limiter.
func (l RemainingOffByOne) Allow(ctx context.Context, now time.Time, key string, n int) (limiters.Decision, error) {
	d, err := l.Limiter.Allow(ctx, now, key, n)
	if err == nil && d.Fallback == "" {
		d.Remaining++
	}
	return d, err
}

// RemainingOneLow reports one less remaining than there is (never below
// 0): correct decisions, a count too low in the headers (token-bounds).
type RemainingOneLow struct{ limiters.Limiter }

// Allow implements limiters.Limiter.
func (l RemainingOneLow) Allow(ctx context.Context, now time.Time, key string, n int) (limiters.Decision, error) {
	d, err := l.Limiter.Allow(ctx, now, key, n)
	if err == nil && d.Fallback == "" && d.Remaining > 0 {
		d.Remaining--
	}
	return d, err
}

// AbsurdRetryAfter decides correctly but advises a wait of 10^9 seconds
// (31 years) on every refusal: no declared policy can require it
// (retry-after).
type AbsurdRetryAfter struct{ limiters.Limiter }

// Allow implements limiters.Limiter.
func (l AbsurdRetryAfter) Allow(ctx context.Context, now time.Time, key string, n int) (limiters.Decision, error) {
	d, err := l.Limiter.Allow(ctx, now, key, n)
	if err == nil && !d.Allowed && d.Fallback == "" {
		d.RetryAfter = 1e9 * time.Second
	}
	return d, err
}

// TenfoldRetryAfter decides correctly but advises ten times the wait (2 s
// where 0.2 s is due at 5/s): within a full refill, so only a refusal whose
// state is known (a burst from a whole quota) proves it (retry-after).
type TenfoldRetryAfter struct{ limiters.Limiter }

// Allow implements limiters.Limiter.
func (l TenfoldRetryAfter) Allow(ctx context.Context, now time.Time, key string, n int) (limiters.Decision, error) {
	d, err := l.Limiter.Allow(ctx, now, key, n)
	if err == nil && !d.Allowed && d.Fallback == "" {
		d.RetryAfter *= 10
	}
	return d, err
}

// AddressOnly keys on the client address alone when the service passes one
// (KEY@ADDRESS, from X-Forwarded-For), as a limiter keyed on a spoofable
// client address does: two tenants, each with its own API key, sending the
// same address share one quota (isolation).
type AddressOnly struct{ limiters.Limiter }

// Allow implements limiters.Limiter.
func (l AddressOnly) Allow(ctx context.Context, now time.Time, key string, n int) (limiters.Decision, error) {
	if i := strings.LastIndexByte(key, '@'); i >= 0 {
		key = "addr:" + key[i+1:]
	}
	return l.Limiter.Allow(ctx, now, key, n)
}

// LongReset reports a reset ten times later than the truth: correct
// decisions and advice, a wrong reset in the headers (headers).
type LongReset struct{ limiters.Limiter }

// Allow implements limiters.Limiter.
func (l LongReset) Allow(ctx context.Context, now time.Time, key string, n int) (limiters.Decision, error) {
	d, err := l.Limiter.Allow(ctx, now, key, n)
	if err == nil {
		d.ResetAfter = 10*d.ResetAfter + 10*time.Second
	}
	return d, err
}

// simpleBucket is the state of the hand-written faulty buckets below.
type simpleBucket struct {
	tokens float64
	last   time.Time
}

type bucketMap struct {
	k, r float64
	mu   sync.Mutex
	m    map[string]*simpleBucket
}

func newBucketMap(limits []policy.Limit) (*bucketMap, error) {
	if len(limits) == 0 {
		return nil, fmt.Errorf("faulty: no limits given")
	}
	return &bucketMap{k: limits[0].K(), r: limits[0].R(), m: map[string]*simpleBucket{}}, nil
}

func (b *bucketMap) get(key string, now time.Time) *simpleBucket {
	s := b.m[key]
	if s == nil {
		s = &simpleBucket{tokens: b.k, last: now}
		b.m[key] = s
	}
	return s
}

func (b *bucketMap) decision(allowed bool, tokens float64, n int) limiters.Decision {
	d := limiters.Decision{Allowed: allowed, Limit: int64(b.k), Remaining: max(0, int64(tokens))}
	if !allowed {
		d.RetryAfter = time.Duration((float64(n) - tokens) / b.r * float64(time.Second))
	}
	d.ResetAfter = time.Duration(max(0, b.k-tokens) / b.r * float64(time.Second))
	return d
}

// UncappedRefill is a token bucket whose refill is not capped at K: an idle
// key accumulates credit without bound and then admits a burst larger than K.
// It breaks "tokens ∈ [0, K]" and "admitted ≤ K + r·Δt" after idle. Only the
// first limit is enforced. Safe for concurrent use.
type UncappedRefill struct{ b *bucketMap }

// NewUncappedRefill builds it.
func NewUncappedRefill(limits []policy.Limit) (*UncappedRefill, error) {
	b, err := newBucketMap(limits)
	return &UncappedRefill{b: b}, err
}

// Allow implements limiters.Limiter, badly.
func (u *UncappedRefill) Allow(_ context.Context, now time.Time, key string, n int) (limiters.Decision, error) {
	u.b.mu.Lock()
	defer u.b.mu.Unlock()
	s := u.b.get(key, now)
	if now.After(s.last) {
		s.tokens += u.b.r * now.Sub(s.last).Seconds() // the defect: no min(K, …)
		s.last = now
	}
	ok := s.tokens >= float64(n)
	if ok {
		s.tokens -= float64(n)
	}
	return u.b.decision(ok, s.tokens, n), nil
}

// DeductOnReject is a token bucket that takes the cost even from a request
// it rejects, driving the level negative. A client that keeps trying (even
// one that honours Retry-After) is locked out well beyond the advised wait:
// it breaks "a 429 only when no token is available" (under-admission) and
// the retry-after promise. Only the first limit is enforced. Safe for
// concurrent use.
type DeductOnReject struct{ b *bucketMap }

// NewDeductOnReject builds it.
func NewDeductOnReject(limits []policy.Limit) (*DeductOnReject, error) {
	b, err := newBucketMap(limits)
	return &DeductOnReject{b: b}, err
}

// Allow implements limiters.Limiter, badly.
func (x *DeductOnReject) Allow(_ context.Context, now time.Time, key string, n int) (limiters.Decision, error) {
	x.b.mu.Lock()
	defer x.b.mu.Unlock()
	s := x.b.get(key, now)
	if now.After(s.last) {
		s.tokens = min(x.b.k, s.tokens+x.b.r*now.Sub(s.last).Seconds())
		s.last = now
	}
	ok := s.tokens >= float64(n)
	before := s.tokens
	s.tokens -= float64(n) // the defect: consumed whether admitted or not
	d := x.b.decision(ok, s.tokens, n)
	if !ok {
		// Advice computed from the level before the deduction: too short.
		d.RetryAfter = time.Duration((float64(n) - before) / x.b.r * float64(time.Second))
	}
	return d, nil
}

// WallClock is an in-memory limiter that decides at the instance's wall
// clock (Now) instead of the monotonic time it is given. When an operator or
// NTP steps the wall clock forward, it credits every token the jump seems
// to have accrued (a drained bucket is full at once: it breaks "admitted ≤
// K + r·Δt"); stepped back, its last update lies in the future and it
// refills nothing until the wall clock has caught up (wrongful refusals).
// Safe for concurrent use when the inner limiter is.
type WallClock struct {
	limiters.Limiter
	// Now is the instance's wall clock (time.Now when nil).
	Now func() time.Time
}

// NewWallClock returns the in-memory token bucket for limits deciding at
// now, the instance's wall clock.
func NewWallClock(limits []policy.Limit, now func() time.Time) (limiters.Limiter, error) {
	tb, err := limiters.New(policy.TokenBucket, limits)
	if err != nil {
		return nil, err
	}
	return WallClock{Limiter: tb, Now: now}, nil
}

// Allow implements limiters.Limiter: the given now is ignored.
func (l WallClock) Allow(ctx context.Context, _ time.Time, key string, n int) (limiters.Decision, error) {
	now := time.Now()
	if l.Now != nil {
		now = l.Now()
	}
	return l.Limiter.Allow(ctx, now, key, n)
}

// KeepsOldLimit is an in-memory token bucket that accepts a limit change
// and goes on deciding by its old limits (a configuration reloaded but the
// limiters not rebuilt): after a change that lowers the limit it admits
// what only the old limit allowed.
type KeepsOldLimit struct{ limiters.Limiter }

// NewKeepsOldLimit returns the in-memory token bucket for limits, deaf to
// limit changes.
func NewKeepsOldLimit(limits []policy.Limit) (limiters.Limiter, error) {
	tb, err := limiters.New(policy.TokenBucket, limits)
	if err != nil {
		return nil, err
	}
	return KeepsOldLimit{tb}, nil
}

// Reload implements limiters.Reloader: it reports success and changes
// nothing.
func (KeepsOldLimit) Reload([]policy.Limit) error { return nil }

// ResetsOnReload is an in-memory token bucket that applies a limit change
// by building a new limiter: every key starts again from a full bucket of
// the new limit, so a key drained just before the change is admitted a
// fresh burst right after it (oversell). Safe for concurrent use.
type ResetsOnReload struct {
	cur atomic.Pointer[limiters.Limiter]
}

// NewResetsOnReload returns the in-memory token bucket for limits that
// forgets every key's state on a limit change.
func NewResetsOnReload(limits []policy.Limit) (*ResetsOnReload, error) {
	tb, err := limiters.New(policy.TokenBucket, limits)
	if err != nil {
		return nil, err
	}
	r := &ResetsOnReload{}
	var l limiters.Limiter = tb
	r.cur.Store(&l)
	return r, nil
}

// Allow implements limiters.Limiter.
func (r *ResetsOnReload) Allow(ctx context.Context, now time.Time, key string, n int) (limiters.Decision, error) {
	return (*r.cur.Load()).Allow(ctx, now, key, n)
}

// Reload implements limiters.Reloader: a new, full limiter.
func (r *ResetsOnReload) Reload(limits []policy.Limit) error {
	tb, err := limiters.New(policy.TokenBucket, limits)
	if err != nil {
		return err
	}
	var l limiters.Limiter = tb
	r.cur.Store(&l)
	return nil
}

// AdvertisesOldLimit is an in-memory token bucket that applies a limit
// change (every key keeps its state) while its service goes on
// advertising the old limit in its rate-limit headers
// (limiters.StaleAdvertiser): it enforces the new limit and tells clients
// the old one.
type AdvertisesOldLimit struct{ *limiters.TokenBucket }

// NewAdvertisesOldLimit returns the in-memory token bucket for limits
// whose service advertises its first limits after every change.
func NewAdvertisesOldLimit(limits []policy.Limit) (AdvertisesOldLimit, error) {
	tb, err := limiters.NewTokenBucket(limits)
	if err != nil {
		return AdvertisesOldLimit{}, err
	}
	return AdvertisesOldLimit{tb}, nil
}

// AdvertisesOldLimits implements limiters.StaleAdvertiser: always.
func (AdvertisesOldLimit) AdvertisesOldLimits() bool { return true }
