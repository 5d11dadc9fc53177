package checks

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
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
