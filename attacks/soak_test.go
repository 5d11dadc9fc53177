package attacks

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// soakServer is a trivial limiter: per key, the first 50 requests of every
// second are admitted, the rest get 429 with Retry-After.
func soakServer(t *testing.T) *httptest.Server {
	var mu sync.Mutex
	counts := map[string]int{}
	var second atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now().Unix()
		mu.Lock()
		if second.Swap(now) != now {
			clear(counts)
		}
		key := r.Header.Get("X-API-Key")
		counts[key]++
		n := counts[key]
		mu.Unlock()
		if n > 50 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return srv
}

type soakResult struct {
	events   int
	peakHeap uint64 // largest live heap seen after a forced GC during the run
}

// soak runs a 500/s rate phase on two keys for d, streaming the history to
// a file, and samples the live heap (after runtime.GC) every 200ms.
// Concurrency is pinned at 16: most of the live heap is the connections'
// buffers (8 KiB a side), and with the default of 256 a lagging target makes
// vegeta open more of them the longer the run, which says nothing about
// what the engine keeps per request.
func soak(t *testing.T, url string, d time.Duration) soakResult {
	t.Helper()
	plan := fmt.Sprintf("name: soak\nphases:\n  - kind: tenants\n    rate: 500/s\n    concurrency: 16\n    duration: %s\n    tenants: [{key: free-s, weight: 1}, {key: paid-s, weight: 1}]\n", d)
	p, err := Parse("soak.yaml", []byte(plan))
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "history.jsonl")
	w, err := history.Create(file)
	require.NoError(t, err)
	e, err := New(Options{Instances: []string{url}, Policy: policy.Default(), Writer: w})
	require.NoError(t, err)

	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				if ms.HeapAlloc > peak.Load() {
					peak.Store(ms.HeapAlloc)
				}
			}
		}
	}()
	sum, err := e.Run(context.Background(), p, history.Run{})
	close(stop)
	wg.Wait()
	require.NoError(t, err)
	require.False(t, sum.Interrupted, sum.Reason)
	require.NoError(t, w.Close())

	h, err := history.ReadFile(file)
	require.NoError(t, err)
	require.NotNil(t, h.End)
	require.False(t, h.Truncated)
	require.Equal(t, sum.Requests, int64(len(h.Events)))
	return soakResult{events: len(h.Events), peakHeap: peak.Load()}
}

// waitGoroutines waits up to 5s for the goroutine count to fall to want.
func waitGoroutines(want int) int {
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSoakNoLeaksAndFlatMemory runs the engine for 1s and then 4s at 500/s
// against one server. Goroutines return to where they started, and the
// live heap during the 4s run is not larger than during the 1s run by more
// than a small factor: the history streams to disk and the engine keeps
// nothing per request.
func TestSoakNoLeaksAndFlatMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("soak: skipped with -short")
	}
	srv := soakServer(t)
	runtime.GC()
	before := runtime.NumGoroutine()

	short := soak(t, srv.URL, time.Second)
	long := soak(t, srv.URL, 4*time.Second)
	t.Logf("1s: %d events, peak live heap %.1f MiB; 4s: %d events, peak live heap %.1f MiB",
		short.events, float64(short.peakHeap)/(1<<20), long.events, float64(long.peakHeap)/(1<<20))
	require.Greater(t, long.events, 3*short.events, "the long run did proportionally more requests")

	// 4× the requests; allow 1.5× plus 2 MiB of noise (GC timing, vegeta's
	// worker pool, the race detector's allocations).
	require.Less(t, float64(long.peakHeap), 1.5*float64(short.peakHeap)+2<<20,
		"live heap grows with the number of requests")

	srv.CloseClientConnections()
	// Slack of 2 for runtime-internal goroutines that come and go.
	after := waitGoroutines(before + 2)
	if after > before+2 {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		t.Fatalf("goroutines: %d before, %d after the soak\n%s", before, after, buf[:n])
	}
}
