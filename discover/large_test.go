package discover_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/discover"
	"github.com/rlverify/rlverify/internal/testsvc"
	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policy"
)

// TestDiscoverLargeLimits: a limit of 10,000 per minute within a budget the
// user sets. The short case (CI) gives 5 s, far too little: discovery must
// stop within it and say what it could not pin down, never guess. The long
// cases (RLVERIFY_DISCOVER_LARGE=1, about four minutes and 200,000 requests
// on loopback) give enough budget and must recover every number within the
// range they state, or leave it open with the reason.
func TestDiscoverLargeLimits(t *testing.T) {
	windowed := func(t *testing.T) discover.Options {
		w := mustT[*testsvc.Windowed](t)(testsvc.NewWindowed(testsvc.WindowedConfig{Limit: 10_000, Window: time.Minute}))
		return discover.Options{Targets: serve(t, w, "/search/x"), Identity: policy.Identity{In: policy.InQuery, Name: "api_key"}}
	}
	t.Run("budget too small: stops in time and says what is open", func(t *testing.T) {
		o := windowed(t)
		o.Budget = discover.MinBudget
		start := time.Now()
		res, err := discover.Run(context.Background(), o)
		require.NoError(t, err)
		// Generous: a busy runner may finish a probe late, never a probe
		// begun past the budget (its MaxDuration is the budget's end + 5s).
		assert.Less(t, time.Since(start), o.Budget+10*time.Second, "the budget bounds the discovery")
		require.Len(t, res.Tiers, 1)
		c := res.Tiers[0].Capacity
		assert.False(t, c.Pinned, "N cannot be pinned in 5s: %s", c.Evidence)
		assert.LessOrEqual(t, c.Low, 10_000.0, "the bound stated holds the truth")
		assert.Contains(t, c.Evidence, "raise Budget")
		y, _, err := discover.Policy(res)
		require.NoError(t, err)
		assert.Contains(t, string(y), "NOT PINNED", "the policy written says what is open")
	})
	if os.Getenv("RLVERIFY_DISCOVER_LARGE") == "" {
		t.Log("the long cases need RLVERIFY_DISCOVER_LARGE=1 (about four minutes)")
		return
	}
	long := []struct {
		name   string
		truth  truth
		budget time.Duration
		start  func(t *testing.T) discover.Options
	}{
		{"nginx limit_req 10000r/m burst=10000 nodelay", truth{family: policy.TokenBucket, k: 10_000, r: 10_000.0 / 60}, 2 * time.Minute, func(t *testing.T) discover.Options {
			return discover.Options{Targets: gatewayService(t, catalog.Gateway{Kind: catalog.NGINX, Mode: "nodelay"}, `
name: nginx-large
tiers:
  - name: free
    key_prefix: ""
    limits: [{algorithm: token-bucket, capacity: 10000, rate: 10000/min}]
default_tier: free
headers: {retry_after: true, ratelimit: none, x_ratelimit: false}
`)}
		}},
		{"testsvc windowed 10000 per minute", truth{family: policy.FixedWindow, k: 10_000, w: 60, anchor: policy.AnchorFirst}, 3 * time.Minute, windowed},
	}
	for _, c := range long {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			o := c.start(t)
			o.Budget = c.budget
			o.Log = t.Logf
			res, err := discover.Run(context.Background(), o)
			require.NoError(t, err)
			require.Len(t, res.Tiers, 1)
			tier := res.Tiers[0]
			y, _, err := discover.Policy(res)
			require.NoError(t, err)
			t.Logf("%s in %s, %d requests: %s\n%s", c.name, res.Elapsed.Round(time.Second), res.Requests, discover.Describe(tier), y)
			assert.Less(t, res.Elapsed, c.budget+30*time.Second, "the budget bounds the discovery")
			// Every number pinned holds the truth; what is not pinned is said.
			for _, n := range []struct {
				what  string
				truth float64
				n     discover.Number
			}{{"K/N", c.truth.k, tier.Capacity}, {"r", c.truth.r, tier.Rate}, {"W", c.truth.w, tier.Window}} {
				if n.truth == 0 || n.n.Evidence == "" {
					continue
				}
				if n.n.Pinned {
					assert.True(t, within(n.truth, n.n), "%s %s does not hold %g: %s", n.what, n.n.Range(), n.truth, n.n.Evidence)
				} else {
					assert.Contains(t, string(y), "NOT PINNED", "%s open, and the file says so", n.what)
				}
			}
			if tier.Family != "" && tier.Family != c.truth.family {
				assert.True(t, strings.Contains(tier.FamilyEvidence, "not pinned") || strings.Contains(strings.Join(tier.Notes, " "), "not pinned"),
					"family %s claimed for %s without saying it is not pinned", tier.Family, c.truth.family)
			}
		})
	}
}
