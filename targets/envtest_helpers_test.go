package targets

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/policy"
)

// envTestPolicy is a small token bucket (K=10, r=1/s) that fails closed: a
// store call that a CI machine loaded by parallel race-detector test binaries
// makes slower than the store timeout then answers 503 and can never be
// mistaken for an oversell in the quota checks (fail-open would admit it).
// The store timeout is long (2s) so that this stays rare; a dead store
// (refused connections) still fails fast.
const envTestPolicy = `
name: envtest
version: v1
tiers:
  - name: free
    key_prefix: "free-"
    limits:
      - algorithm: token-bucket
        capacity: 10
        rate: 1/s
default_tier: free
headers:
  retry_after: true
  ratelimit: true
  x_ratelimit: true
failure:
  mode: closed
  store_timeout: 2s
  breaker_failures: 3
  breaker_cooldown: 200ms
`

func testPolicy(t *testing.T) *policy.Policy {
	t.Helper()
	p, err := policy.Parse("envtest.yaml", []byte(envTestPolicy))
	require.NoError(t, err)
	return p
}

// inCI reports whether the tests run in CI, where Redis and Docker are
// provided: missing ones fail the test instead of skipping it.
func inCI() bool { return os.Getenv("CI") == "true" }

// skipOrFail skips the test locally and fails it in CI.
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if inCI() {
		t.Fatalf("CI=true: %s", msg)
	}
	t.Skip(msg)
}

// burstResult is what a burst saw.
type burstResult struct {
	status  map[int]int
	errors  int
	elapsed time.Duration // from the release of the first request to the last response
}

func (b burstResult) admitted() int { return b.status[http.StatusOK] }

// fireBurst sends n concurrent requests for key, spread round-robin over the
// instances, released together, and counts the answers. Connections are
// warmed first so the burst is not spread by dialing.
func fireBurst(t *testing.T, instances []string, key string, n int) burstResult {
	t.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: n, IdleConnTimeout: 10 * time.Second}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	// Warm one connection per instance (health checks do not consume quota).
	for _, u := range instances {
		resp, err := c.Get(u + "/healthz")
		require.NoError(t, err)
		resp.Body.Close()
	}
	res := burstResult{status: map[int]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	release := make(chan struct{})
	for i := 0; i < n; i++ {
		req, err := http.NewRequest(http.MethodGet, instances[i%len(instances)]+"/", nil)
		require.NoError(t, err)
		req.Header.Set("X-API-Key", key)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-release
			resp, err := c.Do(req)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.errors++
				return
			}
			resp.Body.Close()
			res.status[resp.StatusCode]++
		}()
	}
	start := time.Now()
	close(release)
	wg.Wait()
	res.elapsed = time.Since(start)
	return res
}

// one sends a single request for key to url and returns its status (0 on a
// transport error).
func one(url, key string) int {
	req, _ := http.NewRequest(http.MethodGet, url+"/", nil)
	req.Header.Set("X-API-Key", key)
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// envelope is the most a token bucket (K, r) starting full may admit in d.
func envelope(p *policy.Policy, d time.Duration) float64 {
	l := p.Tiers[0].Limits[0]
	return l.K() + l.R()*d.Seconds()
}

// checkQuota asserts a burst on one key admitted at most K + r·Δt and at
// least one request (the bucket starts full).
func checkQuota(t *testing.T, p *policy.Policy, b burstResult) {
	t.Helper()
	limit := envelope(p, b.elapsed)
	t.Logf("burst: %v in %s; envelope K + r·Δt = %.1f", b.status, b.elapsed.Round(time.Millisecond), limit)
	require.Zero(t, b.errors, "transport errors in the burst")
	require.LessOrEqual(t, float64(b.admitted()), limit, "oversell: admitted more than K + r·Δt")
	require.Positive(t, b.admitted(), "the bucket starts full: admissions expected")
}

// checkStoreDownAndRecover drives the store-down fault through the
// injector: with the store down the fail-closed policy answers 503 to every
// request, and after Clear enforcement resumes (a burst on a fresh key is
// held to the envelope with some 429s within a bounded time).
func checkStoreDownAndRecover(t *testing.T, st *Stack, p *policy.Policy, key string) {
	t.Helper()
	require.True(t, st.Faults.Supports(FaultStoreDown))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	began := time.Now()
	require.NoError(t, st.Faults.Inject(ctx, FaultStoreDown, ""))
	t.Logf("store-down injected in %s", time.Since(began).Round(time.Millisecond))
	// Two requests per instance: each instance sees the dead store (a
	// request may take up to the store timeout when the store's name no
	// longer resolves).
	k := int(p.Tiers[0].Limits[0].Capacity)
	n := 2 * len(st.Instances)
	got := map[int]int{}
	for i := 0; i < n; i++ {
		got[one(st.Instances[i%len(st.Instances)], key)]++
	}
	require.Equal(t, map[int]int{http.StatusServiceUnavailable: n}, got, "store down with failure mode closed: every request must get 503")
	cctx, ccancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer ccancel()
	began = time.Now()
	require.NoError(t, st.Faults.Clear(cctx, FaultStoreDown))
	t.Logf("store-down cleared in %s", time.Since(began).Round(time.Millisecond))
	// Enforcement resumes once every instance's breaker has closed again
	// (until then an instance still answers 503): a burst on a fresh key must
	// soon be held to the envelope with 429s again.
	deadline := time.Now().Add(20 * time.Second)
	for attempt := 0; ; attempt++ {
		fresh := fmt.Sprintf("%s-after-%d", key, attempt)
		b := fireBurst(t, st.Instances, fresh, 3*k)
		if b.status[http.StatusTooManyRequests] > 0 && float64(b.admitted()) <= envelope(p, b.elapsed) {
			t.Logf("enforcing again after %d burst(s): %v", attempt+1, b.status)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("store back up but the quota is not enforced within 20s: %v", b.status)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
