package testsvc

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/policy"
)

// TestHonestPoliciesParseAndMatchTheDefaults loads each honest policy with
// policy.Load and checks that it declares what the service does with its
// defaults.
func TestHonestPoliciesParseAndMatchTheDefaults(t *testing.T) {
	load := func(t *testing.T, name string) *policy.Policy {
		p, err := policy.Load(filepath.Join("policies", name+".yaml"))
		require.NoError(t, err)
		embedded, err := PolicyYAML(name)
		require.NoError(t, err)
		onDisk, err := os.ReadFile(filepath.Join("policies", name+".yaml"))
		require.NoError(t, err)
		assert.Equal(t, onDisk, embedded)
		return p
	}
	t.Run("orders", func(t *testing.T) {
		p := load(t, "orders")
		tiers := DefaultOrdersTiers()
		require.Len(t, p.Tiers, len(tiers))
		for _, tier := range p.Tiers {
			b, ok := tiers[tier.Name]
			require.True(t, ok, tier.Name)
			require.Len(t, tier.Limits, 1)
			l := tier.Limits[0]
			assert.Equal(t, policy.TokenBucket, l.Algorithm)
			assert.Equal(t, b.Capacity, l.Capacity)
			assert.InDelta(t, b.Rate, l.R(), 1e-12)
		}
		perTier := map[string]int{}
		for key, tier := range DefaultOrdersKeys() {
			perTier[tier]++
			got, ok := p.TierFor(key)
			require.True(t, ok, key)
			assert.Equal(t, tier, got.Name, "the allowlist and the policy put %s in one tier", key)
		}
		assert.Equal(t, map[string]int{"free": 24, "paid": 8}, perTier)
		_, ok := p.TierFor("stranger")
		assert.False(t, ok, "unknown keys have no tier (401)")
		assert.Equal(t, policy.InBearer, p.Identity.In)
		assert.False(t, p.Identity.CaseFolded())
		assert.Equal(t, policy.RepeatedFirst, p.Identity.Repeated)
		assert.Equal(t, policy.RateLimitSplit, p.Headers.RateLimit)
		assert.True(t, p.Headers.RetryAfter)
		assert.False(t, p.Headers.XRateLimit)
		assert.Equal(t, "201", p.Statuses.Admitted.String())
		assert.Equal(t, "429", p.Statuses.Rejected.String())
	})
	t.Run("windowed", func(t *testing.T) {
		p := load(t, "windowed")
		require.Len(t, p.Tiers, 1)
		l := p.Tiers[0].Limits[0]
		assert.True(t, l.AnchoredAtFirst())
		assert.Equal(t, int64(DefaultWindowedLimit), l.Count)
		assert.Equal(t, DefaultWindowedWindow, l.W())
		assert.Equal(t, policy.InQuery, p.Identity.In)
		assert.Equal(t, WindowedParam, p.Identity.Name)
		assert.False(t, p.Identity.Trimmed())
		assert.False(t, p.Identity.CaseFolded())
		assert.Equal(t, policy.RateLimitDictionary, p.Headers.RateLimit)
		assert.True(t, p.Headers.XRateLimit)
		assert.Equal(t, "epoch", p.Headers.XReset)
	})
	t.Run("sessions", func(t *testing.T) {
		p := load(t, "sessions")
		l := p.Tiers[0].Limits[0]
		assert.Equal(t, policy.SlidingLog, l.Algorithm)
		assert.Equal(t, int64(DefaultSessionsLimit), l.Count)
		assert.Equal(t, DefaultSessionsWindow, l.W())
		assert.Equal(t, policy.InCookie, p.Identity.In)
		assert.Equal(t, SessionCookie, p.Identity.Name)
		assert.True(t, p.Identity.CaseFolded())
		assert.True(t, p.Identity.Trimmed())
		assert.Equal(t, policy.RateLimitStructured, p.Headers.RateLimit)
		assert.Equal(t, SessionsPolicyName, p.Tiers[0].Name)
	})
	for name, mode := range map[string]string{"redisbucket": FailClosed, "redisbucket-open": FailOpen} {
		t.Run(name, func(t *testing.T) {
			p := load(t, name)
			l := p.Tiers[0].Limits[0]
			assert.Equal(t, policy.TokenBucket, l.Algorithm)
			assert.Equal(t, DefaultRedisBucket().Capacity, l.Capacity)
			assert.InDelta(t, DefaultRedisBucket().Rate, l.R(), 1e-12)
			assert.Equal(t, mode, p.Failure.Mode)
			assert.Equal(t, DefaultRedisStoreTimeout, p.Failure.StoreTimeout.D())
			assert.Equal(t, TenantHeader, p.Identity.Name)
			assert.False(t, p.Identity.CaseFolded())
			assert.Equal(t, policy.RateLimitNone, p.Headers.RateLimit)
			assert.Equal(t, "relative", p.Headers.XReset)
			assert.Equal(t, policy.ClassRejected, p.Statuses.Classify(http.StatusServiceUnavailable, true), "503 with Retry-After is a refusal")
		})
	}
}

func TestPolicyYAMLNames(t *testing.T) {
	for _, name := range Services {
		_, err := PolicyYAML(name)
		assert.NoError(t, err, name)
	}
	for _, bad := range []string{"orders-keys", "../doc", "nginx", "orders.yaml"} {
		_, err := PolicyYAML(bad)
		assert.Error(t, err, bad)
	}
}

// A service built serving the last occurrence, or with a skip list,
// declares so in its honest policy.
func TestHonestPolicyOfAVariant(t *testing.T) {
	for _, name := range []string{ServiceOrders, ServiceWindowed, ServiceSessions, ServiceRedisBucket} {
		b, err := HonestPolicyYAML(name, Variant{ServeLast: true})
		require.NoError(t, err, name)
		p, err := policy.Parse(name+".yaml", b)
		require.NoError(t, err, name)
		assert.Equal(t, policy.RepeatedLast, p.Identity.Repeated, name)
		assert.Equal(t, policy.RepeatedLast, p.Identity.Tenant(), name)
		assert.False(t, p.Identity.Mismatched(), name)
	}
	b, err := HonestPolicyYAML(ServiceWindowed, Variant{Skip: "int-"})
	require.NoError(t, err)
	p, err := policy.Parse("windowed.yaml", b)
	require.NoError(t, err)
	e, ok := p.ExemptFor("int-7")
	require.True(t, ok)
	assert.Equal(t, "skipped", e.Name)
	_, ok = p.TierFor("int-7")
	assert.False(t, ok, "an exempt key has no tier")
	_, err = HonestPolicyYAML(ServiceOrders, Variant{Skip: "int-"})
	require.ErrorContains(t, err, "only the windowed service has a skip list")
}
