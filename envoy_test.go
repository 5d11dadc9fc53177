package rlverify_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/envs/redisproc"
	"github.com/rlverify/rlverify/internal/envtest"
	"github.com/rlverify/rlverify/internal/faultproxy"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/reports"
)

// envoyConfig is envoyproxy/ratelimit's configuration of the tests: every
// tenant of the free plan gets 5 calls per second, of the paid plan 20.
const envoyConfig = `domain: rlverify
descriptors:
  - key: tenant
    descriptors:
      - key: plan
        value: free
        rate_limit:
          unit: second
          requests_per_unit: 5
      - key: plan
        value: paid
        rate_limit:
          unit: second
          requests_per_unit: 20
`

// envoyPolicy is the policy declared for envoyConfig.
const envoyPolicy = `name: envoy-ratelimit
tiers:
  - name: free
    key_prefix: "free-"
    limits:
      - algorithm: fixed-window
        limit: 5
        window: 1s
  - name: paid
    key_prefix: "paid-"
    limits:
      - algorithm: fixed-window
        limit: 20
        window: 1s
default_tier: free
headers:
  retry_after: false
  x_ratelimit: true
  x_ratelimit_reset: relative
# Envoy's rate-limit filter sends no Retry-After with its 429.
checks_off: [retry-after]
ratelimit_service:
  domain: rlverify
  descriptors:
    - {key: tenant, value: "{key}"}
    - {key: plan, value: "{tier}"}
`

// envoyPolicyAs is envoyPolicy with its free tier's limit declared as
// algorithm alg (and the service section replaced when svc is set).
func envoyPolicyAs(t *testing.T, alg, svc string) *policy.Policy {
	t.Helper()
	text := strings.Replace(envoyPolicy, "algorithm: fixed-window\n        limit: 5", "algorithm: "+alg+"\n        limit: 5", 1)
	if svc != "" {
		text = text[:strings.Index(text, "ratelimit_service:")] + svc
	}
	pol, err := policy.Parse("envoy-policy.yaml", []byte(text))
	require.NoError(t, err)
	return pol
}

func auditText(t *testing.T, a *reports.Audit) string {
	t.Helper()
	var b strings.Builder
	require.NoError(t, reports.RenderAudit(&b, "text", a, false))
	return b.String()
}

func property(a *reports.Audit, name string) reports.Property {
	for _, p := range a.Properties {
		if p.Name == name {
			return p
		}
	}
	return reports.Property{}
}

// TestEnvoyRateLimitAudit: envoyproxy/ratelimit, three instances on one
// Redis, configured as declared, passes an audit with a verdict per
// property: the calls spread over the instances stay within one quota.
func TestEnvoyRateLimitAudit(t *testing.T) {
	rl := envtest.StartEnvoyRateLimit(t, envoyConfig, 3)
	a, err := rlverify.Audit(context.Background(), rlverify.AuditOptions{
		Attack: rlverify.AttackOptions{Targets: rl.Targets, Policy: envoyPolicyAs(t, "fixed-window", ""), MaxDuration: time.Minute},
		Plans:  []string{"concurrent-burst", "multi-instance", "tiers"},
	})
	require.NoError(t, err)
	text := auditText(t, a)
	require.Equal(t, checks.Pass, a.Verdict, text)
	for _, name := range []string{"oversell", "under-admission", "token-bounds", "headers", "instances", "isolation"} {
		assert.Equal(t, checks.Pass, property(a, name).Verdict, "%s\n%s", name, text)
	}
	assert.Equal(t, checks.Skip, property(a, "retry-after").Verdict, "turned off, and said so")
}

// TestEnvoyRateLimitFixedWindows: "5 per second" is 5 per aligned second
// to envoyproxy/ratelimit. A boundary burst shows it: declared as the fixed
// window it is, the run passes; declared as a rolling second (a sliding
// log, what a reader of the limit may assume), the same burst is an
// oversell, with the two windows' admissions as evidence.
func TestEnvoyRateLimitFixedWindows(t *testing.T) {
	rl := envtest.StartEnvoyRateLimit(t, envoyConfig, 1)
	plan, err := attacks.Load("boundary-burst")
	require.NoError(t, err)
	for _, c := range []struct {
		alg  string
		want checks.Verdict
	}{
		{"fixed-window", checks.Pass},
		{"sliding-log", checks.Fail},
	} {
		t.Run(c.alg, func(t *testing.T) {
			out, err := rlverify.Attack(context.Background(), rlverify.AttackOptions{
				Targets: rl.Targets, Plan: plan, Policy: envoyPolicyAs(t, c.alg, ""), MaxDuration: time.Minute})
			require.NoError(t, err)
			r := result(out.Document, "oversell")
			require.Equal(t, c.want, r.Verdict, "%s", r.Summary)
			if c.want == checks.Fail {
				require.NotEmpty(t, r.Evidence)
			}
		})
	}
}

func result(d *reports.Document, name string) checks.Result {
	for _, r := range d.Checks {
		if r.Name == name {
			return r
		}
	}
	return checks.Result{}
}

// TestEnvoyRateLimitStoreOutage: envoyproxy/ratelimit's Redis broken
// through the run's store proxy (--store-proxy). Without its store the
// service answers gRPC errors, not refusals (whether a request then passes
// is Envoy's failure_mode_deny): declared fail-closed, fail-mode fails with
// those errors as evidence, and after the store is back the limits hold
// again.
func TestEnvoyRateLimitStoreOutage(t *testing.T) {
	// envoyproxy/ratelimit will not start without its Redis: a proxy of
	// the test's holds the address while it starts, then gives it to the
	// run's store proxy. One pooled connection, so the service reconnects
	// at once (the probe retries the call that finds it closed).
	rs, err := redisproc.Start()
	if err != nil {
		envtest.SkipOrFail(t, "%v", err)
	}
	t.Cleanup(rs.Stop)
	hold, err := faultproxy.New(rs.Addr)
	require.NoError(t, err)
	listen := hold.Addr()
	rl := envtest.StartEnvoyRateLimit(t, envoyConfig, 1, "REDIS_URL="+listen, "REDIS_TIMEOUT=200ms", "REDIS_POOL_SIZE=1")
	require.NoError(t, hold.Close())
	plan, err := attacks.Load("store-outage")
	require.NoError(t, err)
	pol := envoyPolicyAs(t, "fixed-window", "")
	pol.Failure.Mode, pol.Failure.Undeclared = policy.FailClosed, false
	out, err := rlverify.Attack(context.Background(), rlverify.AttackOptions{
		Targets: rl.Targets, Plan: plan, Policy: pol, MaxDuration: time.Minute, Timeout: time.Second,
		Environment: envs.External{StoreProxies: []envs.ProxySpec{{Listen: listen, Upstream: rs.Addr}}}})
	require.NoError(t, err)
	var b strings.Builder
	require.NoError(t, reports.Text{}.Render(&b, out.Document))
	fm := result(out.Document, "fail-mode")
	require.Equal(t, checks.Fail, fm.Verdict, b.String())
	require.Positive(t, fm.Figures["fault1_errors"], "the outage took effect: errors, %s", b.String())
	assert.Zero(t, fm.Figures["fault1_rejected"], "no refusal while the store was down")
	assert.Equal(t, checks.Pass, result(out.Document, "oversell").Verdict, "enforcement resumed: %s", b.String())
	assert.Contains(t, b.String(), "gRPC UNKNOWN", "the service's own error is the evidence")
}

// TestEnvoyRateLimitLocalCache: envoyproxy/ratelimit with a local cache
// (LOCAL_CACHE_SIZE_IN_BYTES) on a per-second limit. What it really does:
// a key found over its limit is remembered in the instance's memory under
// the window's own cache key, and the rest of that window's calls for it
// are refused from there without reaching Redis (Redis counts fewer
// INCRBY than calls were made); the next window's key is another, so no
// window is refused longer than it should be. The decisions are those of
// the same fixed windows without a cache: the verdicts pass as declared,
// and only the store's command count tells the two apart.
func TestEnvoyRateLimitLocalCache(t *testing.T) {
	plan, err := attacks.Parse("steady.yaml", []byte(`name: steady
phases:
  - name: over
    kind: rate
    key: free-steady
    rate: 25/s
    duration: 3s
`))
	require.NoError(t, err)
	for _, c := range []struct {
		name  string
		extra []string
	}{
		{"no cache", nil},
		{"local cache", []string{"LOCAL_CACHE_SIZE_IN_BYTES=1048576"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rl := envtest.StartEnvoyRateLimit(t, envoyConfig, 1, c.extra...)
			out, err := rlverify.Attack(context.Background(), rlverify.AttackOptions{
				Targets: rl.Targets, Plan: plan, Policy: envoyPolicyAs(t, "fixed-window", ""), MaxDuration: time.Minute})
			require.NoError(t, err)
			var b strings.Builder
			require.NoError(t, reports.Text{}.Render(&b, out.Document))
			for _, check := range []string{"oversell", "under-admission", "token-bounds", "headers"} {
				assert.Equal(t, checks.Pass, result(out.Document, check).Verdict, "%s: %s", check, b.String())
			}
			d := out.Document
			require.Positive(t, d.Stats.Rejected, "the key went over its limit: %s", b.String())
			stats, err := redisproc.Do(rl.Redis.Addr, "INFO", "commandstats")
			require.NoError(t, err)
			incr := commandCalls(t, stats, "incrby")
			calls := d.Stats.Requests + 2 // the probe's call per tier
			t.Logf("%d calls (%d admitted, %d refused), %d INCRBY in Redis", calls, d.Stats.Admitted, d.Stats.Rejected, incr)
			if c.extra == nil {
				assert.EqualValues(t, calls, incr, "every call counts in Redis, refused ones too")
				return
			}
			// The calls Redis did not see were answered from the cache:
			// at least the refusals after the first of each window, less
			// the ones in flight while the cache was being filled.
			assert.Less(t, incr, calls-d.Stats.Rejected/2, "refusals answered from the local cache, Redis untouched (%d INCRBY for %d calls, %d refused)", incr, calls, d.Stats.Rejected)
		})
	}
}

// commandCalls reads calls=N of cmdstat_NAME from INFO commandstats.
func commandCalls(t *testing.T, info, name string) int64 {
	t.Helper()
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+name+":calls=")
		if ok {
			n, _, _ := strings.Cut(rest, ",")
			v, err := strconv.ParseInt(n, 10, 64)
			require.NoError(t, err, line)
			return v
		}
	}
	t.Fatalf("no cmdstat_%s in %q", name, info)
	return 0
}
