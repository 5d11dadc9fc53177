package limiters

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlverify/rlverify/policy"
)

// Regional is one region's replica of a global token-bucket quota. Each
// region decides locally and atomically against its own Redis (fast: no
// cross-region call on the request path) and remembers what it admitted;
// a reconciliation loop (in the environment) periodically takes those
// consumptions with Drain and applies them to the other regions' replicas
// with Debit. Until a consumption arrives elsewhere, other regions can admit
// from the same tokens: the global overrun is bounded by what all regions
// admit within one sync interval plus the cross-region latency. That is the
// precision/latency trade-off of "regional quotas plus reconciliation".
//
// Only the token-bucket family replicates this way. Safe for concurrent use.
type Regional struct {
	local   *Redis
	client  redis.Scripter
	limits  []policy.Limit
	mu      sync.Mutex
	pending map[string]int64
}

// NewRegional builds a region's replica over client (the region's Redis).
func NewRegional(client redis.Scripter, limits []policy.Limit, opts ...RedisOption) (*Regional, error) {
	local, err := NewRedis(policy.TokenBucket, client, limits, opts...)
	if err != nil {
		return nil, err
	}
	return &Regional{local: local, client: client, limits: limits, pending: map[string]int64{}}, nil
}

// Allow implements Limiter and records admissions for the next Drain.
func (g *Regional) Allow(ctx context.Context, now time.Time, key string, n int) (Decision, error) {
	d, err := g.local.Allow(ctx, now, key, n)
	if err == nil && d.Allowed {
		g.mu.Lock()
		g.pending[key] += int64(n)
		g.mu.Unlock()
	}
	return d, err
}

// Drain returns what this region admitted per key since the last Drain.
func (g *Regional) Drain() map[string]int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.pending) == 0 {
		return nil
	}
	out := g.pending
	g.pending = map[string]int64{}
	return out
}

// Debit applies n tokens consumed in another region to key's replica here.
// The level may go below zero (down to −K): the debt delays this region's
// next admissions until the global consumption is paid back.
func (g *Regional) Debit(ctx context.Context, key string, n int64) error {
	if n <= 0 {
		return nil
	}
	args := []any{n}
	for _, l := range g.limits {
		args = append(args, strconv.FormatInt(l.Capacity, 10), strconv.FormatFloat(l.R(), 'g', 17, 64))
	}
	v, err := debitScript.Run(ctx, g.client, g.local.Keys(key), args...).Result()
	if err != nil {
		if IsStoreError(err) {
			return fmt.Errorf("limiters: regional debit of %q: %w: %w", key, ErrStore, err)
		}
		return fmt.Errorf("limiters: regional debit script for %q failed: %w", key, err)
	}
	if i, ok := v.(int64); !ok || i != 1 {
		return fmt.Errorf("limiters: regional debit script for %q: reply %T %v, want 1", key, v, v)
	}
	return nil
}

// ErrNotRegional is returned when a limiter cannot be replicated.
var ErrNotRegional = errors.New("limiters: only the token bucket replicates across regions")

// debitScript refills each limit's bucket to Redis TIME and subtracts the
// remote consumption ARGV[1], floored at −K. Per limit: K, r (as the token
// bucket script). Returns 1.
var debitScript = redis.NewScript(luaBucketAt + `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local debt = tonumber(ARGV[1]) * 1000000
for i = 1, #KEYS do
  local k = tonumber(ARGV[2 * i]) * 1000000
  local r = tonumber(ARGV[2 * i + 1])
  local level, last = bucketAt(KEYS[i], now, k, r)
  level = math.max(level - debt, -k)
  redis.call('HSET', KEYS[i], 'l', level, 't', math.max(last, now))
  redis.call('PEXPIRE', KEYS[i], math.ceil((k - level) / r / 1000) + 1)
end
return 1
`)
