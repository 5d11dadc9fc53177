package policy

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDefaultAndSeedTiers(t *testing.T) {
	p := Default()
	free, ok := p.TierFor("free-abc")
	require.True(t, ok)
	require.Equal(t, "free", free.Name)
	l := free.Limits[0]
	require.Equal(t, int64(10), l.Capacity)
	require.InDelta(t, 5.0, l.R(), 1e-12)
	require.Equal(t, int64(10), l.Count)
	require.Equal(t, 2*time.Second, l.W())
	paid, _ := p.TierFor("paid-x")
	require.Equal(t, int64(100), paid.Limits[0].Capacity)
	def, ok := p.TierFor("someone")
	require.True(t, ok, "default tier applies")
	require.Equal(t, "free", def.Name)

	seed, err := Load("../policies/seed-tiers.yaml")
	require.NoError(t, err)
	f, _ := seed.Tier("free")
	require.InDelta(t, 100.0/60, f.Limits[0].R(), 1e-12)
	require.Equal(t, time.Minute, f.Limits[0].W())
	pd, _ := seed.Tier("paid")
	require.Equal(t, int64(10000), pd.Limits[0].Count)
	require.Equal(t, time.Minute, pd.Limits[0].W())
}

func TestParseRateAndDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
	}{{"5/s", 5}, {"100/min", 100.0 / 60}, {"10000/m", 10000.0 / 60}, {"3600/h", 1}, {"86400/day", 1}, {"2.5", 2.5}, {"10/2s", 5}} {
		got, err := ParseRate(tc.in)
		require.NoError(t, err, tc.in)
		require.InDelta(t, tc.want, got, 1e-12, tc.in)
	}
	for _, bad := range []string{"", "fast", "5/fortnight", "NaN", "x/s"} {
		_, err := ParseRate(bad)
		require.Error(t, err, bad)
	}
	d, err := ParseDuration("1.5")
	require.NoError(t, err)
	require.Equal(t, 1500*time.Millisecond, d)
	d, err = ParseDuration("1d")
	require.NoError(t, err)
	require.Equal(t, 24*time.Hour, d)
	for _, bad := range []string{"", "soon", "1e300", "-1d"} {
		_, err := ParseDuration(bad)
		require.Error(t, err, bad)
	}
	require.Equal(t, "100/min", FormatRate(100.0/60))
	require.Equal(t, "5/s", FormatRate(5))
	require.Equal(t, "2.5/s", FormatRate(2.5), "as declared, not 150/min")
	require.Equal(t, "12.25/s", FormatRate(12.25))
	require.Equal(t, "30/min", FormatRate(0.5))
}

func TestPolicyErrorsNameFileLineField(t *testing.T) {
	base := "name: p\ntiers:\n  - name: free\n    key_prefix: free-\n    limits:\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"no tiers", "name: p\n", "p.yaml:1: tiers: at least one tier"},
		{"both views", base + "      - capacity: 10\n        rate: 5/s\n        limit: 3\n        window: 1s\n", "p.yaml:6: tiers.0.limits.0: give capacity and rate, or limit and window"},
		{"negative capacity", base + "      - capacity: -1\n        rate: 5/s\n", "p.yaml:6: tiers.0.limits.0.capacity"},
		{"absurd capacity", base + "      - capacity: 100000000000\n        rate: 5/s\n", "tiers.0.limits.0.capacity"},
		{"missing rate", base + "      - capacity: 10\n", "p.yaml:6: tiers.0.limits.0.rate: missing: a bucket needs its refill rate (rate: 0 declares a one-off quota that never refills)"},
		{"bad algorithm", base + "      - algorithm: leaky\n        capacity: 1\n        rate: 1\n", "p.yaml:6: tiers.0.limits.0.algorithm: unknown algorithm \"leaky\""},
		{"tiny window", base + "      - limit: 5\n        window: 1ns\n", "tiers.0.limits.0.window"},
		{"unknown field", base + "      - capacity: 1\n        rate: 1\n        burst: 3\n", `p.yaml:8: unknown field "burst"`},
		{"wrong type", base + "      - capacity: many\n        rate: 1\n", "p.yaml:6: cannot unmarshal a string `many` into int64"},
		{"bad default", base + "      - capacity: 1\n        rate: 1\ndefault_tier: gold\n", "p.yaml:8: default_tier"},
		{"bad mode", base + "      - capacity: 1\n        rate: 1\nfailure:\n  mode: maybe\n", "p.yaml:9: failure.mode"},
		{"dup tier", "name: p\ntiers:\n  - name: a\n    limits: [{capacity: 1, rate: 1}]\n  - name: a\n    limits: [{capacity: 1, rate: 1}]\n", "p.yaml:5: tiers.1.name"},
		{"no limits", "name: p\ntiers:\n  - name: a\n", "tiers.0.limits"},
		{"bad counts", base + "      - capacity: 1\n        rate: 1\n        counts: refused\n", "p.yaml:8: tiers.0.limits.0.counts: \"refused\": want admitted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(tc.yaml))
			require.Error(t, err)
			require.True(t, strings.Contains(err.Error(), tc.want), "got %q want %q", err, tc.want)
		})
	}
}

func TestCounterAnchoredAtFirstCountingAll(t *testing.T) {
	p, err := Parse("p.yaml", []byte("name: p\ntiers:\n  - name: free\n    limits:\n      - algorithm: sliding-counter\n        limit: 10\n        window: 2s\n        anchor: first\n        counts: all\n"))
	require.NoError(t, err)
	l := p.Tiers[0].Limits[0]
	require.Equal(t, AnchorFirst, l.Anchor)
	require.True(t, l.CountsRejected())
	require.False(t, Default().Tiers[0].Limits[0].CountsRejected(), "by default refused requests use up nothing")
}

func TestWithAlgorithmKeepsParametersAndRevalidates(t *testing.T) {
	p := Default().WithAlgorithm(SlidingLog)
	l := p.Tiers[0].Limits[0]
	require.Equal(t, SlidingLog, l.Algorithm)
	require.Equal(t, int64(10), l.Count)
	require.Equal(t, 2*time.Second, l.W())
	require.NoError(t, p.Validate(), "a normalized policy validates again")
	require.Equal(t, TokenBucket, Default().Tiers[0].Limits[0].Algorithm, "the original is untouched")
}

func TestEnvelope(t *testing.T) {
	l := Default().Tiers[0].Limits[0]
	require.InDelta(t, 10+5*0.5, l.Envelope(500*time.Millisecond), 1e-9)
	require.Equal(t, "rl:{free:k}:api:v1:0", Default().LimitKey(&Default().Tiers[0], "k", 0))
}

func TestShippedPoliciesLoad(t *testing.T) {
	entries, err := os.ReadDir("../policies")
	require.NoError(t, err)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".yaml") {
			continue // policies.go embeds them
		}
		_, err := Load("../policies/" + e.Name())
		require.NoError(t, err, e.Name())
	}
}

func TestConservativeHoldsEveryTierToTheSmallest(t *testing.T) {
	p := Default()
	require.Equal(t, "free", p.RulesFallback)
	c := p.Conservative()
	paid, _ := c.Tier("paid")
	require.Equal(t, int64(10), paid.Limits[0].Capacity)
	require.Equal(t, "v1-fallback", c.Version)
	orig, _ := p.Tier("paid")
	require.Equal(t, int64(100), orig.Limits[0].Capacity, "the original is untouched")
	_, err := Parse("p.yaml", []byte("name: p\ntiers:\n  - name: a\n    limits: [{capacity: 1, rate: 1}]\nrules_fallback: gold\n"))
	require.ErrorContains(t, err, "rules_fallback")
}

// Exempt key classes are never limited: the longest prefix decides, and a
// class that would swallow every key or clash with a tier is refused.
func TestExemptClasses(t *testing.T) {
	base := "name: p\ntiers:\n  - name: free\n    key_prefix: \"\"\n    limits: [{capacity: 1, rate: 30/min}]\n  - name: paid\n    key_prefix: paid-\n    limits: [{capacity: 5, rate: 1/s}]\ndefault_tier: free\n"
	p, err := Parse("p.yaml", []byte(base+"exempt:\n  - name: internal\n    key_prefix: paid-int-\n"))
	require.NoError(t, err)
	for _, tc := range []struct{ key, tier, exempt string }{
		{"paid-int-1", "", "internal"},
		{"paid-1", "paid", ""},
		{"anyone", "free", ""},
	} {
		tier, ok := p.TierFor(tc.key)
		e, isExempt := p.ExemptFor(tc.key)
		require.Equal(t, tc.tier != "", ok, tc.key)
		require.Equal(t, tc.exempt != "", isExempt, tc.key)
		if ok {
			require.Equal(t, tc.tier, tier.Name, tc.key)
		}
		if isExempt {
			require.Equal(t, tc.exempt, e.Name, tc.key)
		}
	}
	require.NoError(t, p.Validate(), "validates again")
	require.Equal(t, p.Exempt, p.Clone().Exempt)

	for _, tc := range []struct{ yaml, want string }{
		{"exempt:\n  - name: internal\n", "p.yaml:11: exempt.0.key_prefix: an exempt class needs a key_prefix"},
		{"exempt:\n  - name: paid\n    key_prefix: x-\n", "exempt.0.name: \"paid\" is already the name"},
		{"exempt:\n  - name: internal\n    key_prefix: paid-\n", "exempt.0.key_prefix: \"paid-\" is also the key_prefix of paid"},
		{"exempt:\n  - name: bad name\n    key_prefix: x-\n", "exempt.0.name"},
	} {
		_, err := Parse("p.yaml", []byte(base+tc.yaml))
		require.ErrorContains(t, err, tc.want)
	}
	_, err = Parse("p.yaml", []byte(strings.Replace(base, "default_tier: free", "default_tier: internal", 1)+"exempt:\n  - name: internal\n    key_prefix: int-\n"))
	require.ErrorContains(t, err, "default_tier: \"internal\" is an exempt class")
}

// Tier shapes other than the usual: K = 1, periods other than a second.
func TestTierShapes(t *testing.T) {
	p, err := Parse("p.yaml", []byte("name: p\ntiers:\n  - name: one\n    limits:\n      - {capacity: 1, rate: 1/min}\n      - {algorithm: fixed-window, limit: 1, window: 1h}\n      - {algorithm: sliding-log, limit: 7, window: 1500ms}\n"))
	require.NoError(t, err)
	ls := p.Tiers[0].Limits
	require.Equal(t, int64(1), ls[0].Capacity)
	require.Equal(t, time.Minute, ls[0].W())
	require.InDelta(t, 1.0/3600, ls[1].R(), 1e-12)
	require.InDelta(t, 7/1.5, ls[2].R(), 1e-12)
	require.InDelta(t, 1+0.5, ls[0].Envelope(30*time.Second), 1e-9)
}
