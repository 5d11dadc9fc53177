// Package thirdparty adapts other projects' rate limiters to
// limiters.Limiter so rlverify can check and compare them with the same
// attacks: golang.org/x/time/rate (in memory),
// github.com/go-redis/redis_rate/v10 (GCRA on Redis),
// github.com/ulule/limiter/v3 and github.com/throttled/throttled/v2 (in
// memory). Each adapter documents how the policy's (K, r) or (N, W) maps onto
// the library's parameters. Each enforces a single limit per key.
//
// thirdparty imports limiters and policy only (plus the libraries adapted).
package thirdparty

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"sync"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/rlverify/rlverify/limiters"
	"github.com/rlverify/rlverify/policy"
)

func one(lib string, limits []policy.Limit) (policy.Limit, error) {
	if len(limits) != 1 {
		return policy.Limit{}, fmt.Errorf("thirdparty: %s enforces one limit per key, got %d", lib, len(limits))
	}
	l := limits[0]
	if l.Capacity <= 0 || l.Rate <= 0 {
		return policy.Limit{}, fmt.Errorf("thirdparty: %s: limit %s is not normalized", lib, l.Name)
	}
	return l, nil
}

const shards = 64

var seed = maphash.MakeSeed()

// XTimeRate keeps one golang.org/x/time/rate.Limiter per key.
//
// Mapping: rate.NewLimiter(rate.Limit(r), K): the library's limit is the
// refill rate r in events per second and its burst is the capacity K; a
// fresh limiter starts full, like ours. Decisions use AllowN(now, n) with the
// given now. Keys are never evicted (the library has no expiry). Safe for
// concurrent use.
type XTimeRate struct {
	r     rate.Limit
	k     int
	lim   policy.Limit
	shard [shards]struct {
		mu sync.Mutex
		m  map[string]*rate.Limiter
	}
}

// NewXTimeRate builds the adapter for a single limit.
func NewXTimeRate(limits []policy.Limit) (*XTimeRate, error) {
	l, err := one("x/time/rate", limits)
	if err != nil {
		return nil, err
	}
	x := &XTimeRate{r: rate.Limit(l.R()), k: int(l.Capacity), lim: l}
	for i := range x.shard {
		x.shard[i].m = map[string]*rate.Limiter{}
	}
	return x, nil
}

func (x *XTimeRate) limiter(key string) *rate.Limiter {
	sh := &x.shard[maphash.String(seed, key)%shards]
	sh.mu.Lock()
	l := sh.m[key]
	if l == nil {
		l = rate.NewLimiter(x.r, x.k)
		sh.m[key] = l
	}
	sh.mu.Unlock()
	return l
}

// Allow implements limiters.Limiter; it never fails.
func (x *XTimeRate) Allow(_ context.Context, now time.Time, key string, n int) (limiters.Decision, error) {
	return x.decide(x.limiter(key), now, n), nil
}

// AllowAt decides at now (Unix ns).
func (x *XTimeRate) AllowAt(now int64, key string, n int) limiters.Decision {
	return x.decide(x.limiter(key), time.Unix(0, now), n)
}

func (x *XTimeRate) decide(l *rate.Limiter, now time.Time, n int) limiters.Decision {
	d := limiters.Decision{Limit: int64(x.k)}
	d.Allowed = l.AllowN(now, n)
	tokens := l.TokensAt(now)
	d.Remaining = max(0, int64(math.Floor(tokens)))
	r := float64(x.r)
	if !d.Allowed {
		need := math.Min(float64(n), float64(x.k))
		d.RetryAfter = time.Duration(math.Ceil((need - tokens) / r * 1e9))
	}
	d.ResetAfter = time.Duration(math.Ceil((float64(x.k) - tokens) / r * 1e9))
	return d
}

// RedisRate is github.com/go-redis/redis_rate/v10, a GCRA in one Lua script
// that takes the time from Redis TIME.
//
// Mapping: redis_rate.Limit{Rate: K, Burst: K, Period: W} with W = K/r. The
// library's emission interval is Period/Rate = 1/r and its burst tolerance
// Burst·Period/Rate = K/r, so it admits what a token bucket (K, r) admits.
// It keys state as "rate:"+key; a key carrying a hash tag works on Cluster.
// The caller's now is ignored (the library has no caller-time mode).
type RedisRate struct {
	lim   *redis_rate.Limiter
	limit redis_rate.Limit
	k     int64
}

// NewRedisRate builds the adapter for a single limit on client.
func NewRedisRate(client redis.UniversalClient, limits []policy.Limit) (*RedisRate, error) {
	l, err := one("redis_rate", limits)
	if err != nil {
		return nil, err
	}
	if client == nil {
		return nil, fmt.Errorf("thirdparty: redis_rate needs a Redis client")
	}
	if l.Capacity > math.MaxInt32 {
		return nil, fmt.Errorf("thirdparty: redis_rate: capacity %d too large", l.Capacity)
	}
	return &RedisRate{
		lim:   redis_rate.NewLimiter(client),
		limit: redis_rate.Limit{Rate: int(l.Capacity), Burst: int(l.Capacity), Period: l.W()},
		k:     l.Capacity,
	}, nil
}

// Allow implements limiters.Limiter.
func (r *RedisRate) Allow(ctx context.Context, _ time.Time, key string, n int) (limiters.Decision, error) {
	res, err := r.lim.AllowN(ctx, key, r.limit, n)
	if err != nil {
		if limiters.IsStoreError(err) {
			return limiters.Decision{}, fmt.Errorf("thirdparty: redis_rate for %q: %w: %w", key, limiters.ErrStore, err)
		}
		return limiters.Decision{}, fmt.Errorf("thirdparty: redis_rate for %q: %w", key, err)
	}
	d := limiters.Decision{Allowed: res.Allowed > 0, Limit: r.k, Remaining: int64(max(0, res.Remaining)), ResetAfter: max(0, res.ResetAfter)}
	if !d.Allowed {
		d.RetryAfter = max(0, res.RetryAfter)
	}
	return d, nil
}
