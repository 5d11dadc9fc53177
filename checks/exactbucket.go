package checks

import (
	"cmp"
	"math"
	"slices"
	"sort"
)

// The exact witness search for a token bucket (and GCRA), run by
// judgeBucket on a cluster only when both EDF passes found no schedule and
// hallCert no certificate.
//
// A bucket of capacity K ≥ 1 refilling at r admits decisions x_1 ≤ … ≤ x_m
// iff GCRA does (τ = (K−1)/r, T = 1/r): each x_j has a virtual start
// v_j = max(v_{j−1} + T, x_j) ≤ x_j + τ. Conversely, starts v_j ∈ [x_j,
// x_j + τ] spaced at least T apart (in any order) put at most
// ⌊r·(b−a) + K − 1⌋ + 1 ≤ K + r·(b−a) decisions in every [a, b]. So the
// admissions of a cluster fit the bucket iff unit jobs of length T, job j
// released at lo_j and due (finished) by hi_j + K/r, can be run on one
// machine without overlap (x_j = max(lo_j, v_j − τ)). That is
// 1|r_j, p_j = p, d_j|feasibility, which Garey, Johnson, Simons and Tarjan
// ("Scheduling unit-time tasks with arbitrary release times and deadlines",
// SIAM J. Comput. 10(2), 1981) decide exactly:
//
//  1. forbidden regions: for each release ρ, in decreasing order, schedule
//     the jobs released at or after ρ backwards, latest deadline first, each
//     as late as possible and never starting inside a region found so far;
//     let c be the earliest start. c < ρ: no schedule exists. c < ρ + T: no
//     job may start in (c − T, ρ), a new forbidden region;
//  2. earliest deadline first, as early as possible but never starting a job
//     inside a forbidden region. Without a failure in 1 this schedules every
//     job by its deadline.
//
// Forward EDF (edf) is step 2 without regions: it spends a token at once,
// where waiting for a request about to arrive with an earlier deadline was
// the only way. Step 1 keeps the backward schedule of the jobs released so
// far (in decreasing release) in decreasing deadline order and re-packs, on
// each insertion, only the jobs with a smaller deadline that it pushes
// earlier: for requests of about equal latency, those sent a little later
// and answered sooner than the new one. The work is bounded
// (exactWorkPerJob per job); past it the search gives up (exactBudget).
// The schedule found is checked against the bucket itself (replayBucket)
// before it counts as a witness.

// exactOutcome is what exactWitness concluded about a cluster.
type exactOutcome int

const (
	// exactFeasible: a schedule was found and replayed; the cluster fits.
	exactFeasible exactOutcome = iota
	// exactInfeasible: step 1 proved that no schedule exists.
	exactInfeasible
	// exactBudget: the search gave up (its work bound; or a schedule that
	// did not replay within the tolerances, or K < 1 or r not finite and
	// positive, outside the reduction): nothing is proven.
	exactBudget
)

// exactWorkPerJob bounds the average re-packing work per job of step 1.
const exactWorkPerJob = 256

// exactTol is the slack, in ns, the exact search allows a decision beyond
// its request's interval, as edf does (float rounding of T = 1/r).
const exactTol = 1.0

// exactWitness decides whether the admissions of cluster c (sorted by lo)
// fit a bucket of capacity K refilling at r tokens per ns.
func exactWitness(c []rec, K, r float64) exactOutcome {
	m := len(c)
	if m == 0 || float64(m) <= K {
		return exactFeasible
	}
	if K < 1 || !(r > 0) || math.IsInf(r, 0) {
		return exactBudget // the reduction needs a token per request and a finite refill
	}
	base := c[0].lo
	T := 1 / r
	tau := (K - 1) / r
	rel := make([]float64, m)
	due := make([]float64, m) // latest start of the job: hi + τ (+ tolerance)
	for i, x := range c {
		rel[i] = float64(x.lo - base)
		due[i] = float64(x.hi-base) + tau + exactTol
	}
	fr, ok := forbiddenRegions(rel, due, T, exactWorkPerJob*m+1024)
	switch {
	case !ok && fr == nil:
		return exactBudget
	case !ok:
		return exactInfeasible
	}
	v, ok := edfWithRegions(rel, due, T, fr)
	if !ok {
		return exactBudget // step 2 cannot fail after step 1; be safe
	}
	x := make([]float64, m)
	for i := range v {
		x[i] = math.Max(rel[i], v[i]-tau)
	}
	if !replayBucket(x, rel, due, tau, K, r) {
		return exactBudget
	}
	return exactFeasible
}

// regions are disjoint open intervals (a, b) in which no job may start,
// sorted by decreasing b.
type regions struct{ a, b []float64 }

func (g *regions) add(a, b float64) {
	if n := len(g.a); n > 0 && b > g.a[n-1] {
		// b never exceeds the last region's right end (releases decrease):
		// only the last region can overlap; merge.
		g.a[n-1] = math.Min(g.a[n-1], a)
		return
	}
	g.a = append(g.a, a)
	g.b = append(g.b, b)
}

// find returns the region that holds x strictly inside, or -1.
func (g *regions) find(x float64) int {
	// First region (decreasing b) with b ≤ x; the one before it may hold x.
	k := sort.Search(len(g.b), func(i int) bool { return g.b[i] <= x })
	if k > 0 && g.a[k-1] < x && x < g.b[k-1] {
		return k - 1
	}
	return -1
}

// down moves a backward start x out of a region: to the region's left end.
func (g *regions) down(x float64) float64 {
	if k := g.find(x); k >= 0 {
		return g.a[k]
	}
	return x
}

// up moves a forward start x out of a region: to the region's right end.
func (g *regions) up(x float64) float64 {
	if k := g.find(x); k >= 0 {
		return g.b[k]
	}
	return x
}

// forbiddenRegions is step 1 for jobs released at rel (non-decreasing) with
// latest starts due and length T. It returns the regions and true, or
// (non-nil, false) when no schedule exists, or (nil, false) when the work
// exceeded budget.
func forbiddenRegions(rel, due []float64, T float64, budget int) (*regions, bool) {
	m := len(rel)
	g := &regions{}
	// The backward schedule of the jobs inserted so far, in decreasing
	// latest start; s is each one's start. s is decreasing along the slice.
	type slot struct{ due, s float64 }
	bs := make([]slot, 0, m)
	work := 0
	for i := m - 1; i >= 0; {
		rho := rel[i]
		for ; i >= 0 && rel[i] == rho; i-- {
			d := due[i]
			q := len(bs)
			for q > 0 && bs[q-1].due < d {
				q--
			}
			bs = append(bs, slot{})
			copy(bs[q+1:], bs[q:])
			bs[q] = slot{due: d, s: math.Inf(1)}
			work += len(bs) - q
			// Re-pack from q: each as late as possible, before the one
			// above it, never inside a region; stop where nothing moves.
			prev := math.Inf(1)
			if q > 0 {
				prev = bs[q-1].s
			}
			for k := q; k < len(bs); k++ {
				s := g.down(math.Min(prev-T, bs[k].due))
				if k > q && s == bs[k].s {
					break
				}
				bs[k].s = s
				prev = s
				work++
			}
			if work > budget {
				return nil, false
			}
		}
		c := bs[len(bs)-1].s
		if c < rho {
			return g, false
		}
		if c < rho+T {
			g.add(c-T, rho)
		}
	}
	return g, true
}

// edfWithRegions is step 2: the start of each job, or false when one
// misses its latest start.
func edfWithRegions(rel, due []float64, T float64, g *regions) ([]float64, bool) {
	m := len(rel)
	v := make([]float64, m)
	h := &idxHeap[float64]{key: due}
	t := math.Inf(-1)
	i := 0
	for i < m || len(h.ix) > 0 {
		if len(h.ix) == 0 {
			t = math.Max(t, rel[i])
		}
		for {
			for i < m && rel[i] <= t {
				h.push(int32(i))
				i++
			}
			u := g.up(t)
			if u == t {
				break
			}
			t = u
		}
		j := h.pop()
		if t > due[j] {
			return nil, false
		}
		v[j] = t
		t += T
	}
	return v, true
}

// idxHeap is a min-heap of indices into key, by key: the job to serve
// next, earliest deadline first (edf's by hi, edfWithRegions' by due).
type idxHeap[T cmp.Ordered] struct {
	key []T
	ix  []int32
}

func (h *idxHeap[T]) push(x int32) {
	h.ix = append(h.ix, x)
	for j := len(h.ix) - 1; j > 0; {
		p := (j - 1) / 2
		if h.key[h.ix[j]] >= h.key[h.ix[p]] {
			break
		}
		h.ix[j], h.ix[p] = h.ix[p], h.ix[j]
		j = p
	}
}

func (h *idxHeap[T]) pop() int32 {
	top := h.ix[0]
	last := len(h.ix) - 1
	h.ix[0] = h.ix[last]
	h.ix = h.ix[:last]
	for j := 0; ; {
		l, m := 2*j+1, j
		if l < len(h.ix) && h.key[h.ix[l]] < h.key[h.ix[m]] {
			m = l
		}
		if l+1 < len(h.ix) && h.key[h.ix[l+1]] < h.key[h.ix[m]] {
			m = l + 1
		}
		if m == j {
			break
		}
		h.ix[j], h.ix[m] = h.ix[m], h.ix[j]
		j = m
	}
	return top
}

// replayBucket checks decisions x (relative times) against the requests'
// intervals [rel, due − τ] and a bucket of capacity K refilling at r that
// starts full, within the tolerances edf allows.
func replayBucket(x, rel, due []float64, tau, K, r float64) bool {
	for i := range x {
		if x[i] < rel[i] || x[i] > due[i]-tau {
			return false
		}
	}
	s := slices.Clone(x)
	slices.Sort(s)
	L, t := K, s[0]
	for _, y := range s {
		L = math.Min(K, L+r*(y-t))
		t = y
		if L < 1-1e-9 {
			return false
		}
		L--
	}
	return true
}
