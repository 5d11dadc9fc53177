package attacks

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/history"
)

// sortedIntended returns the intended offsets of evs relative to start,
// sorted.
func sortedIntended(evs []history.Event, start int64) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Intended - start
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func TestRatePoolExactCountWithRequestsAndTenants(t *testing.T) {
	srv, n := countingServer(t, 1<<30)
	h, sum, err := runPlan(t, context.Background(), "name: r\nphases:\n  - name: t\n    kind: tenants\n    rate: 2000/s\n    requests: 500\n    concurrency: 8\n    tenants: [{key: free-x, weight: 1}, {key: paid-x, weight: 3}]\n",
		Options{Instances: []string{srv.URL}})
	require.NoError(t, err)
	require.False(t, sum.Interrupted, sum.Reason)
	require.Len(t, h.Events, 500)
	require.Equal(t, int64(500), n.Load(), "the server saw exactly the recorded requests")
	rec := phaseRecord(t, h, "t")
	require.Equal(t, int64(500), rec.Requests)
	require.Equal(t, int64(0), rec.Dropped)
	ids := map[uint64]bool{}
	perKey := map[string]int{}
	for _, e := range h.Events {
		require.False(t, ids[e.ID])
		ids[e.ID] = true
		require.Equal(t, 200, e.Status)
		require.LessOrEqual(t, e.Sent, e.Recv)
		perKey[strings.SplitN(e.Key, "-", 2)[0]+"/"+e.Tier]++
	}
	require.Len(t, perKey, 2)
	require.Greater(t, perKey["paid/paid"], perKey["free/free"], "weights are honoured")
}

func TestRatePoolIntendedTimesFollowThePacer(t *testing.T) {
	srv, _ := countingServer(t, 1<<30)
	h, _, err := runPlan(t, context.Background(), "name: r\nphases:\n  - name: c\n    kind: rate\n    key: paid-a\n    rate: 400/s\n    requests: 100\n  - name: ramp\n    kind: rate\n    key: paid-a\n    rate: 100/s\n    rate_to: 300/s\n    duration: 1s\n",
		Options{Instances: []string{srv.URL}})
	require.NoError(t, err)
	c := phaseRecord(t, h, "c")
	got := sortedIntended(phaseEvents(h, "c"), c.Start)
	require.Len(t, got, 100)
	for k, off := range got {
		require.Equal(t, int64(k+1)*int64(2500*time.Microsecond), off, "hit %d", k)
	}
	ramp := phaseRecord(t, h, "ramp")
	got = sortedIntended(phaseEvents(h, "ramp"), ramp.Start)
	// 100/s rising to 300/s over 1s: 200 hits, the last few of them
	// dropped (and counted) when a busy runner wakes the scheduler late.
	require.InDelta(t, 200, int64(len(got))+ramp.Dropped, 2)
	require.LessOrEqual(t, ramp.Dropped, int64(20))
	for k, off := range got {
		require.Equal(t, intendedOffset(uint64(k), 0, 100, 200), off, "hit %d", k)
	}
}

func TestRatePoolReportsLateAndDroppedWhenTheTargetIsSlow(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(50 * time.Millisecond)
	}))
	t.Cleanup(srv.Close)
	// 2 in flight × 20/s each = 40/s of capacity against 100/s asked.
	h, _, err := runPlan(t, context.Background(), "name: r\nphases:\n  - name: slow\n    kind: rate\n    key: paid-a\n    rate: 100/s\n    duration: 1s\n    concurrency: 2\n",
		Options{Instances: []string{srv.URL}})
	require.NoError(t, err)
	rec := phaseRecord(t, h, "slow")
	evs := phaseEvents(h, "slow")
	require.Equal(t, int64(len(evs)), rec.Requests)
	require.Less(t, rec.Requests, int64(80))
	require.Greater(t, rec.Late, rec.Requests/2)
	require.Equal(t, int64(100), rec.Requests+rec.Dropped, "expected = sent + dropped")
	late := 0
	for _, e := range evs {
		if e.Sent-e.Intended > int64(10*time.Millisecond) {
			late++
		}
	}
	require.Equal(t, int64(late), rec.Late)
}

func TestRatePoolCancelCutsOffRequestsInFlight(t *testing.T) {
	var seen atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			return
		}
		seen.Add(1)
		if seen.Load() > 5 {
			// Never answers in time: only the cancel ends these.
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		}
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(400*time.Millisecond, cancel)
	start := time.Now()
	h, sum, err := runPlan(t, ctx, "name: r\nphases:\n  - name: c\n    kind: rate\n    key: paid-a\n    rate: 100/s\n    duration: 30s\n    concurrency: 64\n",
		Options{Instances: []string{srv.URL}, Timeout: 10 * time.Second})
	require.NoError(t, err)
	require.True(t, sum.Interrupted)
	require.Less(t, time.Since(start), 5*time.Second, "the stop does not wait for the 10s timeout of requests in flight")
	// Every request the server saw is recorded; one cut off on its way
	// (written just before the stop) may never have reached the handler.
	require.LessOrEqual(t, seen.Load(), int64(len(h.Events)), "every request the server saw is recorded")
	rec := phaseRecord(t, h, "c")
	require.Equal(t, int64(len(h.Events)), rec.Requests)
	cancelled := 0
	for _, e := range h.Events {
		switch e.Status {
		case 200:
		case 0:
			require.Equal(t, history.ErrCancelled, e.Err)
			cancelled++
		default:
			t.Fatalf("status %d", e.Status)
		}
	}
	require.Positive(t, cancelled, "requests in flight at the stop are recorded as cancelled")
	require.LessOrEqual(t, int64(len(h.Events))-seen.Load(), int64(cancelled), "only a cancelled request may be missing at the server")
}

func TestRatePoolHTTPSThroughTheClient(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-API-Key") == "" {
			w.WriteHeader(401)
			return
		}
		n.Add(1)
		w.Header().Set("X-RateLimit-Remaining", "7")
	}))
	t.Cleanup(srv.Close)
	h, _, err := runPlan(t, context.Background(), "name: r\nphases:\n  - kind: rate\n    key: paid-a\n    rate: 500/s\n    requests: 50\n",
		Options{Instances: []string{srv.URL}, Client: srv.Client()})
	require.NoError(t, err)
	require.Len(t, h.Events, 50)
	require.Equal(t, int64(50), n.Load())
	for _, e := range h.Events {
		require.Equal(t, 200, e.Status)
		require.Equal(t, "7", e.XRemaining)
	}
}

// A server that closes connections (Connection: close, or idle keep-alive
// timeouts) costs reconnects, never requests.
func TestRatePoolSurvivesClosedConnections(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%3 == 0 {
			w.Header().Set("Connection", "close")
		}
		w.Header().Set("Retry-After", "2")
		w.WriteHeader(429)
		_, _ = w.Write([]byte(strings.Repeat("x", 5000)))
	}))
	srv.Config.IdleTimeout = 5 * time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)
	h, _, err := runPlan(t, context.Background(), "name: r\nphases:\n  - name: c\n    kind: rate\n    key: paid-a\n    rate: 100/s\n    requests: 60\n    concurrency: 4\n",
		Options{Instances: []string{srv.URL}})
	require.NoError(t, err)
	require.Len(t, h.Events, 60)
	for _, e := range h.Events {
		require.Equal(t, 429, e.Status, e.Err)
		require.Equal(t, "2", e.RetryAfter)
	}
	require.Equal(t, int64(60), n.Load())
}
