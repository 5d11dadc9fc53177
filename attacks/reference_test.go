package attacks

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/service"
)

// TestReferenceServicePassesItsHeaderChecks runs the reference service under
// each RateLimit generation (and each X-RateLimit-Reset form) with tiers
// named at the edges of the names a policy allows (policy.CheckName: a tier
// name with quotes, spaces or non-ASCII letters is refused at load; the
// headers package's own tests and FuzzNameRoundTrip cover those), records what it sent
// through the engine, and judges it with the checks: the headers the
// service writes are the headers the checks read.
func TestReferenceServicePassesItsHeaderChecks(t *testing.T) {
	for _, tc := range []struct {
		gen        policy.RateLimitHeaders
		xreset     string
		free, paid string
	}{
		{policy.RateLimitStructured, "relative", "a.b_c-1", "Z9"},
		{policy.RateLimitDictionary, "epoch", "7", "plain"},
		{policy.RateLimitSplit, "date", "100", "p.22"},
	} {
		t.Run(string(tc.gen), func(t *testing.T) {
			y := fmt.Sprintf(`name: names
tiers:
  - name: %s
    key_prefix: free-
    limits:
      - capacity: 5
        rate: 5/s
  - name: %s
    key_prefix: paid-
    limits:
      - capacity: 20
        rate: 20/s
headers:
  retry_after: true
  ratelimit: %s
  x_ratelimit: true
  x_ratelimit_reset: %s
`, strconv.Quote(tc.free), strconv.Quote(tc.paid), tc.gen, tc.xreset)
			p, err := policy.Parse("names.yaml", []byte(y))
			require.NoError(t, err)
			entry, err := catalog.Lookup("token-bucket", catalog.Memory)
			require.NoError(t, err)
			lims, err := service.BuildLimiters(p, entry, catalog.Env{}, nil)
			require.NoError(t, err)
			srv := httptest.NewServer(&service.Service{Policy: p, Limiters: lims})
			t.Cleanup(srv.Close)
			h, _, err := runPlan(t, context.Background(), `name: h
phases:
  - kind: burst
    key: free-a
    requests: 8
  - kind: burst
    key: paid-b
    requests: 25
`, Options{Instances: []string{srv.URL}, Policy: p})
			require.NoError(t, err)
			require.Len(t, h.Events, 33)
			rejected := 0
			for _, e := range h.Events {
				if e.Status == 429 {
					rejected++
				}
			}
			require.Positive(t, rejected, "both bursts exceed their bucket")
			for _, r := range checks.Run(h, p, checks.Options{Only: []string{"headers", "token-bounds", "isolation"}}) {
				require.NotEqual(t, checks.Fail, r.Verdict, "%s: %s %+v", r.Name, r.Summary, r.Evidence)
				if r.Name == "headers" {
					require.Equal(t, checks.Pass, r.Verdict, r.Summary)
					require.Equal(t, 33.0, r.Figures["responses_checked"])
				}
			}
		})
	}
}
