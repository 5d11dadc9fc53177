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

// envTestPolicy is a small token bucket (K=10, r=1/s) that fails open, with a
// store timeout and breaker cooldown generous enough for a loaded CI machine
// running the race detector.
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
  mode: open
  store_timeout: 250ms
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
	require.GreaterOrEqual(t, b.admitted(), int(p.Tiers[0].Limits[0].Capacity)/2, "the bucket starts full: at least K/2 admissions expected")
}

// checkFailOpenAndRecover drives the store-down fault through the injector:
// with the store down a fail-open policy admits everything, and after Clear
// enforcement resumes (a 429 comes back within a bounded time).
func checkFailOpenAndRecover(t *testing.T, st *Stack, p *policy.Policy, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.True(t, st.Faults.Supports(FaultStoreDown))
	require.NoError(t, st.Faults.Inject(ctx, FaultStoreDown, ""))
	k := int(p.Tiers[0].Limits[0].Capacity)
	ok := 0
	for i := 0; i < 3*k; i++ {
		if one(st.Instances[i%len(st.Instances)], key) == http.StatusOK {
			ok++
		}
	}
	require.Equal(t, 3*k, ok, "store down with failure mode open: every request must be admitted")
	require.NoError(t, st.Faults.Clear(ctx, FaultStoreDown))
	// Enforcement resumes once the breaker's cooldown passes and the client
	// reconnects: a fresh key must soon see a 429 again.
	deadline := time.Now().Add(20 * time.Second)
	for attempt := 0; ; attempt++ {
		fresh := fmt.Sprintf("%s-after-%d", key, attempt)
		b := fireBurst(t, st.Instances, fresh, 3*k)
		if b.status[http.StatusTooManyRequests] > 0 {
			require.LessOrEqual(t, float64(b.admitted()), envelope(p, b.elapsed), "after recovery: oversell")
			t.Logf("recovered after %d attempt(s): %v", attempt+1, b.status)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("store back up but no 429 within 20s: %v", b.status)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
