// Package envtest holds the helpers the environment tests share (envs,
// envs/docker, service): a small fail-closed policy, bursts fired at a
// stack's instances, the quota they must keep, a store outage and its
// recovery, and skipping locally but failing in CI when a dependency is
// missing.
package envtest

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

func Policy(t *testing.T) *policy.Policy {
	t.Helper()
	p, err := policy.Parse("envtest.yaml", []byte(envTestPolicy))
	require.NoError(t, err)
	return p
}

// PolicyWithChange is Policy with a declared limit change "halve" of the
// free tier (10 at 1/s lowered to 5 at 1/s).
func PolicyWithChange(t *testing.T) *policy.Policy {
	t.Helper()
	p, err := policy.Parse("envtest+changes.yaml", []byte(envTestPolicy+`changes:
  - name: halve
    tier: free
    limits:
      - algorithm: token-bucket
        capacity: 5
        rate: 1/s
tolerance:
  propagation: 200ms
`))
	require.NoError(t, err)
	return p
}

// InCI reports whether the tests run in CI, where Redis and Docker are
// provided: missing ones fail the test instead of skipping it.
func InCI() bool { return os.Getenv("CI") == "true" }

// SkipOrFail skips the test locally and fails it in CI.
func SkipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		t.Fatalf("CI=true: %s", msg)
	}
	t.Skip(msg)
}

// Burst is what a burst saw.
type Burst struct {
	Status  map[int]int   // responses by status
	Errors  int           // transport errors
	Elapsed time.Duration // from the release of the first request to the last response
}

// Admitted counts the 200s.
func (b Burst) Admitted() int { return b.Status[http.StatusOK] }

// FireBurst sends n concurrent requests for key, spread round-robin over the
// instances, released together, and counts the answers. Connections are
// warmed first so the burst is not spread by dialing.
func FireBurst(t *testing.T, instances []string, key string, n int) Burst {
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
	res := Burst{Status: map[int]int{}}
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
				res.Errors++
				return
			}
			resp.Body.Close()
			res.Status[resp.StatusCode]++
		}()
	}
	start := time.Now()
	close(release)
	wg.Wait()
	res.Elapsed = time.Since(start)
	return res
}

// One sends a single request for key to url and returns its status (0 on a
// transport error).
func One(url, key string) int {
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

// Envelope is the most a token bucket (K, r) starting full may admit in d.
func Envelope(p *policy.Policy, d time.Duration) float64 {
	l := p.Tiers[0].Limits[0]
	return l.K() + l.R()*d.Seconds()
}

// CheckQuota asserts a burst on one key admitted at most K + r·Δt and at
// least one request (the bucket starts full).
func CheckQuota(t *testing.T, p *policy.Policy, b Burst) {
	t.Helper()
	limit := Envelope(p, b.Elapsed)
	t.Logf("burst: %v in %s; envelope K + r·Δt = %.1f", b.Status, b.Elapsed.Round(time.Millisecond), limit)
	require.Zero(t, b.Errors, "transport errors in the burst")
	require.LessOrEqual(t, float64(b.Admitted()), limit, "oversell: admitted more than K + r·Δt")
	require.Positive(t, b.Admitted(), "the bucket starts full: admissions expected")
}

// Faults is the part of a stack's fault injector the helpers drive.
type Faults interface {
	Inject(ctx context.Context, kind, param string) error
	Clear(ctx context.Context, kind string) error
	Supports(kind string) bool
}

// storeDown is the fault kind of a dead store (envs.FaultStoreDown).
const storeDown = "store-down"

// CheckStoreDownAndRecover drives the store-down fault through the
// injector: with the store down the fail-closed policy answers 503 to every
// request, and after Clear enforcement resumes (a burst on a fresh key is
// held to the envelope with some 429s within a bounded time).
func CheckStoreDownAndRecover(t *testing.T, instances []string, faults Faults, p *policy.Policy, key string) {
	t.Helper()
	require.True(t, faults.Supports(storeDown))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	began := time.Now()
	require.NoError(t, faults.Inject(ctx, storeDown, ""))
	t.Logf("store-down injected in %s", time.Since(began).Round(time.Millisecond))
	// Two requests per instance: each instance sees the dead store (a
	// request may take up to the store timeout when the store's name no
	// longer resolves).
	k := int(p.Tiers[0].Limits[0].Capacity)
	n := 2 * len(instances)
	got := map[int]int{}
	for i := 0; i < n; i++ {
		got[One(instances[i%len(instances)], key)]++
	}
	require.Equal(t, map[int]int{http.StatusServiceUnavailable: n}, got, "store down with failure mode closed: every request must get 503")
	cctx, ccancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer ccancel()
	began = time.Now()
	require.NoError(t, faults.Clear(cctx, storeDown))
	t.Logf("store-down cleared in %s", time.Since(began).Round(time.Millisecond))
	// Enforcement resumes once every instance's breaker has closed again
	// (until then an instance still answers 503): a burst on a fresh key must
	// soon be held to the envelope with 429s again.
	deadline := time.Now().Add(20 * time.Second)
	for attempt := 0; ; attempt++ {
		fresh := fmt.Sprintf("%s-after-%d", key, attempt)
		b := FireBurst(t, instances, fresh, 3*k)
		if b.Status[http.StatusTooManyRequests] > 0 && float64(b.Admitted()) <= Envelope(p, b.Elapsed) {
			t.Logf("enforcing again after %d burst(s): %v", attempt+1, b.Status)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("store back up but the quota is not enforced within 20s: %v", b.Status)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
