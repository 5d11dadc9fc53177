package checks

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/history"
)

// TestWalkMinMatchesBruteForce: walkMin.min finds the least value of every
// range, short (inside a block) or long (across blocks), and of equals the
// leftmost (the streaming check's dropped candidates, left of its walk,
// win ties: cands.least).
func TestWalkMinMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, n := range []int{1, 5, 64, 65, 129, 200, 1000, 1001, 5000, 5001} {
		hi := make([]int64, n)
		rate := 5e-9
		for i := range hi {
			if n%2 == 1 {
				// A token every 2^28 ns, candidates on whole tokens: j −
				// rate·hi is exact, and falls by one every 100
				// candidates, equal in between (plateaus across blocks).
				rate = 1.0 / (1 << 28)
				hi[i] = int64(i+i/100) << 28
				continue
			}
			hi[i] = rng.Int64N(int64(n) * 200_000_000)
		}
		slices.Sort(hi)
		var w walkMin
		w.build(hi, 0, rate)
		for range 300 {
			l := rng.IntN(n)
			r := l + rng.IntN(n-l)
			want := l
			for j := l; j <= r; j++ {
				if w.v[j] < w.v[want] {
					want = j
				}
			}
			require.Equal(t, want, w.min(l, r), "n=%d [%d, %d]", n, l, r)
		}
	}
}

// TestRoomWalkMatchesScan: room answers the same from a walkMin as from its
// step-by-step backward scan, for every refusal of simulated histories with
// short and long scans.
func TestRoomWalkMatchesScan(t *testing.T) {
	p := benchPolicy()
	for _, tc := range []struct{ n, keys int }{{60_000, 1}, {20_000, 20}, {5_000, 1000}} {
		t.Run(fmt.Sprintf("%d/%d", tc.n, tc.keys), func(t *testing.T) {
			ix := newIndex(benchHistory(tc.n, tc.keys), p, Options{})
			compared := 0
			for gi := range ix.groups {
				g := &ix.groups[gi]
				if g.tier == nil {
					continue
				}
				var fast, slow cands
				fast.indexed = true
				for _, r := range g.recs {
					if r.out != history.Rejected {
						fast.add(r)
						slow.add(r)
					}
				}
				slices.Sort(fast.hi)
				slices.Sort(slow.hi)
				for _, r := range g.recs {
					if r.out != history.Rejected {
						continue
					}
					for _, off := range []int64{0, int64(time.Millisecond), int64(200 * time.Millisecond)} {
						rt := r
						rt.lo -= off
						for li := range g.tier.Limits {
							l := &g.tier.Limits[li]
							v1, ok1, dec1 := ix.room(&fast, rt, l, 0)
							v2, ok2, dec2 := ix.room(&slow, rt, l, 0)
							require.Equal(t, ok2, ok1, "ok of refusal %d", r.idx)
							require.Equal(t, dec2, dec1, "decided of refusal %d", r.idx)
							if ok1 {
								assert.InDelta(t, v2, v1, 1e-9, "room of refusal %d", r.idx)
							}
							compared++
						}
					}
				}
			}
			require.Positive(t, compared)
		})
	}
}

// TestHallMayExceedCoversHallMax: hallMayExceed says false only when
// hallMax's best excess is below −eps, on sparse clusters (scan path) and
// dense ones (chunk path), with K placed just around the break-even point.
func TestHallMayExceedCoversHallMax(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	var sc scratch
	said := map[bool]int{}
	for _, tc := range []struct {
		n        int
		gap, lat int64 // mean gap between lo, largest width (ns)
	}{
		{3000, 130_000_000, 50_000_000}, // one key at 7.5/s
		{3000, 1_000_000, 50_000_000},   // dense: the chunk path
		{3000, 10_000_000, 0},           // zero-width intervals
		{5000, 200_000, 2_000_000},
	} {
		for trial := range 20 {
			c := make([]rec, tc.n)
			t0 := int64(0)
			for i := range c {
				if rng.IntN(4) > 0 && rng.IntN(300) > 0 { // runs of equal lo, and rare bursts
					t0 += rng.Int64N(2*tc.gap + 1)
				}
				c[i] = rec{lo: t0, hi: t0 + rng.Int64N(tc.lat+1)}
			}
			// Offered at 1.33/gap: at the lower rates long intervals hold
			// the worst excess, at the higher ones the short bursts do.
			r := 1 / float64(tc.gap) * (0.5 + 2*float64(trial%4)/3)
			best0, _, _ := hallMax(c, 0, r, &sc)
			for _, dK := range []float64{-0.5, -2e-6, -5e-7, 0, 5e-7, 2e-6, 0.5} {
				K := best0 + dK
				best, _, _ := hallMax(c, K, r, &sc)
				may := hallMayExceed(c, K, r, &sc)
				if best > -eps {
					require.True(t, may, "n=%d gap=%d trial=%d dK=%g: best %g but ruled out", tc.n, tc.gap, trial, dK, best)
				}
				said[may]++
			}
		}
	}
	require.Positive(t, said[false], "no case ruled out an excess")
	require.Positive(t, said[true], "no case kept an excess")
}

// TestSearchLoMatchesBinarySearch: galloping from any start finds what a
// binary search over the whole slice finds, ties and ends included.
func TestSearchLoMatchesBinarySearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 1))
	for _, n := range []int{0, 1, 2, 7, 100, 1000} {
		rs := make([]rec, n)
		for i := range rs {
			rs[i].lo = rng.Int64N(int64(n)/3 + 1) // many ties
		}
		slices.SortFunc(rs, cmpRec)
		for range 500 {
			tv := rng.Int64N(int64(n)/3+3) - 1
			near := rng.IntN(n+3) - 1
			want, _ := slices.BinarySearchFunc(rs, tv, func(x rec, t int64) int { return cmpI64(x.lo, t) })
			require.Equal(t, want, searchLo(rs, near, tv), "n=%d t=%d near=%d", n, tv, near)
		}
	}
}

// TestSortRecsMatchesSortFunc: the insertion sort with a budget gives
// pdqsort's order on nearly sorted input and on shuffled input (past the
// budget).
func TestSortRecsMatchesSortFunc(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 8))
	for _, shuffle := range []int{0, 3, 50, 100_000} {
		rs := make([]rec, 5000)
		for i := range rs {
			rs[i] = rec{lo: int64(i / 2), hi: int64(i/2) + rng.Int64N(10), idx: int32(i)}
		}
		for i := range rs {
			if j := i + rng.IntN(shuffle+1); j < len(rs) {
				rs[i], rs[j] = rs[j], rs[i]
			}
		}
		want := slices.Clone(rs)
		slices.SortFunc(want, cmpRec)
		sortRecs(rs)
		require.Equal(t, want, rs, "shuffle %d", shuffle)
	}
}
