package thirdparty

import (
	"context"
	"fmt"
	"time"

	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"
	ulule "github.com/ulule/limiter/v3"
	ulmemory "github.com/ulule/limiter/v3/drivers/store/memory"

	"github.com/rlverify/rlverify/limiters"
	"github.com/rlverify/rlverify/policy"
)

// Ulule adapts github.com/ulule/limiter/v3 with its in-memory store.
//
// Mapping: limiter.Rate{Limit: N, Period: W}. The library counts requests in
// a window of W that starts at a key's first request (not epoch-aligned)
// and counts rejected requests too; a rolling window of W may therefore see
// up to 2N admissions, which is why the catalog checks it as a sliding
// counter with error bound 1 (at most 2N per rolling W). Time comes from the
// library's own clock (time.Now); the given now is ignored. RetryAfter is
// the library's Reset (whole Unix seconds) minus now, as a client of the
// library would compute it. Safe for concurrent use.
type Ulule struct {
	lim *ulule.Limiter
	n   int64
}

// NewUlule builds the adapter for a single limit.
func NewUlule(limits []policy.Limit) (*Ulule, error) {
	l, err := one("ulule/limiter", limits)
	if err != nil {
		return nil, err
	}
	rate := ulule.Rate{Limit: l.Count, Period: l.W()}
	return &Ulule{lim: ulule.New(ulmemory.NewStore(), rate), n: l.Count}, nil
}

// Allow implements limiters.Limiter.
func (u *Ulule) Allow(ctx context.Context, _ time.Time, key string, n int) (limiters.Decision, error) {
	var c ulule.Context
	var err error
	if n == 1 {
		c, err = u.lim.Get(ctx, key)
	} else {
		c, err = u.lim.Increment(ctx, key, int64(n))
	}
	if err != nil {
		return limiters.Decision{}, fmt.Errorf("thirdparty: ulule/limiter for %q: %w", key, err)
	}
	reset := time.Until(time.Unix(c.Reset, 0))
	d := limiters.Decision{Allowed: !c.Reached, Limit: c.Limit, Remaining: c.Remaining, ResetAfter: max(reset, 0)}
	if !d.Allowed {
		d.RetryAfter = max(reset, time.Nanosecond)
	}
	return d, nil
}

// Throttled adapts github.com/throttled/throttled/v2's GCRA limiter with its
// in-memory store.
//
// Mapping: RateQuota{MaxRate: one request per 1/r, MaxBurst: K−1}: the
// library's burst counts requests beyond the first, so a fresh key admits K
// at once, then one every 1/r, as a (K, r) bucket does. The store keeps at
// most MaxKeys keys. Time comes from the library (time.Now). Safe for
// concurrent use.
type Throttled struct {
	rl *throttled.GCRARateLimiterCtx
}

// MaxKeys bounds the throttled adapter's key store.
const MaxKeys = 1 << 16

// NewThrottled builds the adapter for a single limit.
func NewThrottled(limits []policy.Limit) (*Throttled, error) {
	l, err := one("throttled", limits)
	if err != nil {
		return nil, err
	}
	st, err := memstore.NewCtx(MaxKeys)
	if err != nil {
		return nil, fmt.Errorf("thirdparty: throttled store: %w", err)
	}
	per := time.Duration(float64(time.Second) / l.R())
	if per <= 0 {
		return nil, fmt.Errorf("thirdparty: throttled: rate %g/s is too high", l.R())
	}
	rl, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{MaxRate: throttled.PerDuration(1, per), MaxBurst: int(l.Capacity) - 1})
	if err != nil {
		return nil, fmt.Errorf("thirdparty: throttled: %w", err)
	}
	return &Throttled{rl: rl}, nil
}

// Allow implements limiters.Limiter.
func (t *Throttled) Allow(ctx context.Context, _ time.Time, key string, n int) (limiters.Decision, error) {
	limited, r, err := t.rl.RateLimitCtx(ctx, key, n)
	if err != nil {
		return limiters.Decision{}, fmt.Errorf("thirdparty: throttled for %q: %w", key, err)
	}
	d := limiters.Decision{Allowed: !limited, Limit: int64(r.Limit), Remaining: int64(r.Remaining), ResetAfter: max(r.ResetAfter, 0)}
	if limited {
		d.RetryAfter = max(r.RetryAfter, time.Nanosecond)
	}
	return d, nil
}
