package matrix

import "strings"

// Explanation says why an implementation gives a surprising verdict, and
// where its own documentation (or code) says it behaves so.
type Explanation struct {
	Why  string
	Docs string
}

// Documentation an explanation points at.
const (
	nginxStatus   = "https://nginx.org/en/docs/http/ngx_http_limit_req_module.html#limit_req_status"
	nginxZone     = "https://nginx.org/en/docs/http/ngx_http_limit_req_module.html#limit_req_zone"
	nginxLimitReq = "https://nginx.org/en/docs/http/ngx_http_limit_req_module.html#limit_req"
	nginxTimer    = "https://nginx.org/en/docs/ngx_core_module.html#timer_resolution"
	haproxyRate   = "https://docs.haproxy.org/2.6/configuration.html#7.3.3-sc_http_req_rate"
	haproxyDeny   = "https://docs.haproxy.org/2.6/configuration.html#4.2-http-request%20deny"
	haproxyTable  = "https://docs.haproxy.org/2.6/configuration.html#4.2-stick-table"
	guberGlobal   = "https://github.com/gubernator-io/gubernator/blob/v2.13.0/docs/architecture.md#global-behavior"
	guberReset    = "https://github.com/gubernator-io/gubernator/blob/v2.13.0/README.md#protobuf-structure"
	guberCap      = "https://github.com/gubernator-io/gubernator/blob/v2.13.0/algorithms.go#L369"
	guberDrop     = "https://github.com/gubernator-io/gubernator/blob/v2.13.0/algorithms.go#L398"
	envoyConfig   = "https://github.com/envoyproxy/ratelimit#configuration"
	envoyHeaders  = "https://www.envoyproxy.io/docs/envoy/latest/api-v3/extensions/filters/http/ratelimit/v3/rate_limit.proto#envoy-v3-api-field-extensions-filters-http-ratelimit-v3-ratelimit-enable-x-ratelimit-headers"
	xrate         = "https://pkg.go.dev/golang.org/x/time/rate#Limiter"
	throttledDoc  = "https://pkg.go.dev/github.com/throttled/throttled/v2#GCRARateLimiterCtx"
	ululeDoc      = "https://pkg.go.dev/github.com/ulule/limiter/v3#Context"
)

// nginx's small overshoots: the clock it decides with.
const (
	nginxCachedClock  = "nginx decides with its cached clock, read once per batch of kernel events: a request read later in the same batch is stamped with the earlier time, on a loaded machine tens of milliseconds before it was sent, and the bucket counts refill from before the request existed."
	nginxSameEnvelope = " The honest policy has the same envelope: a real, small overshoot of the declared promise, not a translation error."
)

// envoyproxy/ratelimit's rounding of a declared window to its units.
const envoyRound = "envoyproxy/ratelimit counts n per second, minute, hour or day in epoch-aligned windows; a declared window that is not one unit is rounded to the largest unit not above it, n = ⌊N·U/W⌋ (the next unit up when that is 0)."

// explanations by implementation (a name, or a family prefix ending in /),
// then plan ("" for any), then check.
var explanations = map[string]map[string]map[string]Explanation{
	"nginx/limit-req-delay": {"retry-after": {
		"evidence": {"slow-refill (K=5, a token every 3 s) makes nginx delay a burst's excess up to 12 s, past the 5 s per-request timeout (--timeout): those requests got no response and the run is unknown. Delaying limiters need --timeout above (K−1)/r.", nginxLimitReq},
	}},
	"nginx/limit-req": {"overload": {
		"oversell": {nginxCachedClock + " A tenth of a request over 2.4 s at 5/s is 20 ms of such lag; the other run passed (unstable)." + nginxSameEnvelope, nginxTimer},
	}, "similar-keys": {
		"oversell": {nginxCachedClock + " 18 admitted in 1.6 s where 17.9 fit: a tenth of a request at 5/s is 20 ms of such lag; the other run passed (unstable)." + nginxSameEnvelope, nginxTimer},
	}},
	"nginx/": {"bypass": {
		"downstream": {"The case variant's second bucket reaches the upstream too: more arrivals than one envelope allows.", nginxZone},
	}, "": {
		"retry-after": {"nginx limit_req answers a refusal with `limit_req_status` and nothing else: no Retry-After. The honest policy turns the check off (checks_off: [retry-after]): a promise nginx knowingly does not keep.", nginxStatus},
		"headers":     {"limit_req sends no RateLimit or X-RateLimit headers. The honest policy declares none.", nginxStatus},
		"oversell":    {"Each nginx process keeps its own limit_req_zone in its own shared memory: three instances admit three buckets. The honest policy says scope: instance.", nginxZone},
		"instances":   {"Each nginx process keeps its own limit_req_zone: a key spread over three instances gets three quotas.", nginxZone},
		"downstream":  {"The three nginx processes' quotas all reach the upstream: more arrivals than one envelope allows.", nginxZone},
		"bypass":      {"The zone key is the header's bytes: nginx cannot fold case, so FREE-… and free-… are two keys with two buckets (the declared identity is case-insensitive; the honest policy is case-sensitive).", nginxZone},
	}},
	"haproxy/": {"": {
		"retry-after":     {"`http-request deny` sets the status only: no Retry-After. The honest policy turns the check off (checks_off: [retry-after]).", haproxyDeny},
		"headers":         {"HAProxy sends no rate-limit headers of its own.", haproxyDeny},
		"under-admission": {"sc_http_req_rate \"includes every started request, valid or not\": refused requests count, so a client above its rate stays refused although a counter of admitted requests has room. The honest policy says counts: all.", haproxyRate},
		"isolation":       {"The same refusals, blamed on the quiet tenants that were busy meanwhile; under-admission is the cause (refused requests count), not shared quota.", haproxyRate},
		"oversell":        {"A stick table lives in one HAProxy process: three instances, three counters per key.", haproxyTable},
		"instances":       {"A stick table lives in one HAProxy process: three instances, three counters per key.", haproxyTable},
		"downstream":      {"The three HAProxy processes' quotas all reach the backend: more arrivals than one envelope allows.", haproxyTable},
	}},
	"gubernator/": {"retry-after": {"evidence": {"rlverify's probe opens its connection early and holds the request's last byte until the advised instant; this implementation advised 15 s, past the front's 5 s ReadHeaderTimeout, so the probe got 400 and the run is unknown: a limitation of rlverify's probe with long advice, not of the implementation.", ""}}, "": {
		"retry-after":     {"The front advises reset_time − now; for a LEAKY_BUCKET gubernator's reset_time is when the bucket is full again ((limit − remaining) · duration/limit), not when the next hit fits as the README describes it for OVER_LIMIT; a probe at that instant then meets whatever the key's state became.", guberReset},
		"under-admission": {"A hit that takes the last whole token sets Remaining to 0 (algorithms.go:398) and drops the fraction already refilled toward the next one: a key hammered above its rate is refilled slower than r and refused while a bucket of (K, r) has a token.", guberDrop},
		"isolation":       {"The under-admission refusals, blamed on the quiet tenants that were busy meanwhile; gubernator keys are isolated, the dropped fraction is the cause.", guberDrop},
		"token-bounds":    {"The leaky bucket caps Remaining only when its whole part exceeds burst (algorithms.go:369): it holds up to K + 0.999 tokens and reports remaining counts no bucket of K reaches.", guberCap},
	}},
	"gubernator/global": {"": {
		"oversell":        {"GLOBAL: each peer answers from its own cache and sends the hits to the owner asynchronously (GlobalSyncWait, 100ms); a key spread over the three peers is admitted up to once per peer before they hear of each other.", guberGlobal},
		"instances":       {"GLOBAL: each peer admits from its own cache until the owner's broadcast reaches it: up to one quota per peer.", guberGlobal},
		"downstream":      {"What GLOBAL's peers admit beyond one quota reaches downstream too.", guberGlobal},
		"under-admission": {"GLOBAL: a peer also refuses when the owner's broadcast says the key is spent, however its own cache refilled; and a hit that takes the last whole token drops the fraction toward the next (algorithms.go:398).", guberGlobal},
		"isolation":       {"The under-admission refusals, blamed on other keys busy meanwhile: the cause is GLOBAL's broadcasts and the dropped fraction, not shared quota.", guberGlobal},
		"token-bounds":    {"GLOBAL: a broadcast replaces a peer's cached Remaining with the owner's, which jumps up as no bucket does.", guberGlobal},
		"bypass":          {"The variants themselves stay one key; what is over the envelope is GLOBAL's per-peer admission (see oversell), which the bypass check sees among the variants.", guberGlobal},
	}},
	"envoy/": {"retry-after": {
		"oversell":        {envoyRound + " retry-after's policy (slow-refill: K=5, a token every 3 s, so 5 per 15 s) is below one per second: the next unit up gives ⌊5·60/15⌋ = 20 per minute, and one minute's window admits all 20 at once. The rate is kept, the burst is four times the declared one; the honest policy says 20 per minute.", envoyConfig},
		"token-bounds":    {"The remaining counts are those of the 20-per-minute rule the rounding made (up to 19), more than the declared limit 5 allows: the same rounding as oversell.", envoyConfig},
		"under-admission": {"The 20 admitted at once spend the minute's window: the rest of that minute is refused where the declared 15 s windows would have room again. The same rounding as oversell.", envoyConfig},
		"headers":         {"The X-RateLimit headers describe the rule the service applies, 20 per minute with a reset up to a minute away, not the declared 5 per 15 s; no RateLimit headers.", envoyHeaders},
	}, "bypass": {
		"evidence": {"bypass varies how an HTTP request spells its key (spaces, case, the header twice, X-Forwarded-For, the path); a rate-limit service is sent the descriptor Envoy built from the request, not the request, so the run cannot send the variants over grpc:// and stops before its first request: no verdict, rightly. How Envoy's descriptor actions read the header is Envoy's side (audit leaves this plan out for grpc:// targets).", ""},
	}, "": {
		"under-admission": {envoyRound + " The declared 10 per 2 s became requests_per_unit ⌊10·1/2⌋ = 5 per second, never above the declared rate: the sixth to tenth request of a second are refused where the declared window has room (a burst that straddles a second's edge gets 5 + 5, all the declared window allows: hence ~). The honest policy says 5 per second.", envoyConfig},
		"headers":         {"The service's statuses become X-RateLimit-Limit, -Remaining and -Reset (Envoy's enable_x_ratelimit_headers) and carry the rule it applies, 5 per second, not the declared 10 per 2 s; no RateLimit or RateLimit-Policy headers. The honest policy declares X-RateLimit only.", envoyHeaders},
		"retry-after":     {"Envoy's rate-limit filter sends no Retry-After with its 429 (duration_until_reset becomes X-RateLimit-Reset). The honest policy turns the check off (checks_off: [retry-after]).", envoyHeaders},
		"isolation":       {"The under-admission refusals (the rounding to 5 per second), blamed on the other keys busy meanwhile; every key has its own counter in Redis, the rounding is the cause, not shared quota.", envoyConfig},
	}},
	"x/time/rate": {"multi-instance": {
		"oversell":     {"A rate.Limiter lives in the memory of one instance: three instances, three buckets per key.", xrate},
		"instances":    {"A rate.Limiter lives in the memory of one instance: three instances, three buckets per key.", xrate},
		"token-bounds": {"Each instance reports the remaining tokens of its own bucket, so consecutive responses of one key jump between three counts.", xrate},
		"downstream":   {"The three instances' buckets all reach downstream: more arrivals than one envelope allows.", xrate},
	}},
	"throttled": {"multi-instance": {
		"oversell":     {"throttled's in-memory store is per instance: three instances, three GCRA states per key.", throttledDoc},
		"instances":    {"throttled's in-memory store is per instance: three instances, three GCRA states per key.", throttledDoc},
		"token-bounds": {"Each instance reports the remaining count of its own state, so consecutive responses of one key jump between three counts.", throttledDoc},
		"downstream":   {"The three instances' quotas all reach downstream: more arrivals than one envelope allows.", throttledDoc},
	}},
	"redis_rate": {"": {
		"oversell": {"Unknown, not fail: with the Redis round trip in every decision the run's intervals admitted neither a witness schedule nor a certificate; it varies between runs on a loaded machine.", "https://pkg.go.dev/github.com/go-redis/redis_rate/v10#Limiter.AllowN"},
	}},
	"ulule/limiter": {"retry-after": {"evidence": {"rlverify's probe opens its connection early and holds the request's last byte until the advised instant; this implementation advised 15 s, past the front's 5 s ReadHeaderTimeout, so the probe got 400 and the run is unknown: a limitation of rlverify's probe with long advice, not of the implementation.", ""}}, "": {
		"retry-after": {"ulule/limiter's Reset is whole Unix seconds, so advice derived from it can be up to a second short.", ululeDoc},
		"oversell":    {"ulule/limiter's memory store is per instance (and its window opens at a key's first request): three instances, three windows per key.", ululeDoc},
		"instances":   {"ulule/limiter's memory store is per instance: three instances, three quotas per key.", ululeDoc},
		"downstream":  {"The three instances' quotas all reach downstream: more arrivals than one envelope allows.", ululeDoc},
	}},
}

// Explain returns why impl gives a surprising verdict of check under plan;
// Why is empty when nothing explains it.
func Explain(impl, plan, check string) Explanation {
	keys := []string{impl}
	if i := strings.Index(impl, "/"); i > 0 {
		keys = append(keys, impl[:i+1])
	}
	for _, k := range keys {
		byPlan := explanations[k]
		for _, p := range []string{plan, ""} {
			if e, ok := byPlan[p][check]; ok {
				return e
			}
		}
	}
	return Explanation{}
}

// Unexplained lists the surprising cells of d that Explain has nothing for.
func (d *Data) Unexplained() []string {
	var out []string
	for _, t := range d.Tables {
		for _, c := range t.Columns {
			for check, v := range c.Checks {
				if surprising(v) && Explain(c.Name, t.Plan, check).Why == "" {
					out = append(out, t.Plan+" · "+c.Name+" · "+check+" "+v)
				}
			}
		}
	}
	return out
}
