package checks

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/policy"
)

// TestEDFScreenMatchesEDF: edfScreen, fed a cluster's requests one at a
// time in send order, clears it exactly when edf schedules it — on random
// clusters of buckets under and over their envelope, with equal sends,
// wide intervals and idle stretches.
func TestEDFScreenMatchesEDF(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 29))
	var sc scratch
	outcomes := map[bool]int{}
	for trial := range 3000 {
		K := float64(1 + rng.IntN(12))
		rate := float64(1+rng.IntN(20)) / 1e9 // tokens per ns
		n := int(K) + 1 + rng.IntN(60)
		gap := (0.3 + 1.5*rng.Float64()) / rate // mean gap: below or above the rate
		maxLat := int64(rng.Float64() * 3 / rate)
		lo, hi := make([]int64, n), make([]int64, n)
		tm := int64(rng.IntN(1e6))
		for i := range n {
			if rng.IntN(5) != 0 {
				tm += int64(rng.ExpFloat64() * gap)
			}
			lo[i], hi[i] = tm, tm+rng.Int64N(maxLat+1)
		}
		want := edf(slices.Clone(lo), slices.Clone(hi), K, rate, &sc)
		s := edfScreen{K: K, r: rate, refill: 1 << 62}
		for i := range n {
			require.False(t, s.add(lo[i], hi[i]))
		}
		got := !s.end()
		require.Equal(t, want, got, "trial %d: K=%g r=%g lo=%v hi=%v", trial, K, rate, lo, hi)
		outcomes[want]++
	}
	require.Greater(t, outcomes[true], 300)
	require.Greater(t, outcomes[false], 300)
}

// TestWindowScreensMatchJudges: slideScreen and fixedScreen, fed a key's
// admissions one at a time in send order, flag exactly the segments
// judgeSliding and judgeFixed find a certificate in, and fixedScreen
// measures judgeFixed's worst rolling window — with queues compacted as
// often as possible and at the default.
func TestWindowScreensMatchJudges(t *testing.T) {
	defer func(n int) { compactAfter = n }(compactAfter)
	rng := rand.New(rand.NewPCG(11, 29))
	ix := &index{startNs: 1_700_000_000_123_456_789}
	flagged := map[bool]int{}
	for trial := range 2000 {
		compactAfter = []int{0, 1024}[trial%2]
		N := 1 + rng.IntN(8)
		W := int64(1+rng.IntN(5)) * 1e8
		l := policy.Limit{Algorithm: policy.SlidingLog, Count: int64(N), Window: policy.Duration(W)}
		n := rng.IntN(200)
		gap := float64(W) / float64(N) * (0.5 + 3*rng.Float64())
		rs := make([]rec, n)
		tm := int64(rng.IntN(1e9))
		for i := range rs {
			if rng.IntN(4) != 0 {
				tm += int64(rng.ExpFloat64() * gap)
			}
			rs[i] = rec{lo: tm, hi: tm + rng.Int64N(W/4+1), idx: int32(i)}
		}
		slices.SortFunc(rs, cmpRec)
		var sc scratch
		var st envStatus
		judgeSliding(rs, &l, float64(N), &sc, &st)
		ss := slideScreen{M: N + 1, W: W}
		bad := false
		for _, r := range rs {
			bad = ss.add(r.lo, r.hi) || bad
		}
		require.Equal(t, len(st.certs) > 0, bad, "sliding trial %d", trial)
		flagged[bad]++

		l.Algorithm = policy.FixedWindow
		st = envStatus{}
		ix.judgeFixed(rs, &l, &st)
		fs := fixedScreen{W: W, N: N, startNs: ix.startNs}
		bad = false
		for _, r := range rs {
			bad = fs.add(r.lo, r.hi) || bad
		}
		require.Equal(t, len(st.certs) > 0, bad, "fixed trial %d", trial)
		require.Equal(t, st.worstRolling, fs.worst, "fixed trial %d", trial)
	}
	require.Greater(t, flagged[true], 100)
	require.Greater(t, flagged[false], 100)
}
