package limiters

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlverify/rlverify/policy"
)

// Redis is a limiter whose state lives in Redis: one Lua script per
// algorithm does refill + check + consume for every limit of a key
// atomically, sets the keys' TTL, and by default takes the time from Redis
// TIME, never from the instance. All sub-keys of one key share a hash tag, so
// it runs unchanged on Redis Cluster. Build it with NewRedis; safe for
// concurrent use. Redis does not own the client: closing it is the caller's
// job.
//
// Time resolution is 1 µs. With a caller-supplied clock (CallerTime, Clock)
// the TTLs still elapse in Redis' own time: keep simulated runs shorter than
// the shortest window, or the state may expire under them.
type Redis struct {
	alg    policy.Algorithm
	client redis.Scripter
	script *redis.Script
	static atomic.Pointer[[]any] // per-limit script arguments; Reload swaps them whole
	suffix []string              // ":0", ":1", … per limit
	caller bool
	clock  func() time.Time
}

// RedisOption configures NewRedis.
type RedisOption func(*Redis)

// CallerTime makes the store decide at the now given to Allow instead of
// Redis TIME: for simulated-time tests. Never for production: instances'
// clocks disagree.
func CallerTime() RedisOption { return func(r *Redis) { r.caller, r.clock = true, nil } }

// Clock makes the store decide at now() (an instance clock) instead of Redis
// TIME. The faulty instance-clock variant uses it.
func Clock(now func() time.Time) RedisOption {
	return func(r *Redis) { r.caller, r.clock = false, now }
}

// NewRedis builds the Redis limiter of family alg over limits. client may be
// a *redis.Client, *redis.ClusterClient, *redis.Ring or any
// redis.UniversalClient.
func NewRedis(alg policy.Algorithm, client redis.Scripter, limits []policy.Limit, opts ...RedisOption) (*Redis, error) {
	if err := validate(limits); err != nil {
		return nil, err
	}
	if client == nil {
		return nil, errors.New("limiters: NewRedis: nil Redis client")
	}
	r := &Redis{alg: alg, client: client}
	static, err := redisArgs(alg, limits)
	if err != nil {
		return nil, err
	}
	r.static.Store(&static)
	for i := range limits {
		r.suffix = append(r.suffix, ":"+strconv.Itoa(i))
	}
	switch alg {
	case policy.TokenBucket:
		r.script = tokenBucketScript
	case policy.GCRA:
		r.script = gcraScript
	case policy.FixedWindow:
		r.script = fixedWindowScript
	case policy.SlidingLog:
		r.script = slidingLogScript
	case policy.SlidingCounter:
		r.script = slidingCounterScript
	}
	for _, o := range opts {
		o(r)
	}
	return r, nil
}

// redisArgs are the script's per-limit arguments for limits.
func redisArgs(alg policy.Algorithm, limits []policy.Limit) ([]any, error) {
	var static []any
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', 17, 64) }
	for i, l := range limits {
		wus := l.W().Microseconds()
		switch alg {
		case policy.TokenBucket:
			static = append(static, strconv.FormatInt(l.Capacity, 10), f(l.R()))
		case policy.GCRA:
			t := 1e6 / l.R()
			static = append(static, f(t), strconv.FormatInt(int64(math.Round(float64(l.Capacity)*t)), 10), strconv.FormatInt(l.Capacity, 10))
		case policy.FixedWindow, policy.SlidingLog, policy.SlidingCounter:
			if wus < 1 {
				return nil, fmt.Errorf("limiters: limit %d (%s): window %s below 1µs", i, l.Name, l.W())
			}
			static = append(static, strconv.FormatInt(l.Count, 10), strconv.FormatInt(wus, 10))
		default:
			return nil, fmt.Errorf("limiters: NewRedis: unknown algorithm %q", alg)
		}
	}
	return static, nil
}

// Reload implements Reloader: limits (one for each of r's, in its order)
// take the place of its own from the next call on. Every key keeps its
// state in Redis; the scripts cap a level above a lowered capacity when
// they next decide.
func (r *Redis) Reload(limits []policy.Limit) error {
	if err := validate(limits); err != nil {
		return err
	}
	if len(limits) != len(r.suffix) {
		return fmt.Errorf("limiters: reload of a redis %s limiter with %d limit(s) for its %d", r.alg, len(limits), len(r.suffix))
	}
	static, err := redisArgs(r.alg, limits)
	if err != nil {
		return err
	}
	r.static.Store(&static)
	return nil
}

// ScriptHash returns the SHA1 of r's Lua script, as EVALSHA takes it (for
// benchmarks that run the script from other clients).
func (r *Redis) ScriptHash() string { return r.script.Hash() }

// Keys returns the Redis keys that hold key's state, one per limit: key
// itself when it carries a hash tag ("rl:{free:k1}:api:v1" →
// "rl:{free:k1}:api:v1:0"), else key wrapped in one ("{k1}:0").
func (r *Redis) Keys(key string) []string {
	base := key
	if i := strings.IndexByte(key, '{'); i < 0 || strings.IndexByte(key[i+1:], '}') <= 0 {
		base = "{" + key + "}"
	}
	keys := make([]string, len(r.suffix))
	for i, s := range r.suffix {
		keys[i] = base + s
	}
	return keys
}

// Allow implements Limiter. now is used only with CallerTime. Errors caused
// by the store being unreachable, slow or not serving wrap ErrStore; a reply
// the script should never give is a plain error naming the script.
func (r *Redis) Allow(ctx context.Context, now time.Time, key string, n int) (Decision, error) {
	var at any = ""
	switch {
	case r.caller:
		at = now.UnixMicro()
	case r.clock != nil:
		at = r.clock().UnixMicro()
	}
	static := *r.static.Load()
	args := make([]any, 0, 2+len(static))
	args = append(args, at, n)
	args = append(args, static...)
	v, err := r.script.Run(ctx, r.client, r.Keys(key), args...).Result()
	if err != nil {
		if IsStoreError(err) {
			return Decision{}, fmt.Errorf("limiters: redis %s script for %q: %w: %w", r.alg, key, ErrStore, err)
		}
		return Decision{}, fmt.Errorf("limiters: redis %s script for %q failed: %w", r.alg, key, err)
	}
	return parseReply(r.alg, v)
}

// parseReply checks the five integers every script returns.
func parseReply(alg policy.Algorithm, v any) (Decision, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 5 {
		return Decision{}, fmt.Errorf("limiters: redis %s script: reply %T %v, want 5 integers", alg, v, v)
	}
	var x [5]int64
	for i, e := range arr {
		n, ok := e.(int64)
		if !ok {
			return Decision{}, fmt.Errorf("limiters: redis %s script: reply element %d is %T %v, want an integer", alg, i, e, e)
		}
		x[i] = n
	}
	if x[0] != 0 && x[0] != 1 || x[1] <= 0 || x[2] < 0 || x[3] < 0 || x[4] < 0 {
		return Decision{}, fmt.Errorf("limiters: redis %s script: reply %v out of range", alg, x)
	}
	return Decision{
		Allowed:    x[0] == 1,
		Limit:      x[1],
		Remaining:  x[2],
		RetryAfter: time.Duration(x[3]) * time.Microsecond,
		ResetAfter: time.Duration(x[4]) * time.Microsecond,
	}, nil
}

// unavailable are the Redis error prefixes that mean "not serving now", as
// opposed to a broken script or a bad command.
var unavailable = []string{"LOADING", "BUSY", "CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN", "READONLY", "NOREPLICAS", "MOVED", "ASK", "OOM"}

// IsStoreError reports whether err from a Redis call means the store is
// unavailable or slow (network, timeout, pool exhausted, closed client,
// context expired, or a server that is loading, busy or failing over).
func IsStoreError(err error) bool {
	if err == nil {
		return false
	}
	var re redis.Error
	if errors.As(err, &re) {
		msg := re.Error()
		for _, p := range unavailable {
			if strings.HasPrefix(msg, p) {
				return true
			}
		}
		return false
	}
	return true
}

// DefaultRedisTimeout is the per-operation timeout NewRedisClient uses when
// given 0.
const DefaultRedisTimeout = policy.DefaultStoreTimeout

// RedisOptions are the limiter store's client settings for addr: every
// timeout (dial, read, write, pool) set to timeout, context deadlines
// honoured, no command retries (MaxRetries -1 is go-redis' "none") and a
// single dial attempt, so a dead store surfaces within the timeout instead
// of after go-redis' own retries; and a bounded pool kept warm, so a burst
// queues for a connection (microseconds each) instead of dialling hundreds
// at once, which would blow a tight store timeout. go-redis stops dialling
// for a second after PoolSize consecutive dial errors, so the pool is not
// tiny either.
func RedisOptions(addr string, timeout time.Duration) *redis.Options {
	if timeout <= 0 {
		timeout = DefaultRedisTimeout
	}
	return &redis.Options{
		Addr:                  addr,
		DialTimeout:           timeout,
		ReadTimeout:           timeout,
		WriteTimeout:          timeout,
		PoolTimeout:           timeout,
		MaxRetries:            -1,
		DialerRetries:         1,
		DialerRetryTimeout:    time.Millisecond,
		ContextTimeoutEnabled: true,
		PoolSize:              redisPoolSize,
		MinIdleConns:          redisMinIdle,
	}
}

// NewRedisClient returns a client for the limiter store at addr with
// RedisOptions.
func NewRedisClient(addr string, timeout time.Duration) *redis.Client {
	return redis.NewClient(RedisOptions(addr, timeout))
}

// WarmPool opens up to n connections of client's pool now (n concurrent
// PINGs, bounded by ctx; failures are ignored: the store may not be up
// yet). With MinIdleConns 0 this gives a warm pool without go-redis
// refilling it in the background: when a real store dies, those refills
// fail by the dozen, and after PoolSize failed dials go-redis lets only one
// probe dial a second through, which held enforcement back for up to
// ~1.5 s after the store returned.
func WarmPool(ctx context.Context, client redis.Cmdable, n int) {
	done := make(chan struct{}, n)
	for i := 0; i < n; i++ {
		go func() {
			_ = client.Ping(ctx).Err()
			done <- struct{}{}
		}()
	}
	for i := 0; i < n; i++ {
		<-done
	}
}

// redisMinIdle connections are opened ahead of demand, so the first burst
// does not wait for dials.
const redisMinIdle = 32

// redisPoolSize bounds connections per client; see RedisOptions.
const redisPoolSize = 64

// RedisClusterOptions are RedisOptions for a Redis Cluster reached through
// any of addrs. Redirects (MOVED/ASK) are still followed.
func RedisClusterOptions(addrs []string, timeout time.Duration) *redis.ClusterOptions {
	o := RedisOptions("", timeout)
	return &redis.ClusterOptions{
		Addrs:                 addrs,
		DialTimeout:           o.DialTimeout,
		ReadTimeout:           o.ReadTimeout,
		WriteTimeout:          o.WriteTimeout,
		PoolTimeout:           o.PoolTimeout,
		MaxRetries:            o.MaxRetries,
		DialerRetries:         o.DialerRetries,
		DialerRetryTimeout:    o.DialerRetryTimeout,
		ContextTimeoutEnabled: o.ContextTimeoutEnabled,
		PoolSize:              o.PoolSize,
		MinIdleConns:          o.MinIdleConns,
	}
}

// NewRedisClusterClient is NewRedisClient for a Redis Cluster.
func NewRedisClusterClient(addrs []string, timeout time.Duration) *redis.ClusterClient {
	return redis.NewClusterClient(RedisClusterOptions(addrs, timeout))
}
