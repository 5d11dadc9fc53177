package attacks

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"testing"
	"time"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// benchBurst releases bursts of n requests at a trivial loopback server and
// reports the spread of the send times after the release instant: the
// median over the bursts of each burst's p99 and maximum, and the worst
// maximum seen.
func benchBurst(b *testing.B, n int) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	e, err := New(Options{Instances: []string{srv.URL}, Policy: policy.Default(), Writer: history.NewWriter(io.Discard),
		MaxRequests: 1 << 40, RunID: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	e.start = time.Now()
	ph := &Phase{Name: "burst", Kind: KindBurst, Key: "paid-bench", Requests: n}
	var p99s, maxs []int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rec, err := e.burst(context.Background(), ph, e.Key(ph.Key), n, -1)
		if err != nil {
			b.Fatal(err)
		}
		p99s = append(p99s, rec.SpreadP99)
		maxs = append(maxs, rec.SpreadMax)
	}
	b.StopTimer()
	if errs := e.errs.Load(); errs > 0 {
		b.Fatalf("%d requests failed", errs)
	}
	med := func(xs []int64) float64 {
		s := append([]int64(nil), xs...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return float64(s[len(s)/2]) / 1e3
	}
	worst := int64(0)
	for _, m := range maxs {
		worst = max(worst, m)
	}
	b.ReportMetric(med(p99s), "p99_spread_us")
	b.ReportMetric(med(maxs), "max_spread_us")
	b.ReportMetric(float64(worst)/1e3, "worst_max_spread_us")
}

// BenchmarkBurstRelease100: the target is a p99 spread ≤ 1ms (DESIGN.md).
func BenchmarkBurstRelease100(b *testing.B) { benchBurst(b, 100) }

// BenchmarkBurstRelease1000 measures a burst of the size the design's
// reference figures quote for net/http (31ms spread, 46ms p99).
func BenchmarkBurstRelease1000(b *testing.B) { benchBurst(b, 1000) }
