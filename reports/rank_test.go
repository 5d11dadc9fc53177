package reports

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

// rank is the nearest-rank percentile q of sorted s (non-empty): the
// oracle ranks is held to.
func rank(s []int64, q float64) int64 { return s[rankIndex(len(s), q)] }

// TestRanksAgreeWithSorting: the selection gives what sorting and taking
// the nearest rank gives, on shapes that break naive quickselects.
func TestRanksAgreeWithSorting(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	shapes := map[string]func(n int) []int64{
		"random": func(n int) []int64 {
			s := make([]int64, n)
			for i := range s {
				s[i] = rng.Int64N(1e9)
			}
			return s
		},
		"few values": func(n int) []int64 {
			s := make([]int64, n)
			for i := range s {
				s[i] = rng.Int64N(3)
			}
			return s
		},
		"sorted": func(n int) []int64 {
			s := make([]int64, n)
			for i := range s {
				s[i] = int64(i)
			}
			return s
		},
		"reversed": func(n int) []int64 {
			s := make([]int64, n)
			for i := range s {
				s[i] = int64(n - i)
			}
			return s
		},
		"organ pipe": func(n int) []int64 {
			s := make([]int64, n)
			for i := range s {
				s[i] = int64(min(i, n-i))
			}
			return s
		},
		"all equal": func(n int) []int64 { return make([]int64, n) },
	}
	qs := []float64{0.5, 0.9, 0.99, 1}
	for name, gen := range shapes {
		for _, n := range []int{1, 2, 3, 17, 100, 1000, 10_007} {
			s := gen(n)
			sorted := slices.Clone(s)
			slices.Sort(sorted)
			want := make([]int64, len(qs))
			for j, q := range qs {
				want[j] = rank(sorted, q)
			}
			got := ranks(slices.Clone(s), qs...)
			assert.Equal(t, want, got, "%s, n=%d", name, n)
			// Two percentiles of the same rank (n=1: every one).
			assert.Equal(t, []int64{sorted[0], sorted[0]}, ranks(slices.Clone(s), 0, 0), "%s, n=%d", name, n)
		}
	}
}

func BenchmarkRanks(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	s := make([]int64, 1_000_000)
	for i := range s {
		s[i] = rng.Int64N(50e6)
	}
	w := make([]int64, len(s))
	b.Run("select", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			copy(w, s)
			ranks(w, 0.5, 0.9, 0.99, 1)
		}
	})
	b.Run("sort", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			copy(w, s)
			slices.Sort(w)
			_, _, _ = rank(w, 0.5), rank(w, 0.9), rank(w, 0.99)
		}
	})
}
