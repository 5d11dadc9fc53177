// Package testsvc holds rate-limited HTTP services that rlverify did not
// write: test services, deliberately unlike the reference service, for
// judging rlverify itself the way a user's service is judged. It is library
// code used only by tests and docs (and by its command testsvc, which runs a
// service as a separate process); nothing in the product depends on it.
//
// Its limiting logic is its own: testsvc must not import targets, limiters,
// attacks or checks, and imports policy only in tests (to check that each
// service's honest policy parses and matches its defaults).
//
// # Services
//
// Each is an http.Handler built from a Config (NewOrders, NewWindowed,
// NewSessions, NewRedisBucket) with an injectable clock (Common.Now), and
// each has an honest policy, policies/NAME.yaml (PolicyYAML):
//
//   - orders: POST /v1/orders only, a JSON body with "sku", Authorization:
//     Bearer KEY from an allowlist (key → tier), a token bucket per key and
//     tier (rates such as 2.5/s), 201/429, the split RateLimit-Limit,
//     -Remaining, -Reset headers and Retry-After in delay-seconds.
//   - windowed: GET under /search/, ?api_key=, a fixed window anchored at
//     the key's first request, the dictionary RateLimit header and
//     X-RateLimit-* with the reset as Unix time.
//   - sessions: any path under /app/, cookie session=KEY (case-insensitive),
//     a sliding log, the structured RateLimit and RateLimit-Policy headers,
//     Retry-After as an HTTP-date, and an optional conservative guard.
//   - redisbucket: any path, X-Tenant-Key, a token bucket (GCRA) in Redis by
//     its own Lua script, a store timeout, fail closed (503 + Retry-After)
//     or open; X-RateLimit-* with a relative reset.
//   - metered: any path, X-Client-Id, weighted requests: each asks for
//     X-Request-Units tokens (0 … 32, default 1; 0 a peek) from a
//     golang.org/x/time/rate Limiter (AllowN), or from a one-off quota (a
//     zero Limit); its honest policy is built from its config
//     (MeteredPolicyYAML), and its defects are config fields (IgnoreCost,
//     ChargePeeks, Refills, NoRetryAfter) rather than quirks.
//
// Two variants change what the honest policy declares (HonestPolicyYAML,
// testsvc --print-policy): Common.ServeLast serves and limits a repeated
// identity as its last occurrence (tenant_occurrence and limiter_occurrence
// last), and the windowed service's skip list (WindowedConfig.Skip, --skip)
// is never limited (an exempt class).
//
// Several instances share state when they are built on one Store (one Redis
// and Namespace for redisbucket) and keep their own otherwise. Every
// instance reports to an Upstream, shared by the instances of a deployment,
// which counts what was forwarded per key and serves it at UpstreamPath as
// {"forwarded": {"total": N, "by_key": {"k1": n1}}} (TotalJSONPath,
// ByKeyJSONPath) and at MetricsPath as the Prometheus counter
// upstream_forwarded_total{api_key="k1"}, beside the unrelated
// gateway_responses_total{code="201"}. Serve and ServeN run handlers on
// free loopback ports for tests.
//
// # Quirks
//
// Each quirk (Quirks, --quirk NAME[=VALUE]) breaks exactly one property of
// the service's honest policy; the check named must catch it, and every
// other check must stay quiet. The upstream counters always name the caller
// as the honest policy does (the first identity, folded only where
// declared), whatever key the quirky limiter used.
//
//	| quirk                | what it does                                                        | property it breaks                              | check that must catch it  | services                      |
//	|----------------------|---------------------------------------------------------------------|-------------------------------------------------|---------------------------|-------------------------------|
//	| cut-keys=N           | keys the limiter on the key's first N bytes (a fixed-width column)  | isolation: long keys differing after N collide  | isolation                 | all                           |
//	| last-identity-wins   | a repeated identity counts its last occurrence (policy: first)      | bypass: a second identity buys a fresh quota    | bypass                    | all                           |
//	| first-identity-wins  | with ServeLast: the limiter counts the first occurrence (policy: last) | bypass: a second identity buys a fresh quota    | bypass                    | all (ServeLast)               |
//	| fold-case            | folds the case of keys the policy calls case-sensitive              | isolation: Key and key share a quota            | isolation                 | orders, windowed, redisbucket |
//	| no-fold-case         | keeps the case of keys the policy calls case-insensitive            | bypass: KEY buys more than key's quota          | bypass                    | sessions                      |
//	| trust-xff            | adds X-Forwarded-For, when present, to the limiter key              | bypass: each forged address is a fresh quota    | bypass                    | all                           |
//	| deduct-on-reject     | refused requests consume too (a bucket goes into debt)              | under-admission: a key starves itself           | under-admission           | orders, sessions, redisbucket |
//	| shared-prefix=N      | keys sharing their first N characters share one quota               | isolation: similar tenant keys collide          | isolation                 | all                           |
//	| racy[=D]             | reads the state, pauses D (default 2ms), writes it: not atomic      | oversell under concurrency                      | oversell                  | all                           |
//	| forward-rejected     | refused requests are forwarded upstream too                         | downstream: the upstream gets more than allowed | downstream                | all                           |
//	| faster=F             | refills F× faster than declared (windows F× shorter), e.g. 1.1      | oversell in a sustained phase; the real rate    | oversell, audit precision | all                           |
//	| capacity+1           | holds K+1 tokens (N+1 per window) where K is declared               | oversell by a burst of K+1; the real capacity   | oversell, audit precision | all                           |
//	| retry-after-down     | rounds Retry-After down instead of up                               | retry-after: advice shorter than the wait       | retry-after               | all                           |
//	| remaining-off-by-one | reports one more remaining than there is                            | headers: remaining disagrees with admissions    | headers, token-bounds     | all                           |
//	| fail-open            | admits while Redis fails although failing closed is declared        | fail-mode                                       | fail-mode                 | redisbucket                   |
//	| limit-skipped        | limits the skip list's keys (WindowedConfig.Skip) like any other    | exempt: a key declared exempt is refused        | under-admission           | windowed (with Skip)          |
//	| per-path             | one window per path where the policy shares one under /search/     | bypass: another path under the prefix is fresh  | bypass                    | windowed                      |
//	| extend-on-hit        | every request pushes the window's close to W after it (EXPIRE/hit) | under-admission: a first-anchored edge is late  | under-admission           | windowed                      |
package testsvc
