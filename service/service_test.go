package service

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/headers"
	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policy"
)

func newService(t *testing.T, limiter string, now func() time.Time) (*Service, *Sink) {
	t.Helper()
	return newServiceFor(t, policy.Default(), limiter, now)
}

func newServiceFor(t *testing.T, pol *policy.Policy, limiter string, now func() time.Time) (*Service, *Sink) {
	t.Helper()
	entry, err := catalog.Lookup(limiter, catalog.Memory)
	require.NoError(t, err)
	declared := pol.WithAlgorithm(entry.Algorithm)
	lims, err := BuildLimiters(declared, entry, catalog.Env{}, nil)
	require.NoError(t, err)
	sink := NewSink(now)
	return &Service{Policy: declared, Limiters: lims, Downstream: sink, Now: now, TrustXFF: entry.TrustXFF, Metrics: NewMetrics()}, sink
}

func get(t *testing.T, h http.Handler, path string, hdr map[string]string) *http.Response {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.RemoteAddr = "127.0.0.1:5555"
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

func TestServiceContract(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	svc, sink := newService(t, "token-bucket", func() time.Time { return now })

	resp := get(t, svc, "/api", nil)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "missing key")
	resp = get(t, svc, "/api", map[string]string{"X-API-Key": "bad\x01key"})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "garbage key")

	// Free tier: K=10, r=5/s. Ten admitted, the eleventh denied.
	for i := 0; i < 10; i++ {
		resp = get(t, svc, "/api", map[string]string{"X-API-Key": "free-a"})
		require.Equal(t, http.StatusOK, resp.StatusCode, i)
	}
	require.Equal(t, `"free";q=10;w=2`, resp.Header.Get("RateLimit-Policy"))
	require.Equal(t, `"free";r=0;t=2`, resp.Header.Get("RateLimit"))
	require.Equal(t, "10", resp.Header.Get("X-RateLimit-Limit"))
	require.Equal(t, "0", resp.Header.Get("X-RateLimit-Remaining"))
	resp = get(t, svc, "/api", map[string]string{"X-API-Key": " FREE-A "})
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "case and space variants share the quota")
	require.Equal(t, "1", resp.Header.Get("Retry-After"), "0.2s rounds up to 1s")

	// After the advised wait (1 s at 5/s) five tokens are back.
	now = now.Add(time.Second)
	for i := 0; i < 5; i++ {
		resp = get(t, svc, "/api", map[string]string{"X-API-Key": "free-a"})
		require.Equal(t, http.StatusOK, resp.StatusCode, i)
	}

	// A spoofed X-Forwarded-For from an untrusted peer changes nothing.
	resp = get(t, svc, "/api", map[string]string{"X-API-Key": "free-a", "X-Forwarded-For": "198.18.0.7"})
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)

	// Paid keys have their own, larger quota.
	resp = get(t, svc, "/api", map[string]string{"X-API-Key": "paid-z"})
	require.Equal(t, "100", resp.Header.Get("X-RateLimit-Limit"))

	snap := sink.Snapshot(t0.Add(-time.Second))
	var free int64
	for _, s := range snap {
		if s.Key == "free-a" {
			free = s.Arrivals
		}
	}
	require.Equal(t, int64(15), free, "every admitted request reached downstream, nothing else")

	resp = get(t, svc, "/metrics", nil)
	body, _ := io.ReadAll(resp.Body)
	require.Contains(t, string(body), `rlverify_decisions_total{outcome="denied",tier="free"}`)
	resp = get(t, svc, "/healthz", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestServiceSendsTheDeclaredGeneration: the service sends the RateLimit
// fields of the generation its policy declares, and no other, with
// X-RateLimit-Reset in the declared form.
func TestServiceSendsTheDeclaredGeneration(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	all := []string{headers.RateLimit, headers.RateLimitPolicy, headers.RateLimitLimit, headers.RateLimitRemaining, headers.RateLimitReset,
		headers.XRateLimitLimit, headers.XRateLimitRemaining, headers.XRateLimitReset}
	for _, tc := range []struct {
		gen    policy.RateLimitHeaders
		xreset string
		want   map[string]string
	}{
		{policy.RateLimitStructured, "relative", map[string]string{headers.RateLimit: `"free";r=0;t=2`, headers.RateLimitPolicy: `"free";q=10;w=2`,
			headers.XRateLimitLimit: "10", headers.XRateLimitRemaining: "0", headers.XRateLimitReset: "2"}},
		{policy.RateLimitDictionary, "epoch", map[string]string{headers.RateLimit: `limit=10, remaining=0, reset=2`, headers.RateLimitPolicy: `10;w=2`,
			headers.XRateLimitLimit: "10", headers.XRateLimitRemaining: "0", headers.XRateLimitReset: "1767225602"}},
		{policy.RateLimitSplit, "date", map[string]string{headers.RateLimitLimit: "10", headers.RateLimitRemaining: "0", headers.RateLimitReset: "2", headers.RateLimitPolicy: `10;w=2`,
			headers.XRateLimitLimit: "10", headers.XRateLimitRemaining: "0", headers.XRateLimitReset: "Thu, 01 Jan 2026 00:00:02 GMT"}},
		{policy.RateLimitNone, "relative", map[string]string{}},
	} {
		t.Run(string(tc.gen), func(t *testing.T) {
			pol := policy.Default()
			pol.Headers.RateLimit, pol.Headers.XReset = tc.gen, tc.xreset
			pol.Headers.XRateLimit = tc.gen != policy.RateLimitNone
			svc, _ := newServiceFor(t, pol, "token-bucket", func() time.Time { return t0 })
			var resp *http.Response
			for i := 0; i < 10; i++ {
				resp = get(t, svc, "/api", map[string]string{"X-API-Key": "free-a"})
				require.Equal(t, http.StatusOK, resp.StatusCode)
			}
			for _, name := range all {
				require.Equal(t, tc.want[name], resp.Header.Get(name), name)
			}
			resp = get(t, svc, "/api", map[string]string{"X-API-Key": "free-a"})
			require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
			require.Equal(t, "1", resp.Header.Get(headers.RetryAfter))
		})
	}
}

// TestServiceTierNamesRoundTrip: a tier named with any character a policy
// holds (policy.CheckName: letters, digits, '.', '_', '-') reads back unchanged from the service's structured fields with the
// reader the checks use (an empty name, which policies reject, is covered
// in headers).
func TestServiceTierNamesRoundTrip(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, name := range []string{"a.b_c-1", "Z9", "100", "p.22", "plain", "x"} {
		y := fmt.Sprintf("name: n\ntiers:\n  - name: %s\n    key_prefix: k-\n    limits:\n      - capacity: 3\n        rate: 1/s\nheaders:\n  ratelimit: structured\n", strconv.Quote(name))
		pol, err := policy.Parse("names.yaml", []byte(y))
		require.NoError(t, err, y)
		tier := pol.Tiers[0].Name
		svc, _ := newServiceFor(t, pol, "token-bucket", func() time.Time { return t0 })
		resp := get(t, svc, "/api", map[string]string{"X-API-Key": "k-a"})
		require.Equal(t, http.StatusOK, resp.StatusCode)
		o := headers.Read(headers.Structured, headers.FromHTTP(resp.Header))
		require.True(t, o.Limit.Valid(), "%q: %+v", tier, o)
		require.Equal(t, tier, o.Name)
		require.Equal(t, int64(3), o.Limit.N)
		require.Equal(t, int64(2), o.Remaining.N)
	}
}

func TestTrustXFFBuysQuota(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	svc, _ := newService(t, "faulty/trust-xff", func() time.Time { return now })
	admitted := 0
	for i := 0; i < 30; i++ {
		resp := get(t, svc, "/api", map[string]string{"X-API-Key": "free-a", "X-Forwarded-For": fmt.Sprintf("198.18.0.%d", i+1)})
		if resp.StatusCode == http.StatusOK {
			admitted++
		}
	}
	require.Equal(t, 30, admitted, "every spoofed address gets its own bucket")
}

// A policy may declare that the limiter counts another occurrence of a
// repeated identity than the one the application serves; the reference
// service then does exactly that: it limits on the limiter's occurrence
// and forwards as the tenant's.
func TestServiceServesTheTenantOccurrenceAndLimitsTheLimiters(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, identity string
		// After K=10 requests of free-a, one that adds free-b (free-a
		// where the tenant is): its status, and what was forwarded per key
		// (always as the tenant free-a).
		status     int
		fwdA, fwdB int64
	}{
		{"both first", "identity: {tenant_occurrence: first, limiter_occurrence: first}\n", http.StatusTooManyRequests, 10, 0},
		{"served first, counted last", "identity: {tenant_occurrence: first, limiter_occurrence: last}\n", http.StatusOK, 11, 0},
		{"served last, counted first", "identity: {tenant_occurrence: last, limiter_occurrence: first}\n", http.StatusOK, 11, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol, err := policy.Parse("p.yaml", []byte("name: p\ntiers:\n  - name: free\n    key_prefix: free-\n    limits: [{capacity: 10, rate: 1/min}]\n"+tc.identity))
			require.NoError(t, err)
			svc, sink := newServiceFor(t, pol, "token-bucket", func() time.Time { return now })
			for i := 0; i < 10; i++ {
				require.Equal(t, http.StatusOK, get(t, svc, "/api", map[string]string{"X-API-Key": "free-a"}).StatusCode)
			}
			first, second := "free-a", "free-b"
			if pol.Identity.Tenant() == policy.RepeatedLast {
				first, second = second, first
			}
			r := httptest.NewRequest(http.MethodGet, "/api", nil)
			r.Header.Add("X-API-Key", first)
			r.Header.Add("X-API-Key", second)
			w := httptest.NewRecorder()
			svc.ServeHTTP(w, r)
			require.Equal(t, tc.status, w.Code)
			got := map[string]int64{}
			for _, s := range sink.Snapshot(now.Add(-time.Hour)) {
				got[s.Key] = s.Arrivals
			}
			require.Equal(t, tc.fwdA, got["free-a"])
			require.Equal(t, tc.fwdB, got["free-b"])
		})
	}
}

// An exempt class is never limited: its keys are admitted past every
// quota, forwarded, and carry no rate-limit headers.
func TestServiceNeverLimitsAnExemptClass(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pol, err := policy.Parse("p.yaml", []byte("name: p\ntiers:\n  - name: one\n    key_prefix: \"\"\n    limits: [{capacity: 1, rate: 1/min}]\ndefault_tier: one\nexempt:\n  - name: internal\n    key_prefix: int-\nheaders: {x_ratelimit: true}\n"))
	require.NoError(t, err)
	svc, sink := newServiceFor(t, pol, "token-bucket", func() time.Time { return now })
	for i := 0; i < 50; i++ {
		resp := get(t, svc, "/api", map[string]string{"X-API-Key": "int-a"})
		require.Equal(t, http.StatusOK, resp.StatusCode, i)
		require.Empty(t, resp.Header.Get("X-RateLimit-Limit"))
	}
	require.Equal(t, http.StatusOK, get(t, svc, "/api", map[string]string{"X-API-Key": "k"}).StatusCode)
	require.Equal(t, http.StatusTooManyRequests, get(t, svc, "/api", map[string]string{"X-API-Key": "k"}).StatusCode, "K = 1")
	got := map[string]int64{}
	for _, s := range sink.Snapshot(now.Add(-time.Hour)) {
		got[s.Key] = s.Arrivals
	}
	require.Equal(t, int64(50), got["int-a"])
}
