// Package catalog names every limiter rlverify can run: the reference
// algorithms on each store, the deliberately faulty variants, the
// third-party adapters, and the gateways (nginx, HAProxy, gubernator,
// envoyproxy/ratelimit) that run as their own processes or cluster rather
// than inside the reference service. The CLI and the reference service pick limiters from here by name
// and store.
//
// catalog imports limiters, limiters/faulty and limiters/thirdparty; nothing
// in limiters imports it.
package catalog

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlverify/rlverify/internal/suggest"
	"github.com/rlverify/rlverify/limiters"
	"github.com/rlverify/rlverify/limiters/faulty"
	"github.com/rlverify/rlverify/limiters/thirdparty"
	"github.com/rlverify/rlverify/policy"
)

// Stores a limiter can keep its state in.
const (
	Memory = "memory"
	Redis  = "redis"
	// Process: the state lives in a gateway child process (an nginx
	// shared-memory zone, an HAProxy stick table), one per instance.
	Process = "process"
	// Cluster: the state lives in the peers of a limiter cluster
	// (gubernator).
	Cluster = "cluster"
)

// Env is what a constructor may use besides the limits. The zero value is a
// memory-only environment for instance 0 on the real clock.
type Env struct {
	// Instance is the index of the service instance building the limiter.
	Instance int
	// Redis is the shared store (nil for memory entries). Redis entries fail
	// to build without it.
	Redis redis.UniversalClient
	// Now is the instance clock (time.Now when nil).
	Now func() time.Time
	// Skew shifts the instance clock (faulty/instance-clock uses Now()+Skew).
	Skew time.Duration
}

// Entry describes one limiter.
type Entry struct {
	Name string
	// Algorithm is the family the limiter claims to implement: the policy it
	// is checked against is the run's policy in this family.
	Algorithm policy.Algorithm
	Store     string
	Faulty    bool
	// ThirdParty marks adapters of other projects' limiters.
	ThirdParty bool
	// TrustXFF asks the reference service to take the caller's identity from
	// X-Forwarded-For without checking the peer (faulty/trust-xff).
	TrustXFF bool
	// Unguarded: the service must not wrap this store-backed limiter with
	// the policy's store timeout, circuit breaker and failure mode
	// (faulty/unguarded-store).
	Unguarded bool
	// ForwardRejected: the service forwards denied requests downstream too
	// (faulty/forward-rejected).
	ForwardRejected bool
	// RulesFailClosed: the service rejects everything while its rule source
	// is down instead of applying conservative defaults
	// (faulty/no-rule-defaults).
	RulesFailClosed bool
	// Breaks names the invariant a faulty limiter violates.
	Breaks      string
	Description string
	// Gateway, when set, marks an implementation that is not a limiter
	// inside the reference service but a gateway process or cluster started
	// by envs/gateway; New then only returns an error.
	Gateway *Gateway
	New     func(limits []policy.Limit, env Env) (limiters.Limiter, error)
}

// Gateway says which gateway an entry runs and how envs/gateway starts
// it.
type Gateway struct {
	// Kind is the gateway family: "nginx", "haproxy", "gubernator" or
	// "envoy-ratelimit".
	Kind string
	// Mode selects its variant: "nodelay" or "delay" (nginx), "local" or
	// "global" (gubernator), empty for HAProxy.
	Mode string
	// Program is the executable started as a child process (empty when the
	// gateway runs in this process).
	Program string
	// Docs is the implementation's own documentation of what it enforces.
	Docs string
}

// Mapping says how the policy's parameters become the limiter's: "(K, r) →
// …" for bucket families, "(N, W) → …" for window families.
func (e Entry) Mapping() string {
	switch {
	case e.Name == "x/time/rate":
		return "(K, r) → rate.NewLimiter(rate.Limit(r), K) per key"
	case e.Name == "ulule/limiter":
		return "(N, W) → limiter.Rate{Limit: N, Period: W}"
	case e.Name == "throttled":
		return "(K, r) → RateQuota{MaxRate: 1 per 1/r, MaxBurst: K−1}"
	case e.Name == "redis_rate":
		return "(K, r) → redis_rate.Limit{Rate: K, Burst: K, Period: K/r}"
	case e.Gateway != nil && e.Gateway.Kind == NGINX && e.Gateway.Mode == "nodelay":
		return "(K, r) → limit_req_zone rate=r, limit_req burst=K−1 nodelay"
	case e.Gateway != nil && e.Gateway.Kind == NGINX:
		return "(K, r) → limit_req_zone rate=r, limit_req burst=K−1 (delaying)"
	case e.Gateway != nil && e.Gateway.Kind == HAProxy:
		return "(N, W) → stick-table store http_req_rate(W); deny if sc_http_req_rate gt N"
	case e.Gateway != nil && e.Gateway.Kind == EnvoyRateLimit:
		return "(N, W) → rate_limit {unit: U, requests_per_unit: ⌊N·U/W⌋}, U the largest of second/minute/hour/day ≤ W"
	case e.Gateway != nil && e.Gateway.Kind == Gubernator:
		return "(K, r) → LEAKY_BUCKET limit=K burst=K duration=K/r, behavior " + strings.ToUpper(e.Gateway.Mode)
	case e.Algorithm == policy.GCRA:
		return "(K, r) → emission interval T = 1/r, burst tolerance τ = K·T"
	case e.Algorithm.Bucketed():
		return "(K, r) → bucket of K tokens refilled at r/s, starting full"
	case e.Algorithm == policy.FixedWindow || e.Name == "faulty/unweighted-fixed-window":
		return "(N, W) → N per epoch-aligned window of W"
	case e.Algorithm == policy.SlidingLog:
		return "(N, W) → N admitted in any rolling W"
	case e.Algorithm == policy.SlidingCounter:
		return "(N, W) → n_prev·(1 − elapsed/W) + n_cur + cost ≤ N"
	}
	return ""
}

func needRedis(env Env) (redis.UniversalClient, error) {
	if env.Redis == nil {
		return nil, errors.New("catalog: this limiter keeps its state in Redis: no Redis client in the environment")
	}
	return env.Redis, nil
}

var descriptions = map[policy.Algorithm]string{
	policy.TokenBucket:    "token bucket, capacity K refilled at r/s, starts full",
	policy.GCRA:           "GCRA (theoretical arrival time), admits what a token bucket (K, r) admits",
	policy.FixedWindow:    "fixed window, N per epoch-aligned W (up to 2N across a boundary)",
	policy.SlidingLog:     "sliding-window log, at most N admitted in any rolling W",
	policy.SlidingCounter: "sliding-window counter, weighted previous + current window ≤ N",
}

// ConservativeGuard is how much longer than declared the conservative
// sliding log keeps every admission: a guard real implementations have
// (timer or eviction granularity). It is a correct limiter: refusing a
// little longer than the arithmetic allows is within the checks' timing
// tolerance and must never be reported.
const ConservativeGuard = 30 * time.Millisecond

func reference() []Entry {
	var out []Entry
	out = append(out, Entry{
		Name: "conservative/sliding-log", Algorithm: policy.SlidingLog, Store: Memory,
		Description: "sliding-window log that frees each slot 30ms after the declared window (a conservative guard; correct)",
		New: func(l []policy.Limit, _ Env) (limiters.Limiter, error) {
			guarded := append([]policy.Limit(nil), l...)
			for i := range guarded {
				guarded[i].Window += policy.Duration(ConservativeGuard)
				guarded[i].Algorithm = policy.SlidingLog
			}
			return limiters.New(policy.SlidingLog, guarded)
		},
	})
	for _, a := range policy.Algorithms {
		a := a
		out = append(out,
			Entry{
				Name: string(a), Algorithm: a, Store: Memory, Description: descriptions[a],
				New: func(l []policy.Limit, _ Env) (limiters.Limiter, error) { return limiters.New(a, l) },
			},
			Entry{
				Name: string(a), Algorithm: a, Store: Redis, Description: descriptions[a] + "; Redis Lua script, Redis TIME",
				New: func(l []policy.Limit, env Env) (limiters.Limiter, error) {
					c, err := needRedis(env)
					if err != nil {
						return nil, err
					}
					return limiters.NewRedis(a, c, l)
				},
			})
	}
	return out
}

func memOrRedis(alg policy.Algorithm) func(l []policy.Limit, env Env) (limiters.Limiter, error) {
	return func(l []policy.Limit, env Env) (limiters.Limiter, error) {
		if env.Redis != nil {
			return limiters.NewRedis(alg, env.Redis, l)
		}
		return limiters.New(alg, l)
	}
}

// both returns the entry on memory and, with the same constructor reading
// env.Redis, on redis.
func both(e Entry) []Entry {
	m, r := e, e
	m.Store, r.Store = Memory, Redis
	newFn := e.New
	m.New = func(l []policy.Limit, env Env) (limiters.Limiter, error) {
		env.Redis = nil
		return newFn(l, env)
	}
	r.New = func(l []policy.Limit, env Env) (limiters.Limiter, error) {
		if _, err := needRedis(env); err != nil {
			return nil, err
		}
		return newFn(l, env)
	}
	return []Entry{m, r}
}

func faultyEntries() []Entry {
	out := []Entry{
		{
			Name: "faulty/racy-token-bucket", Algorithm: policy.TokenBucket, Store: Memory,
			Breaks:      "oversell: read-modify-write is not atomic",
			Description: "token bucket whose read and write are separate steps; concurrent requests oversell",
			New: func(l []policy.Limit, _ Env) (limiters.Limiter, error) {
				return faulty.NewRacyTokenBucket(l, 0), nil
			},
		},
		{
			Name: "faulty/racy-token-bucket", Algorithm: policy.TokenBucket, Store: Redis,
			Breaks:      "oversell: GET then SET, no script or transaction",
			Description: "token bucket in Redis read and written in separate round trips; concurrent requests oversell",
			New: func(l []policy.Limit, env Env) (limiters.Limiter, error) {
				c, err := needRedis(env)
				if err != nil {
					return nil, err
				}
				return faulty.NewRacyRedisTokenBucket(c, l, 0)
			},
		},
		{
			Name: "faulty/uncapped-refill", Algorithm: policy.TokenBucket, Store: Memory,
			Breaks:      "token bounds / oversell after idle: refill not capped at K",
			Description: "token bucket whose idle time accumulates credit beyond K",
			New: func(l []policy.Limit, _ Env) (limiters.Limiter, error) {
				return faulty.NewUncappedRefill(l)
			},
		},
		{
			Name: "faulty/deduct-on-reject", Algorithm: policy.TokenBucket, Store: Memory,
			Breaks:      "under-admission and retry-after: rejected requests still consume",
			Description: "token bucket that deducts the cost of rejected requests, going negative",
			New: func(l []policy.Limit, _ Env) (limiters.Limiter, error) {
				return faulty.NewDeductOnReject(l)
			},
		},
		{
			Name: "faulty/local-only", Algorithm: policy.TokenBucket, Store: Redis,
			Breaks:      "instances: per-instance state, N instances admit N× the quota",
			Description: "correct token bucket kept in each instance's memory although the run provides Redis",
			New: func(l []policy.Limit, _ Env) (limiters.Limiter, error) {
				return faulty.NewLocalOnly(policy.TokenBucket, l)
			},
		},
		{
			Name: "faulty/keeps-old-limit", Algorithm: policy.TokenBucket, Store: Memory,
			Breaks:      "oversell after a declared limit change that lowers the limit, under-admission after one that raises it: the limiter goes on deciding by the old one",
			Description: "in-memory token bucket that accepts a limit change and keeps deciding by its old limits",
			New: func(l []policy.Limit, _ Env) (limiters.Limiter, error) {
				return faulty.NewKeepsOldLimit(l)
			},
		},
		{
			Name: "faulty/advertises-old-limit", Algorithm: policy.TokenBucket, Store: Memory,
			Breaks:      "headers after a declared limit change: the limiter enforces the new limit and advertises the old one",
			Description: "in-memory token bucket that applies a limit change in place while its service's headers keep the old limit",
			New: func(l []policy.Limit, _ Env) (limiters.Limiter, error) {
				return faulty.NewAdvertisesOldLimit(l)
			},
		},
		{
			Name: "faulty/reload-resets", Algorithm: policy.TokenBucket, Store: Memory,
			Breaks:      "oversell at a declared limit change: every key starts again from a full bucket of the new limit",
			Description: "in-memory token bucket that applies a limit change by building a new limiter, forgetting every key's state",
			New: func(l []policy.Limit, _ Env) (limiters.Limiter, error) {
				return faulty.NewResetsOnReload(l)
			},
		},
		{
			Name: "faulty/wall-clock", Algorithm: policy.TokenBucket, Store: Memory,
			Breaks:      "oversell after a forward clock step, under-admission after a backward one: time from the wall clock, not a monotonic one",
			Description: "in-memory token bucket deciding at the instance's wall clock (Env.Now), which a clock step moves",
			New: func(l []policy.Limit, env Env) (limiters.Limiter, error) {
				return faulty.NewWallClock(l, env.Now)
			},
		},
		{
			Name: "faulty/instance-clock", Algorithm: policy.TokenBucket, Store: Redis,
			Breaks:      "oversell / fairness under skew: time from the instance clock, not Redis",
			Description: "Redis token bucket deciding at the instance's clock plus Env.Skew",
			New: func(l []policy.Limit, env Env) (limiters.Limiter, error) {
				c, err := needRedis(env)
				if err != nil {
					return nil, err
				}
				return faulty.NewInstanceClock(c, l, env.Now, env.Skew)
			},
		},
	}
	wrap := func(w func(limiters.Limiter) limiters.Limiter) func([]policy.Limit, Env) (limiters.Limiter, error) {
		inner := memOrRedis(policy.TokenBucket)
		return func(l []policy.Limit, env Env) (limiters.Limiter, error) {
			lim, err := inner(l, env)
			if err != nil {
				return nil, err
			}
			return w(lim), nil
		}
	}
	out = append(out, both(Entry{
		Name: "faulty/unweighted-fixed-window", Algorithm: policy.SlidingLog,
		Breaks:      "oversell: a fixed window claiming to be a sliding log admits 2N across a boundary",
		Description: "plain fixed window presented as a sliding-window log",
		New: func(l []policy.Limit, env Env) (limiters.Limiter, error) {
			var c redis.Scripter
			if env.Redis != nil {
				c = env.Redis
			}
			return faulty.NewUnweightedFixedWindow(c, l)
		},
	})...)
	out = append(out, both(Entry{
		Name: "faulty/shared-bucket", Algorithm: policy.TokenBucket,
		Breaks:      "isolation: all tenants of a tier share one bucket",
		Description: "correct token bucket keyed on the tier, not the tenant",
		New:         wrap(func(l limiters.Limiter) limiters.Limiter { return faulty.SharedBucket{Limiter: l} }),
	})...)
	out = append(out, both(Entry{
		Name: "faulty/remaining-off-by-one", Algorithm: policy.TokenBucket,
		Breaks:      "token-bounds: remaining counts one more than the bucket holds",
		Description: "correct token bucket reporting remaining + 1 in its headers",
		New:         wrap(func(l limiters.Limiter) limiters.Limiter { return faulty.RemainingOffByOne{Limiter: l} }),
	})...)
	out = append(out, both(Entry{
		Name: "faulty/remaining-one-low", Algorithm: policy.TokenBucket,
		Breaks:      "token-bounds: remaining counts one less than the bucket holds",
		Description: "correct token bucket reporting remaining − 1 in its headers",
		New:         wrap(func(l limiters.Limiter) limiters.Limiter { return faulty.RemainingOneLow{Limiter: l} }),
	})...)
	out = append(out, both(Entry{
		Name: "faulty/absurd-retry-after", Algorithm: policy.TokenBucket,
		Breaks:      "retry-after: advice of 10^9 s, longer than anything the policy can require",
		Description: "correct token bucket advising a 10^9 s wait on every refusal",
		New:         wrap(func(l limiters.Limiter) limiters.Limiter { return faulty.AbsurdRetryAfter{Limiter: l} }),
	})...)
	out = append(out, both(Entry{
		Name: "faulty/tenfold-retry-after", Algorithm: policy.TokenBucket,
		Breaks:      "retry-after: advice ten times the exact wait (within a full refill)",
		Description: "correct token bucket advising ten times the wait on every refusal",
		New:         wrap(func(l limiters.Limiter) limiters.Limiter { return faulty.TenfoldRetryAfter{Limiter: l} }),
	})...)
	out = append(out, both(Entry{
		Name: "faulty/long-reset", Algorithm: policy.TokenBucket,
		Breaks:      "headers: the reset it reports is far beyond the window",
		Description: "correct token bucket and advice, reporting a reset 10× the truth plus 10s",
		New:         wrap(func(l limiters.Limiter) limiters.Limiter { return faulty.LongReset{Limiter: l} }),
	})...)
	out = append(out, both(Entry{
		Name: "faulty/shared-prefix", Algorithm: policy.TokenBucket,
		Breaks:      "isolation: tenants whose keys share their first 12 characters share one bucket",
		Description: "correct token bucket keyed on the first 12 characters of the tenant (a fixed-width key column)",
		New:         wrap(func(l limiters.Limiter) limiters.Limiter { return faulty.SharedPrefix{Limiter: l, PrefixLen: 12} }),
	})...)
	out = append(out, Entry{
		Name: "faulty/unguarded-store", Algorithm: policy.TokenBucket, Store: Redis, Unguarded: true,
		Breaks:      "fail-mode: no failure mode; store errors surface as 503s whatever the policy declares",
		Description: "atomic Redis token bucket without store timeout, circuit breaker or declared failure mode",
		New:         memOrRedis(policy.TokenBucket),
	})
	out = append(out, both(Entry{
		Name: "faulty/forward-rejected", Algorithm: policy.TokenBucket, ForwardRejected: true,
		Breaks:      "downstream: denied requests are still forwarded",
		Description: "correct decisions, but the service forwards 429ed requests downstream as well",
		New:         memOrRedis(policy.TokenBucket),
	})...)
	out = append(out, both(Entry{
		Name: "faulty/no-rule-defaults", Algorithm: policy.TokenBucket, RulesFailClosed: true,
		Breaks:      "fail-mode (rules-down): rejects everything while the rule source is unavailable",
		Description: "correct token bucket; the service answers 503 to all while its rules cannot be read",
		New:         memOrRedis(policy.TokenBucket),
	})...)
	out = append(out, both(Entry{
		Name: "faulty/no-retry-after", Algorithm: policy.TokenBucket,
		Breaks:      "retry-after: 429 without Retry-After",
		Description: "correct token bucket whose denials carry no Retry-After",
		New:         wrap(func(l limiters.Limiter) limiters.Limiter { return faulty.NoRetryAfter{Limiter: l} }),
	})...)
	out = append(out, both(Entry{
		Name: "faulty/short-retry-after", Algorithm: policy.TokenBucket,
		Breaks:      "retry-after: advice is half the true wait",
		Description: "correct token bucket advising half the wait it needs",
		New:         wrap(func(l limiters.Limiter) limiters.Limiter { return faulty.ShortRetryAfter{Limiter: l} }),
	})...)
	out = append(out, both(Entry{
		Name: "faulty/address-only", Algorithm: policy.TokenBucket, TrustXFF: true,
		Breaks:      "isolation: tenants keyed on a spoofable X-Forwarded-For address alone",
		Description: "correct token bucket keyed on the X-Forwarded-For address, not the API key, when one is sent",
		New:         wrap(func(l limiters.Limiter) limiters.Limiter { return faulty.AddressOnly{Limiter: l} }),
	})...)
	out = append(out, both(Entry{
		Name: "faulty/trust-xff", Algorithm: policy.TokenBucket, TrustXFF: true,
		Breaks:      "bypass: identity from a spoofable X-Forwarded-For",
		Description: "correct token bucket; the service keys requests on X-Forwarded-For from any peer",
		New:         memOrRedis(policy.TokenBucket),
	})...)
	for i := range out {
		out[i].Faulty = true
	}
	return out
}

func thirdPartyEntries() []Entry {
	return []Entry{
		{
			Name: "x/time/rate", Algorithm: policy.TokenBucket, Store: Memory, ThirdParty: true,
			Description: "golang.org/x/time/rate, one rate.Limiter per key (single limit)",
			New: func(l []policy.Limit, _ Env) (limiters.Limiter, error) {
				return thirdparty.NewXTimeRate(l)
			},
		},
		{
			Name: "ulule/limiter", Algorithm: policy.SlidingCounter, Store: Memory, ThirdParty: true,
			Description: "github.com/ulule/limiter/v3, in-memory store: N per window starting at a key's first request (checked as ≤ 2N per rolling W)",
			New: func(l []policy.Limit, _ Env) (limiters.Limiter, error) {
				return thirdparty.NewUlule(l)
			},
		},
		{
			Name: "throttled", Algorithm: policy.GCRA, Store: Memory, ThirdParty: true,
			Description: "github.com/throttled/throttled/v2, GCRA with its in-memory store (single limit)",
			New: func(l []policy.Limit, _ Env) (limiters.Limiter, error) {
				return thirdparty.NewThrottled(l)
			},
		},
		{
			Name: "redis_rate", Algorithm: policy.GCRA, Store: Redis, ThirdParty: true,
			Description: "github.com/go-redis/redis_rate/v10, GCRA in Redis (single limit)",
			New: func(l []policy.Limit, env Env) (limiters.Limiter, error) {
				c, err := needRedis(env)
				if err != nil {
					return nil, err
				}
				return thirdparty.NewRedisRate(c, l)
			},
		},
	}
}

// Gateway kinds (Gateway.Kind).
const (
	NGINX      = "nginx"
	HAProxy    = "haproxy"
	Gubernator = "gubernator"
	// EnvoyRateLimit is envoyproxy/ratelimit, Envoy's rate-limit service,
	// called over gRPC.
	EnvoyRateLimit = "envoy-ratelimit"
)

func gatewayEntries() []Entry {
	notInProcess := func(name string) func([]policy.Limit, Env) (limiters.Limiter, error) {
		return func([]policy.Limit, Env) (limiters.Limiter, error) {
			return nil, fmt.Errorf("catalog: %s is a gateway, not a limiter the reference service can hold: run it with rlverify attack or compare", name)
		}
	}
	nginxDocs := "https://nginx.org/en/docs/http/ngx_http_limit_req_module.html"
	gubernatorDocs := "https://github.com/gubernator-io/gubernator/blob/v2.13.0/docs/architecture.md"
	out := []Entry{
		{
			Name: "nginx/limit-req", Algorithm: policy.TokenBucket, Store: Process,
			Gateway:     &Gateway{Kind: NGINX, Mode: "nodelay", Program: "nginx", Docs: nginxDocs},
			Description: "nginx limit_req (rate, burst, nodelay) as a child process in front of the sink, keyed by the identity",
		},
		{
			Name: "nginx/limit-req-delay", Algorithm: policy.TokenBucket, Store: Process,
			Gateway:     &Gateway{Kind: NGINX, Mode: "delay", Program: "nginx", Docs: nginxDocs},
			Description: "nginx limit_req without nodelay: excess requests up to the burst are delayed to rate r, not refused",
		},
		{
			Name: "haproxy/stick-table", Algorithm: policy.SlidingCounter, Store: Process,
			Gateway:     &Gateway{Kind: HAProxy, Program: "haproxy", Docs: "https://docs.haproxy.org/2.6/configuration.html#7.3.3-sc_http_req_rate"},
			Description: "HAProxy stick table http_req_rate(W) with http-request deny, a child process in front of the sink (every request counts, refused ones too)",
		},
		{
			Name: "envoy/ratelimit", Algorithm: policy.FixedWindow, Store: Redis,
			Gateway:     &Gateway{Kind: EnvoyRateLimit, Program: "envoy-ratelimit", Docs: "https://github.com/envoyproxy/ratelimit#configuration"},
			Description: "envoyproxy/ratelimit (Envoy's rate-limit service), child processes sharing one redis-server, called over gRPC: n per second, minute, hour or day per key",
		},
		{
			Name: "gubernator/global", Algorithm: policy.TokenBucket, Store: Cluster,
			Gateway:     &Gateway{Kind: Gubernator, Mode: "global", Docs: gubernatorDocs},
			Description: "gubernator v2.13.0, 3 peers in process, GLOBAL behaviour: each peer answers from its cache, hits reach the owner asynchronously",
		},
		{
			Name: "gubernator/local", Algorithm: policy.TokenBucket, Store: Cluster,
			Gateway:     &Gateway{Kind: Gubernator, Mode: "local", Docs: gubernatorDocs},
			Description: "gubernator v2.13.0, 3 peers in process, default behaviour: the key's owning peer decides every hit",
		},
	}
	for i := range out {
		out[i].ThirdParty = true
		out[i].New = notInProcess(out[i].Name)
	}
	return out
}

var entries = func() []Entry {
	var e []Entry
	e = append(e, reference()...)
	e = append(e, thirdPartyEntries()...)
	e = append(e, gatewayEntries()...)
	e = append(e, faultyEntries()...)
	return e
}()

func group(e Entry) int {
	switch {
	case e.Faulty:
		return 2
	case e.ThirdParty:
		return 1
	}
	return 0
}

// All returns every entry: reference limiters first, then third-party
// adapters, then faulty ones, each group sorted by name then store.
func All() []Entry {
	out := append([]Entry(nil), entries...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if group(a) != group(b) {
			return group(a) < group(b)
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Store < b.Store
	})
	return out
}

// Lookup finds name on store ("" picks the memory variant when there is
// one, else the only one).
func Lookup(name, store string) (Entry, error) {
	var cands []Entry
	for _, e := range entries {
		if e.Name == name {
			cands = append(cands, e)
		}
	}
	if len(cands) == 0 {
		return Entry{}, fmt.Errorf("unknown limiter %q%s (known: %s; see rlverify limiters)", name, suggest.DidYouMean(name, Names()), strings.Join(Names(), ", "))
	}
	want := store
	if want == "" {
		want = Memory
	}
	for _, e := range cands {
		if e.Store == want {
			return e, nil
		}
	}
	if len(cands) == 1 && store == "" {
		return cands[0], nil
	}
	stores := make([]string, len(cands))
	for i, e := range cands {
		stores[i] = e.Store
	}
	return Entry{}, fmt.Errorf("limiter %q has no %s store (it has: %s)", name, want, strings.Join(stores, ", "))
}

// Names lists the distinct limiter names.
func Names() []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range All() {
		if !seen[e.Name] {
			seen[e.Name] = true
			out = append(out, e.Name)
		}
	}
	return out
}
