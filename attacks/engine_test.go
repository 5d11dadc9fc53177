package attacks

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// countingServer admits the first `allow` requests and rejects the rest
// with Retry-After: 1.
func countingServer(t *testing.T, allow int64) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			return
		}
		if r.Header.Get("X-API-Key") == "" {
			w.WriteHeader(401)
			return
		}
		if n.Add(1) > allow {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(429)
			return
		}
		w.WriteHeader(200)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func runPlan(t *testing.T, ctx context.Context, planYAML string, o Options) (*history.History, Summary, error) {
	t.Helper()
	p, err := Parse("test.yaml", []byte(planYAML))
	require.NoError(t, err)
	var buf bytes.Buffer
	o.Writer = history.NewWriter(&buf)
	if o.Policy == nil {
		o.Policy = policy.Default()
	}
	e, err := New(o)
	require.NoError(t, err)
	sum, runErr := e.Run(ctx, p, history.Run{})
	require.NoError(t, o.Writer.Flush())
	h, err := history.Read("test", &buf)
	require.NoError(t, err)
	return h, sum, runErr
}

func TestBurstRecordsEveryRequest(t *testing.T) {
	srv, _ := countingServer(t, 10)
	h, sum, err := runPlan(t, context.Background(), "name: b\nphases:\n  - kind: burst\n    key: free-a\n    requests: 50\n", Options{Instances: []string{srv.URL}})
	require.NoError(t, err)
	require.False(t, sum.Interrupted)
	require.Len(t, h.Events, 50)
	st := h.Stats()
	require.Equal(t, int64(10), st.Admitted)
	require.Equal(t, int64(40), st.Rejected)
	require.NotNil(t, h.End)
	require.Len(t, h.Phases, 1)
	ph := h.Phases[0]
	require.Equal(t, "burst", ph.Kind)
	require.Equal(t, int64(50), ph.Requests)
	require.GreaterOrEqual(t, ph.SpreadMax, ph.SpreadP99)
	ids := map[uint64]bool{}
	for _, e := range h.Events {
		require.False(t, ids[e.ID], "ids are unique")
		ids[e.ID] = true
		require.LessOrEqual(t, e.Sent, e.Recv)
		require.Equal(t, "free", e.Tier)
		require.Regexp(t, `^free-[0-9a-f]{6}-a$`, e.Key, "the run id follows the tier prefix")
	}
}

func TestRatePhaseHoldsCountAndRecordsIntendedTimes(t *testing.T) {
	srv, _ := countingServer(t, 1000)
	h, _, err := runPlan(t, context.Background(), "name: r\nphases:\n  - kind: rate\n    key: paid-a\n    rate: 200/s\n    requests: 60\n", Options{Instances: []string{srv.URL}})
	require.NoError(t, err)
	require.Len(t, h.Events, 60)
	require.Len(t, h.Phases, 1)
	require.Equal(t, int64(0), h.Phases[0].Dropped)
	var maxIntended int64
	for _, e := range h.Events {
		maxIntended = max(maxIntended, e.Intended)
		require.Equal(t, 200, e.Status)
	}
	// 60 requests at 200/s span about 300ms of intended times.
	require.InDelta(t, float64(295*time.Millisecond), float64(maxIntended-h.Phases[0].Start), float64(20*time.Millisecond))
}

func TestInterruptedRunKeepsHistoryAndEndRecord(t *testing.T) {
	srv, _ := countingServer(t, 1000)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	h, sum, err := runPlan(t, ctx, "name: long\nphases:\n  - kind: rate\n    key: paid-a\n    rate: 100/s\n    duration: 30s\n  - kind: burst\n    key: paid-a\n    requests: 10\n", Options{Instances: []string{srv.URL}})
	require.NoError(t, err)
	require.True(t, sum.Interrupted)
	require.NotNil(t, h.End)
	require.True(t, h.End.Interrupted)
	require.Contains(t, h.End.Reason, "interrupted")
	require.NotEmpty(t, h.Events)
	require.Less(t, len(h.Events), 3000)
}

func TestMaxRequestsBoundsTheRun(t *testing.T) {
	srv, n := countingServer(t, 1000)
	h, sum, err := runPlan(t, context.Background(), "name: big\nphases:\n  - kind: burst\n    key: paid-a\n    requests: 30\n  - kind: burst\n    key: paid-a\n    requests: 30\n", Options{Instances: []string{srv.URL}, MaxRequests: 40})
	require.NoError(t, err)
	require.True(t, sum.Interrupted)
	require.Contains(t, sum.Reason, "MaxRequests")
	require.Len(t, h.Events, 30)
	require.Equal(t, int64(30), n.Load())
}

func TestShardsSplitRequestsWithDisjointIDs(t *testing.T) {
	srv, _ := countingServer(t, 1000)
	seen := map[uint64]bool{}
	total := 0
	for shard := 0; shard < 3; shard++ {
		h, _, err := runPlan(t, context.Background(), "name: s\nphases:\n  - kind: burst\n    key: paid-a\n    requests: 10\n", Options{Instances: []string{srv.URL}, Shard: shard, Shards: 3, RunID: "same"})
		require.NoError(t, err)
		require.Equal(t, h.Run.Shard, []string{"1/3", "2/3", "3/3"}[shard])
		for _, e := range h.Events {
			require.False(t, seen[e.ID])
			seen[e.ID] = true
		}
		total += len(h.Events)
	}
	require.Equal(t, 10, total)
}

func TestUnreachableTargetIsRecordedNotFatal(t *testing.T) {
	srv, _ := countingServer(t, 1)
	url := srv.URL
	srv.Close()
	h, _, err := runPlan(t, context.Background(), "name: u\nphases:\n  - kind: burst\n    key: free-a\n    requests: 3\n", Options{Instances: []string{url}, Timeout: time.Second})
	require.NoError(t, err)
	require.Len(t, h.Events, 3)
	for _, e := range h.Events {
		require.Equal(t, 0, e.Status)
		require.NotEmpty(t, e.Err)
		require.Equal(t, history.Unknown, e.Outcome())
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	w := history.NewWriter(&bytes.Buffer{})
	for _, o := range []Options{
		{Policy: policy.Default(), Writer: w},
		{Instances: []string{"ftp://x"}, Policy: policy.Default(), Writer: w},
		{Instances: []string{"http://127.0.0.1:1"}, Writer: w},
		{Instances: []string{"http://127.0.0.1:1"}, Policy: policy.Default(), Writer: w, Shard: 3, Shards: 2},
	} {
		_, err := New(o)
		require.Error(t, err)
	}
}
