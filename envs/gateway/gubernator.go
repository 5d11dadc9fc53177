package gateway

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/rlverify/rlverify/policy"
)

// gubernator v2.13.0 (https://github.com/gubernator-io/gubernator), a
// distributed rate-limit service: a cluster of peers, each rate limit owned
// by one peer chosen by consistent hashing of its name and key.
//
// Mapping, per tier limit (K, r): a RateLimitReq with algorithm
// LEAKY_BUCKET, limit = burst = K, duration = K/r in milliseconds (the
// bucket leaks limit/duration = r per second, holds burst = K, starts full)
// and hits = 1, sent by the HTTP front over gRPC to its own peer. Keeping
// limit = burst matters for GLOBAL: the owner's broadcast sets a peer's
// cached burst to the limit, and a cached burst that differs from the
// request's refills the bucket. Behaviour local is gubernator's default
// (BATCHING): the peer that receives a hit forwards it, batched, to the
// owner, which decides. GLOBAL: the receiving peer answers from its own
// cache at once and sends the hits to the owner asynchronously; the owner
// broadcasts its state back every GlobalSyncWait (100ms by default), so peers
// decide on stale state in between.
//
// gubernator is an API, not an HTTP gateway: the front is the reference
// service (identity, tiers, headers, the sink) with a limiter that asks
// gubernator. It sends Remaining and Limit as gubernator reports them and,
// on OVER_LIMIT, Retry-After = reset_time − now, which the README documents
// as "the time at which the rate limit will no longer return OVER_LIMIT";
// for a leaky bucket reset_time is when the bucket is full again. Several
// limits on a key are separate rate limits: each is hit whatever the others
// answer. Time is gubernator's millisecond clock.
//
// Two quirks of v2.13.0's leaky bucket (algorithms.go) show under load: the
// cap applies only when the whole part of Remaining exceeds burst, so the
// bucket can hold up to K + 0.999 tokens (token-bounds sees a remaining
// count no bucket of K reaches); and a hit that takes the last whole token
// sets Remaining to 0, throwing away the fraction toward the next one, so a
// key hammered above its rate is refused while a bucket of (K, r) would
// admit (under-admission).

// errNoGubernatorBuild is why a binary built without -tags gubernator
// cannot run the cluster; it wraps ErrUnavailable, so compare skips the
// column as it does an nginx that is not installed.
var errNoGubernatorBuild = fmt.Errorf("gateway gubernator: this rlverify was built without the gubernator cluster (go build -tags gubernator ./cmd/rlverify): %w", ErrUnavailable)

// gubernatorPeers is the size of the cluster.
const gubernatorPeers = 3

// gubernatorName names the rate limit of a tier's i-th limit.
func gubernatorName(i int) string { return "rlverify_" + strconv.Itoa(i) }

func translateGubernator(declared *policy.Policy, mode string) (*translation, error) {
	if mode != "global" && mode != "local" {
		return nil, fmt.Errorf("gateway gubernator: behaviour %q: want global or local", mode)
	}
	t, err := newTranslation(declared, "gubernator")
	if err != nil {
		return nil, err
	}
	for _, tl := range t.limits {
		ms := gubernatorDuration(tl.Limit)
		r := float64(tl.Limit.Capacity) * 1000 / float64(ms)
		if math.Abs(r-tl.Limit.R()) > 1e-9*tl.Limit.R() {
			t.deviate(fmt.Sprintf("limit %s refills at %s", tl.Limit.Name, policy.FormatRate(tl.Limit.R())),
				fmt.Sprintf("gubernator durations are whole milliseconds: duration=%dms leaks at %s", ms, policy.FormatRate(r)))
			setBucket(t.honestLimit(tl), tl.Limit.Capacity, r)
		}
	}
	t.deviate("the bucket holds at most K tokens",
		"the leaky bucket caps Remaining only when its whole part exceeds burst (algorithms.go:369, int64(b.Remaining) > b.Burst): it can hold up to K + 0.999 tokens")
	t.deviate("a request takes one token and leaves the rest",
		"a hit that takes the last whole token sets Remaining to 0 (algorithms.go:398), dropping the fraction already refilled toward the next one: under steady load it refills slower than r")
	if declared.Headers.RetryAfter {
		t.deviate("Retry-After is the wait until a request is admitted again",
			"the front advises reset_time − now, which for a leaky bucket is when the bucket is full again (up to K/r), not when the next hit fits (1/r)")
	}
	if mode == "global" {
		t.deviate("one quota per key across all instances",
			"with GLOBAL each peer answers from its own cache and the owner's state reaches it asynchronously (GlobalSyncWait, 100ms by default): a key spread over the peers is admitted up to once per peer before they hear of each other, and a broadcast can refill a peer's cache with hits the owner has not yet counted, so no per-peer bound holds either")
		for _, tl := range t.limits {
			t.honestLimit(tl).Scope = policy.ScopeInstance
		}
	}
	for _, tier := range declared.Tiers {
		if len(tier.Limits) > 1 {
			t.deviate(fmt.Sprintf("a request refused by one of tier %s's limits uses up none of them", tier.Name), "gubernator hits every rate limit of a request separately")
			break
		}
	}
	if t.honest.ClockQuantum.D() < time.Millisecond {
		t.honest.ClockQuantum = policy.Duration(time.Millisecond)
	}
	if err := t.finish(); err != nil {
		return nil, err
	}
	return t, nil
}

// gubernatorDuration is K/r in whole milliseconds (a validated policy's
// window is at least 1ms).
func gubernatorDuration(l policy.Limit) int64 {
	return max(int64(math.Round(float64(l.Capacity)/l.R()*1000)), 1)
}
