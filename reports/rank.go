package reports

import (
	"math/bits"
	"slices"
)

// rankIndex is the index, in sorted order, of the nearest-rank percentile q
// of n values (n > 0).
func rankIndex(n int, q float64) int {
	i := int(float64(n)*q+0.999999999) - 1
	return min(max(i, 0), n-1)
}

// ranks returns the nearest-rank percentiles qs (ascending) of s
// (non-empty), reordering s. A selection is linear where the sort it
// replaces was n log n: the report's latency percentiles were a tenth of
// `rlverify check` on 10^6 events.
func ranks(s []int64, qs ...float64) []int64 {
	out := make([]int64, len(qs))
	hi := len(s)
	for j := len(qs) - 1; j >= 0; j-- {
		i := rankIndex(len(s), qs[j])
		// s[:hi] holds the hi smallest values (every later selection left
		// them there), and i < hi unless two percentiles share a rank.
		if i >= hi {
			out[j] = out[j+1]
			continue
		}
		if i == hi-1 {
			// The largest of s[:hi]: a scan, no selection.
			at := slices.Index(s[:hi], slices.Max(s[:hi]))
			s[at], s[i] = s[i], s[at]
		} else {
			selectNth(s[:hi], i)
		}
		out[j], hi = s[i], i
	}
	return out
}

// selectNth reorders s so that s[k] is the value sorted order puts there,
// with no greater value before it and no smaller one after it.
// Quickselect with Hoare's partition around a median of three (equal
// values split evenly, so duplicates cost nothing); past 2·log2(n) rounds
// it sorts what is left, so no input makes it quadratic.
func selectNth(s []int64, k int) {
	budget := 2 * bits.Len(uint(len(s)))
	for len(s) > 16 {
		if budget == 0 {
			slices.Sort(s)
			return
		}
		budget--
		// The median of three goes first: a pivot taken from s[0] keeps
		// both sides of Hoare's partition non-empty.
		m, l := len(s)/2, len(s)-1
		if s[m] < s[0] {
			s[m], s[0] = s[0], s[m]
		}
		if s[l] < s[0] {
			s[l], s[0] = s[0], s[l]
		}
		if s[l] < s[m] {
			s[l], s[m] = s[m], s[l]
		}
		s[0], s[m] = s[m], s[0]
		pivot := s[0]
		i, j := -1, len(s)
		for {
			for i++; s[i] < pivot; i++ {
			}
			for j--; s[j] > pivot; j-- {
			}
			if i >= j {
				break
			}
			s[i], s[j] = s[j], s[i]
		}
		// s[:j+1] ≤ pivot ≤ s[j+1:], with 0 ≤ j < len(s)-1.
		if k <= j {
			s = s[:j+1]
		} else {
			s, k = s[j+1:], k-j-1
		}
	}
	slices.Sort(s)
}
