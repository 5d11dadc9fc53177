package headers

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFromHTTPMatchesGet: the canonical-key lookups of FromHTTP give what
// http.Header.Get and Values give, for names set in any case and for
// fields split over several lines.
func TestFromHTTPMatchesGet(t *testing.T) {
	h := http.Header{}
	h.Add("retry-after", "3")
	h.Add("RATELIMIT", `"a";r=1;t=2`)
	h.Add("ratelimit", `"b";r=3;t=4`)
	h.Add("ratelimit-policy", `"a";q=10;w=2`)
	h.Add("RateLimit-Limit", "10")
	h.Add("ratelimit-remaining", "1")
	h.Add("Ratelimit-Reset", "2")
	h.Add("x-ratelimit-limit", "10")
	h.Add("x-ratelimit-limit", "20")
	h.Add("X-RATELIMIT-REMAINING", "4")
	h.Add("x-ratelimit-reset", "5")
	h.Add("x-ratelimit-fallback", "open")
	h.Add("x-ratelimit-scope", "global")
	want := Fields{
		RetryAfter: h.Get(RetryAfter), RateLimit: strings.Join(h.Values(RateLimit), ", "),
		RateLimitPolicy: h.Get(RateLimitPolicy), RateLimitLimit: h.Get(RateLimitLimit),
		RateLimitRemaining: h.Get(RateLimitRemaining), RateLimitReset: h.Get(RateLimitReset),
		XLimit: h.Get(XRateLimitLimit), XRemaining: h.Get(XRateLimitRemaining), XReset: h.Get(XRateLimitReset),
		Fallback: h.Get(Fallback), Scope: h.Get(Scope),
	}
	require.Equal(t, want, FromHTTP(h))
	require.Equal(t, `"a";r=1;t=2, "b";r=3;t=4`, FromHTTP(h).RateLimit)
	require.Equal(t, "10", FromHTTP(h).XLimit)
	require.Equal(t, Fields{}, FromHTTP(http.Header{}))
}

// BenchmarkFromHTTP reads the fields of a typical 429 (Retry-After and
// X-RateLimit-*), as the load engine does for every response.
func BenchmarkFromHTTP(b *testing.B) {
	h := http.Header{}
	h.Set("Content-Type", "text/plain")
	h.Set("Retry-After", "1")
	h.Set("X-RateLimit-Limit", "10")
	h.Set("X-RateLimit-Remaining", "0")
	h.Set("X-RateLimit-Reset", "2")
	b.ReportAllocs()
	for b.Loop() {
		if FromHTTP(h).XLimit != "10" {
			b.Fatal("X-RateLimit-Limit not read")
		}
	}
}
