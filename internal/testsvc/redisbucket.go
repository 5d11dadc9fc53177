package testsvc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The redisbucket service's identity and defaults (policies/redisbucket.yaml).
const (
	TenantHeader             = "X-Tenant-Key"
	DefaultRedisStoreTimeout = 100 * time.Millisecond
	FailClosed               = "closed"
	FailOpen                 = "open"
)

const (
	// closedRetryAfter is the advice of a refusal while failing closed.
	closedRetryAfter = time.Second
	redisKeyPrefix   = "testsvc:gcra:"
)

// DefaultRedisBucket is the bucket policies/redisbucket.yaml declares.
func DefaultRedisBucket() Bucket { return Bucket{Capacity: 6, Rate: 3} }

// RedisBucketConfig configures the redisbucket service.
type RedisBucketConfig struct {
	Common
	// Addr is the Redis server (host:port), for instance a store proxy in
	// front of it. Required.
	Addr string
	// Bucket is every tenant's bucket; DefaultRedisBucket when zero.
	Bucket Bucket
	// StoreTimeout bounds every Redis call (dial, write, read);
	// DefaultRedisStoreTimeout when 0.
	StoreTimeout time.Duration
	// FailMode is what happens while Redis fails or is slower than
	// StoreTimeout: FailClosed (default; 503 with Retry-After) or FailOpen
	// (admit and forward).
	FailMode string
	// Namespace prefixes the Redis keys. Instances on one Redis with one
	// namespace share state; give each its own to keep per-instance state.
	Namespace string
	// MaxStoreCalls, when set, is how many store calls may be in flight at
	// once; one more fails at once, as on a connection pool exhausted with
	// no wait. A concurrent burst then fails part-way with no fault
	// injected (a store failing under load), and the failure mode decides.
	MaxStoreCalls int
}

// RedisBucket is the redisbucket service, an http.Handler in front of any
// path and method: a token bucket per tenant kept in Redis by one Lua
// script (GCRA: the key holds the bucket's theoretical arrival time). The
// key is the header TenantHeader (trimmed by HTTP, case-sensitive; 401 when
// missing). Admitted requests are answered 200, refused ones 429 with
// Retry-After (delay-seconds, rounded up). Every decision carries
// X-RateLimit-Limit (K), -Remaining and -Reset (seconds until the bucket is
// full, rounded up). The time is Redis's (TIME) unless Common.Now is set,
// then the script is given the service's clock. When Redis fails, the
// failure mode decides, with no rate-limit headers. Close releases the
// Redis client.
type RedisBucket struct {
	g         *gate
	client    *redis.Client
	bucket    Bucket
	timeout   time.Duration
	failOpen  bool
	namespace string
	useClock  bool
	// calls holds a slot per store call in flight (nil: no bound).
	calls chan struct{}
	// stopWarm ends the warm-up loop; warmed is closed when it ends.
	stopWarm context.CancelFunc
	warmed   chan struct{}
}

// redisIdleConns is how many connections the pool opens ahead of the
// first burst: one per request of the plans' bursts of a hundred, so none
// dials within its store timeout (go-redis opens MinIdleConns only when
// the pool is created, when Redis may not be reachable yet).
const redisIdleConns = 100

// NewRedisBucket builds a redisbucket instance. It loads its script into
// Redis if it can within the store timeout; Redis being unreachable is not
// an error (requests decide by the failure mode until it is back).
func NewRedisBucket(cfg RedisBucketConfig) (*RedisBucket, error) {
	g, err := newGate("redisbucket", cfg.Common, QuirkFoldCase, QuirkDeductOnReject, QuirkFailOpen)
	if err != nil {
		return nil, err
	}
	if cfg.Addr == "" {
		return nil, errors.New("testsvc: redisbucket needs a Redis address (RedisBucketConfig.Addr, --redis)")
	}
	b := cfg.Bucket
	if b == (Bucket{}) {
		b = DefaultRedisBucket()
	}
	if err := b.validate("redisbucket"); err != nil {
		return nil, err
	}
	timeout := cfg.StoreTimeout
	if timeout == 0 {
		timeout = DefaultRedisStoreTimeout
	}
	if timeout < time.Millisecond || timeout > time.Minute {
		return nil, fmt.Errorf("testsvc: redisbucket: store timeout %s: want 1ms … 1m", timeout)
	}
	mode := cfg.FailMode
	if mode == "" {
		mode = FailClosed
	}
	if mode != FailClosed && mode != FailOpen {
		return nil, fmt.Errorf("testsvc: redisbucket: fail mode %q: want %s or %s", mode, FailClosed, FailOpen)
	}
	client := redis.NewClient(&redis.Options{
		Addr:                  cfg.Addr,
		DialTimeout:           timeout,
		ReadTimeout:           timeout,
		WriteTimeout:          timeout,
		PoolTimeout:           timeout,
		ContextTimeoutEnabled: true,
		// A retry would stretch a decision beyond the store timeout.
		MaxRetries:    -1,
		DialerRetries: 1,
		// Enough connections that a burst of a hundred concurrent requests
		// does not queue for one past the store timeout (the default is
		// 10 per CPU).
		PoolSize:     128,
		MinIdleConns: 16,
	})
	if cfg.MaxStoreCalls < 0 {
		return nil, fmt.Errorf("testsvc: redisbucket: max store calls %d: want 0 (no bound) or more", cfg.MaxStoreCalls)
	}
	var calls chan struct{}
	if cfg.MaxStoreCalls > 0 {
		calls = make(chan struct{}, cfg.MaxStoreCalls)
	}
	s := &RedisBucket{
		g: g, client: client, bucket: b, timeout: timeout,
		failOpen:  mode == FailOpen || cfg.Quirks.FailOpen,
		namespace: cfg.Namespace, useClock: cfg.Now != nil, calls: calls,
		warmed: make(chan struct{}),
	}
	var ctx context.Context
	ctx, s.stopWarm = context.WithCancel(context.Background())
	if s.warmOnce(ctx) == nil {
		// Redis answered: warm now, before the first request.
		close(s.warmed)
		return s, nil
	}
	go s.warm(ctx)
	return s, nil
}

// warm loads the script and opens redisIdleConns connections as soon as
// Redis answers, retrying every 50ms until then, so that the first burst
// does not dial a hundred connections within its store timeout. Redis may
// be unreachable at start (its address a store proxy not started yet, a
// fault test): requests decide by the failure mode until it is back.
func (s *RedisBucket) warm(ctx context.Context) {
	defer close(s.warmed)
	for {
		if s.warmOnce(ctx) == nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *RedisBucket) warmOnce(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := gcraScript.Load(ctx, s.client).Err(); err != nil {
		return err
	}
	// Concurrent pings each hold a connection, so the pool opens that many.
	errs := make(chan error, redisIdleConns)
	for range redisIdleConns {
		go func() { errs <- s.client.Ping(ctx).Err() }()
	}
	var err error
	for range redisIdleConns {
		err = errors.Join(err, <-errs)
	}
	return err
}

// Close stops the warm-up and releases the Redis client.
func (s *RedisBucket) Close() error {
	s.stopWarm()
	<-s.warmed
	return s.client.Close()
}

// ServeHTTP implements http.Handler.
func (s *RedisBucket) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.g.internal(w, r) {
		return
	}
	id, ok := s.g.identify(r, r.Header.Values(TenantHeader), true, false)
	if !ok {
		s.g.reply(w, http.StatusUnauthorized, "text/plain; charset=utf-8", "missing "+TenantHeader+"\n")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
	defer cancel()
	d, err := s.decide(ctx, redisKeyPrefix+s.namespace+id.limiter)
	if err != nil {
		if s.failOpen {
			s.g.settle(w, id, decision{allowed: true}, answer{http.StatusOK, "text/plain; charset=utf-8", "ok (limiter unavailable)\n"}, answer{})
			return
		}
		w.Header().Set("Retry-After", strconv.FormatInt(seconds(closedRetryAfter, false), 10))
		s.g.reply(w, http.StatusServiceUnavailable, "text/plain; charset=utf-8", "rate limiter unavailable\n")
		return
	}
	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.FormatInt(d.limit, 10))
	h.Set("X-RateLimit-Remaining", strconv.FormatInt(s.g.remaining(d), 10))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(seconds(d.reset, false), 10))
	if !d.allowed {
		s.g.retryAfter(h, d.retry)
	}
	s.g.settle(w, id, d,
		answer{http.StatusOK, "text/plain; charset=utf-8", "ok\n"},
		answer{http.StatusTooManyRequests, "text/plain; charset=utf-8", "tenant rate limit exceeded\n"})
}

// gcraParams are the bucket as GCRA sees it, in microseconds: one token
// every interval, and a full bucket is k·interval from empty. The interval
// is not rounded (1/3 s is 333333.33µs), so K tokens take exactly K/r.
type gcraParams struct {
	k        int64
	interval float64
}

func (s *RedisBucket) params() gcraParams {
	return gcraParams{k: s.g.q.capacity(s.bucket.Capacity), interval: 1e6 / (s.bucket.Rate * s.g.q.speed())}
}

// gcraSlack absorbs the doubles' rounding when K intervals added one by one
// are compared with K·interval (µs: a nanosecond, far below the clock's
// microsecond).
const gcraSlack = 1e-3

// gcraScript decides one request atomically. GCRA keeps the theoretical
// arrival time (TAT) of the next request; the hash KEYS[1] holds it as
// "ahead", how far the TAT was ahead of the instant "at" (µs). The bucket
// is full when the TAT is not ahead of now, and a request is admitted when
// TAT + interval is at most K·interval ahead of now. Keeping the small
// offset rather than the TAT itself keeps the doubles exact to far below a
// microsecond. ARGV: K, interval µs, now µs ("" takes Redis TIME), "1" to
// charge a refused request too. It returns {admitted 0/1, how far the TAT
// is ahead of now after the decision, in µs}, the latter as a string
// (Redis would truncate a Lua number to an integer).
var gcraScript = redis.NewScript(`
local k = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local st = redis.call('HMGET', KEYS[1], 'at', 'ahead')
local ahead = 0
if st[1] and st[2] then
  ahead = math.max(0, tonumber(st[2]) - math.max(0, now - tonumber(st[1])))
end
local after = ahead + interval
local admitted = 0
if after <= k * interval + tonumber(ARGV[5]) then admitted = 1 end
if admitted == 1 or ARGV[4] == '1' then
  ahead = after
  redis.call('HSET', KEYS[1], 'at', string.format('%.0f', now), 'ahead', string.format('%.17g', ahead))
  redis.call('PEXPIRE', KEYS[1], math.ceil(ahead / 1000) + 1000)
end
return {admitted, string.format('%.17g', ahead)}
`)

// decide runs one decision for key in Redis.
func (s *RedisBucket) decide(ctx context.Context, key string) (decision, error) {
	if s.calls != nil {
		select {
		case s.calls <- struct{}{}:
			defer func() { <-s.calls }()
		default:
			return decision{}, fmt.Errorf("testsvc: redisbucket %s: %d store calls in flight already", key, cap(s.calls))
		}
	}
	p := s.params()
	if s.g.q.Racy > 0 {
		return s.decideRacy(ctx, key, p)
	}
	var now string
	if s.useClock {
		now = strconv.FormatInt(s.g.now().UnixMicro(), 10)
	}
	charge := "0"
	if s.g.q.DeductOnReject {
		charge = "1"
	}
	interval := strconv.FormatFloat(p.interval, 'f', -1, 64)
	res, err := gcraScript.Run(ctx, s.client, []string{key}, p.k, interval, now, charge, gcraSlack).Slice()
	if err != nil {
		return decision{}, fmt.Errorf("testsvc: redisbucket %s: %w", key, err)
	}
	if len(res) != 2 {
		return decision{}, fmt.Errorf("testsvc: redisbucket %s: the script answered %v, want {0|1, \"µs\"}", key, res)
	}
	admitted, _ := res[0].(int64)
	aheadText, _ := res[1].(string)
	ahead, perr := strconv.ParseFloat(aheadText, 64)
	if (admitted != 0 && admitted != 1) || perr != nil {
		return decision{}, fmt.Errorf("testsvc: redisbucket %s: the script answered %v, want {0|1, \"µs\"}", key, res)
	}
	return s.describe(p, admitted == 1, ahead), nil
}

// decideRacy is the racy quirk: read the state, decide here, pause, write
// it, with nothing to stop another request in between.
func (s *RedisBucket) decideRacy(ctx context.Context, key string, p gcraParams) (decision, error) {
	now := s.g.now().UnixMicro()
	st, err := s.client.HMGet(ctx, key, "at", "ahead").Result()
	if err != nil {
		return decision{}, fmt.Errorf("testsvc: redisbucket %s: %w", key, err)
	}
	ahead := 0.0
	if at, ok := st[0].(string); ok {
		a, _ := st[1].(string)
		t, err1 := strconv.ParseInt(at, 10, 64)
		v, err2 := strconv.ParseFloat(a, 64)
		if err1 != nil || err2 != nil {
			return decision{}, fmt.Errorf("testsvc: redisbucket %s holds at=%q ahead=%q, want µs", key, at, a)
		}
		ahead = math.Max(0, v-float64(max(0, now-t)))
	}
	after := ahead + p.interval
	admitted := after <= float64(p.k)*p.interval+gcraSlack
	time.Sleep(s.g.q.Racy)
	if admitted || s.g.q.DeductOnReject {
		ahead = after
		err := s.client.HSet(ctx, key, "at", strconv.FormatInt(now, 10), "ahead", strconv.FormatFloat(ahead, 'g', -1, 64)).Err()
		if err == nil {
			err = s.client.PExpire(ctx, key, microseconds(ahead)+time.Second).Err()
		}
		if err != nil {
			return decision{}, fmt.Errorf("testsvc: redisbucket %s: %w", key, err)
		}
	}
	return s.describe(p, admitted, ahead), nil
}

// describe turns a GCRA state (the TAT after the decision, ahead µs after
// now) into the decision the headers report. Durations are rounded to the
// microsecond, which drops the doubles' noise (3 · 333333.33µs is 1s).
func (s *RedisBucket) describe(p gcraParams, admitted bool, ahead float64) decision {
	ahead = math.Max(ahead, 0) // how far the bucket is from full
	full := float64(p.k) * p.interval
	d := decision{allowed: admitted, limit: s.bucket.Capacity}
	d.remaining = int64(math.Floor((full-ahead)/p.interval + levelSlack))
	d.reset = microseconds(ahead)
	if !admitted {
		d.retry = microseconds(ahead + p.interval - full)
	}
	return d
}

func microseconds(us float64) time.Duration {
	return time.Duration(math.Round(us)) * time.Microsecond
}
