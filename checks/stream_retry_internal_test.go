package checks

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/internal/bench"
	"github.com/rlverify/rlverify/policy"
)

// TestRetryStreamStateIsBounded: the second pass holds per key only the
// refusals of the last advice (plus one latency), not the run's: on a
// correct bucket offered 1.5× its rate (7.5 requests/s a key, advised
// 1 s) a key never holds more than 16 (1 s and a latency of refusals), on a run of 4,000 events as
// on one of 40,000.
func TestRetryStreamStateIsBounded(t *testing.T) {
	pol, err := policy.Parse("bench", []byte(bench.PolicyYAML))
	require.NoError(t, err)
	var avg []float64
	for _, n := range []int{4000, 40_000} {
		file := filepath.Join(t.TempDir(), "h.jsonl")
		require.NoError(t, bench.WriteHistory(file, bench.Generate(n, 2)))
		s, pass := fileStreamer(t, file, pol, Options{Only: []string{"retry-after"}})
		pass(s.Add)
		require.True(t, s.Again())
		most, sum, late := 0, 0, 0
		pass(func(e *history.Event, seq uint64) {
			s.AddAgain(e, seq)
			k := &s.keys[e.Key].retry
			most = max(most, len(k.waitProbe)+len(k.waitEnd))
			sum += len(k.waitProbe) + len(k.waitEnd)
			for _, p := range k.waitProbe {
				if p.end < e.Sent-2e9 {
					late++
				}
			}
		})
		avg = append(avg, float64(sum)/float64(n))
		require.Zero(t, late, "refusals kept 2 s past their advised time")
		r := s.Results()[0]
		require.Equal(t, Pass, r.Verdict, r.Summary)
		require.Greater(t, r.Figures["rejections"], float64(n)/5)
		// The most at once grows with the run only as the longest burst of
		// refusals within one advice does (the arrivals are random).
		require.LessOrEqual(t, most, 32, "%d events", n)
		require.Greater(t, most, 2)
	}
	// What a key holds on average does not grow with the run.
	require.InDelta(t, avg[0], avg[1], 0.2*avg[0], "%v", avg)
}
