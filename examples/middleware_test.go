package examples

import (
	"net/http"
	"testing"

	"github.com/rlverify/rlverify/rlverifytest"
	"golang.org/x/time/rate"
)

// The whole test of a middleware: serve it, declare its promise, attack.
func TestMiddlewareKeepsItsPromise(t *testing.T) {
	lim := rate.NewLimiter(1, 10) // one bucket: the test sends one key
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !lim.Allow() {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	})
	pol := rlverifytest.Policy(t, `
name: middleware
tiers: [{name: free, key_prefix: "free-", limits: [{algorithm: token-bucket, capacity: 10, rate: 1/s}]}]
default_tier: free
headers: {retry_after: true}
`)
	rlverifytest.Verify(t, rlverifytest.Handler(h, pol), "concurrent-burst")
}
