package faulty

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlverify/rlverify/limiters"
	"github.com/rlverify/rlverify/policy"
)

// RacyRedisTokenBucket keeps a token bucket in Redis but reads it (GET, with
// Redis TIME in the same round trip) and writes it back (SET) in two separate
// round trips, with no script, transaction or compare-and-swap. Concurrent
// requests, from one instance or several, read the same level and each admits
// itself: it breaks "admitted ≤ K + r·Δt" (oversell). Only the first limit
// is enforced. Safe for concurrent use, in the sense of not crashing.
type RacyRedisTokenBucket struct {
	client redis.Cmdable
	k, r   float64
	gap    time.Duration
}

// NewRacyRedisTokenBucket builds the racy Redis bucket; gap is an extra pause
// between the read and the write (0: only the round trip).
func NewRacyRedisTokenBucket(client redis.Cmdable, limits []policy.Limit, gap time.Duration) (*RacyRedisTokenBucket, error) {
	if client == nil || len(limits) == 0 {
		return nil, fmt.Errorf("faulty: racy redis bucket needs a client and a limit")
	}
	return &RacyRedisTokenBucket{client: client, k: limits[0].K(), r: limits[0].R(), gap: gap}, nil
}

// Allow implements limiters.Limiter, badly.
func (b *RacyRedisTokenBucket) Allow(ctx context.Context, _ time.Time, key string, n int) (limiters.Decision, error) {
	k := key + ":racy"
	var tm *redis.TimeCmd
	var get *redis.StringCmd
	_, err := b.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		tm = p.Time(ctx)
		get = p.Get(ctx, k)
		return nil
	})
	if err != nil && err != redis.Nil {
		return limiters.Decision{}, storeErr(key, err)
	}
	now := tm.Val()
	tokens, last := b.k, now
	if v, err := get.Result(); err == nil {
		a, c, ok := strings.Cut(v, ":")
		t, err1 := strconv.ParseFloat(a, 64)
		us, err2 := strconv.ParseInt(c, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return limiters.Decision{}, fmt.Errorf("faulty: racy redis bucket: bad state %q", v)
		}
		tokens, last = t, time.UnixMicro(us)
	}
	if b.gap > 0 {
		time.Sleep(b.gap)
	}
	tokens = min(b.k, tokens+b.r*max(0, now.Sub(last).Seconds()))
	d := limiters.Decision{Limit: int64(b.k)}
	if tokens >= float64(n) {
		tokens -= float64(n)
		d.Allowed = true
	} else {
		d.RetryAfter = time.Duration(math.Ceil((float64(n) - tokens) / b.r * 1e9))
	}
	d.Remaining = int64(tokens)
	d.ResetAfter = time.Duration((b.k - tokens) / b.r * 1e9)
	val := strconv.FormatFloat(tokens, 'g', -1, 64) + ":" + strconv.FormatInt(now.UnixMicro(), 10)
	if err := b.client.Set(ctx, k, val, d.ResetAfter+time.Second).Err(); err != nil {
		return limiters.Decision{}, storeErr(key, err)
	}
	return d, nil
}

func storeErr(key string, err error) error {
	if limiters.IsStoreError(err) {
		return fmt.Errorf("faulty: redis for %q: %w: %w", key, limiters.ErrStore, err)
	}
	return fmt.Errorf("faulty: redis for %q: %w", key, err)
}
