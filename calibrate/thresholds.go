package calibrate

import (
	"math"

	"github.com/rlverify/rlverify/policy"
)

// admitAll returns the smallest capacity K (bucket families, at l's rate)
// or count N (window families, at l's window) with which the reference
// limiter of l.Algorithm admits every one of the arrivals ts (ascending
// Unix ns, one request each). One pass, O(len(ts)) time and O(1) memory
// (the sliding log's second pointer walks the same slice).
//
// It follows the arithmetic of limiters/memory.go step for step, because
// with every request admitted the state sequence of each algorithm does not
// depend on K or N: the token bucket's deficit below full (nano-tokens,
// the same integer refill), GCRA's theoretical arrival time, and the
// window counts. The answer is the largest need over the arrivals. The
// property test TestAdmitAllMatchesTheReferenceLimiters replays K and K−1
// through limiters to check it.
func admitAll(l policy.Limit, ts []int64) int64 {
	if len(ts) == 0 {
		return 1
	}
	switch l.Algorithm {
	case policy.TokenBucket:
		return bucketNeed(l.R(), ts)
	case policy.GCRA:
		return gcraNeed(l.R(), ts)
	case policy.FixedWindow:
		return fixedNeed(int64(l.W()), ts)
	case policy.SlidingLog:
		return logNeed(int64(l.W()), ts)
	case policy.SlidingCounter:
		return counterNeed(int64(l.W()), ts)
	}
	return int64(len(ts))
}

const nanoPerToken = 1_000_000_000

// bucketNeed: D is how far below full the bucket is, in nano-tokens. The
// reference refills level (= K − D) by int64(dt·r), to full when dt ≥
// (K−level)/r, and admits when the refilled level is ≥ 1 token; so the
// request needs K ≥ D_refilled + 1 token, and afterwards D = D_refilled + 1.
func bucketNeed(r float64, ts []int64) int64 {
	var d, worst int64
	last := ts[0]
	for _, now := range ts {
		dt := now - last
		switch {
		case dt <= 0 || d <= 0:
			d = max(d, 0)
		case float64(dt) >= float64(d)/r:
			d = 0
		default:
			d = max(0, d-int64(float64(dt)*r))
		}
		d += nanoPerToken
		worst = max(worst, d)
		last = max(last, now)
	}
	return (worst + nanoPerToken - 1) / nanoPerToken
}

// gcraNeed: with every request admitted the TAT is max(TAT, now) + T
// (rounded as the reference rounds); a request needs τ = round(K·T) ≥
// TAT − now.
func gcraNeed(r float64, ts []int64) int64 {
	t := 1e9 / r
	step := int64(math.Round(t))
	var tat, worst int64
	for i, now := range ts {
		if i == 0 {
			tat = now
		}
		tat = max(tat, now) + step
		worst = max(worst, tat-now)
	}
	k := max(1, int64(math.Ceil(float64(worst)/t)))
	for k > 1 && int64(math.Round(float64(k-1)*t)) >= worst {
		k--
	}
	for int64(math.Round(float64(k)*t)) < worst {
		k++
	}
	return k
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// fixedNeed: the most arrivals in one epoch-aligned window.
func fixedNeed(w int64, ts []int64) int64 {
	var worst, n int64
	cur := floorDiv(ts[0], w)
	for _, now := range ts {
		if idx := floorDiv(now, w); idx != cur {
			cur, n = idx, 0
		}
		n++
		worst = max(worst, n)
	}
	return worst
}

// logNeed: the most arrivals in a window (now−W, now], the reference's
// "entries at or before now−W have left".
func logNeed(w int64, ts []int64) int64 {
	var worst int64
	head := 0
	for i, now := range ts {
		for ts[head] <= now-w {
			head++
		}
		worst = max(worst, int64(i-head+1))
	}
	return worst
}

// counterNeed: the reference admits when prev·(W−el) + (cur+1)·W ≤ N·W in
// float64, with prev and cur the counts of the previous and current
// epoch-aligned windows; the smallest such N, by the same expression.
func counterNeed(w int64, ts []int64) int64 {
	var worst, prev, cur int64
	win := floorDiv(ts[0], w)
	fw := float64(w)
	for _, now := range ts {
		idx := floorDiv(now, w)
		switch {
		case idx == win:
		case idx == win+1:
			prev, cur = cur, 0
		default:
			prev, cur = 0, 0
		}
		win = idx
		el := now - idx*w
		lhs := float64(prev)*float64(w-el) + float64(cur+1)*fw
		n := max(1, int64(math.Ceil(lhs/fw)))
		for n > 1 && lhs <= float64(n-1)*fw {
			n--
		}
		for lhs > float64(n)*fw {
			n++
		}
		worst = max(worst, n)
		cur++
	}
	return worst
}
