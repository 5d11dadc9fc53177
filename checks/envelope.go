package checks

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// eps absorbs float rounding when a count is compared with a bound.
const eps = 1e-6

// cert is a proven violation of one limit: every request in recs must have
// been decided inside [from, to], and there are more of them than the limit
// allows there.
type cert struct {
	limit    *policy.Limit
	from, to int64
	count    int
	bound    float64
	recs     []rec
	// inst is the instance of a per-instance limit's certificate, else -1.
	inst int
}

// envStatus is the outcome of judging one set of admissions against a limit.
type envStatus struct {
	certs []cert
	// unknown counts clusters for which neither a witness schedule nor a
	// certificate was found.
	unknown int
	// infeasible counts those of the unknown clusters that the exact search
	// proved to have no schedule (a proof over several intervals, which no
	// single interval certificate shows); the others exceeded its work bound.
	infeasible int
	// worstRolling is the most admissions (by send time) in any rolling W
	// (fixed windows only).
	worstRolling int
}

// scratch holds buffers reused across keys so the hot loops do not allocate.
type scratch struct {
	heap   []int32
	lo, hi []int64
	ord    []int32
	seg    segTree
	recs   []rec
	deque  []int32
}

// judgeLimit judges admissions rs (sorted by lo) against limit l: all of
// them together, or each instance's alone when l is declared per instance.
func (ix *index) judgeLimit(rs []rec, l *policy.Limit, sc *scratch) envStatus {
	if len(rs) == 0 {
		return envStatus{}
	}
	if !l.PerInstance() {
		st := ix.judgeScope(rs, l, sc)
		for i := range st.certs {
			st.certs[i].inst = -1
		}
		return st
	}
	byInst := map[int16][]rec{}
	var order []int16
	for _, r := range rs {
		if _, ok := byInst[r.inst]; !ok {
			order = append(order, r.inst)
		}
		byInst[r.inst] = append(byInst[r.inst], r)
	}
	slices.Sort(order)
	var st envStatus
	for _, in := range order {
		one := ix.judgeScope(byInst[in], l, sc)
		for i := range one.certs {
			one.certs[i].inst = int(in)
			one.certs[i].recs = append([]rec(nil), one.certs[i].recs...)
		}
		st.certs = append(st.certs, one.certs...)
		st.unknown += one.unknown
		st.infeasible += one.infeasible
		st.worstRolling = max(st.worstRolling, one.worstRolling)
	}
	return st
}

// judgeScope judges admissions rs (sorted by lo) of one quota against l.
func (ix *index) judgeScope(rs []rec, l *policy.Limit, sc *scratch) envStatus {
	var st envStatus
	switch l.Algorithm {
	case policy.TokenBucket, policy.GCRA:
		ix.judgeBucket(rs, l, sc, &st)
	case policy.FixedWindow:
		if l.AnchoredAtFirst() {
			judgeAnchored(rs, l, &st)
		} else {
			ix.judgeFixed(rs, l, &st)
		}
	case policy.SlidingLog:
		judgeSliding(rs, l, float64(l.Count), sc, &st)
	case policy.SlidingCounter:
		judgeSliding(rs, l, math.Floor(float64(l.Count)*(1+l.ErrorBound)+eps), sc, &st)
	}
	return st
}

// judgeBucket splits rs into clusters separated by a full refill and judges
// each: witness (EDF forwards), else certificate (max excess), else witness
// (EDF backwards, then the exact search, which decides whether a schedule
// exists: see exactWitness).
func (ix *index) judgeBucket(rs []rec, l *policy.Limit, sc *scratch, st *envStatus) {
	K := l.K()
	if float64(len(rs)) <= K {
		return
	}
	r := l.R() / 1e9 // tokens per ns
	refill := int64(math.Ceil(K / r))
	start := 0
	maxHi := rs[0].hi
	for i := 1; i <= len(rs); i++ {
		if i < len(rs) && rs[i].lo-maxHi < refill {
			if rs[i].hi > maxHi {
				maxHi = rs[i].hi
			}
			continue
		}
		c := rs[start:i]
		if float64(len(c)) > K && !edfWitness(c, K, r, sc) {
			if ct, ok := hallCert(c, K, r, l, sc); ok {
				st.certs = append(st.certs, ct)
			} else if !edfWitnessReverse(c, K, r, sc) {
				switch exactWitness(c, K, r) {
				case exactInfeasible:
					st.unknown++
					st.infeasible++
				case exactBudget:
					st.unknown++
				}
			}
		}
		if i < len(rs) {
			start, maxHi = i, rs[i].hi
		}
	}
}

// edfWitness tries to schedule every request of c (sorted by lo) inside its
// interval, serving the earliest deadline first as soon as the bucket holds
// a token. Success is a witness that the admissions fit the bucket.
func edfWitness(c []rec, K, r float64, sc *scratch) bool {
	sc.lo = slices.Grow(sc.lo[:0], len(c))
	sc.hi = slices.Grow(sc.hi[:0], len(c))
	for _, x := range c {
		sc.lo = append(sc.lo, x.lo)
		sc.hi = append(sc.hi, x.hi)
	}
	return edf(sc.lo, sc.hi, K, r, sc)
}

// edfWitnessReverse runs the same schedule on the time-reversed requests
// (the envelope K + r·(b−a) is symmetric in time): as late as possible,
// latest release first.
func edfWitnessReverse(c []rec, K, r float64, sc *scratch) bool {
	sc.ord = orderByHi(sc.ord, c)
	slices.Reverse(sc.ord) // the order of equal hi does not change the schedule
	sc.lo = slices.Grow(sc.lo[:0], len(c))
	sc.hi = slices.Grow(sc.hi[:0], len(c))
	for _, i := range sc.ord {
		sc.lo = append(sc.lo, -c[i].hi)
		sc.hi = append(sc.hi, -c[i].lo)
	}
	return edf(sc.lo, sc.hi, K, r, sc)
}

// edf runs the schedule on intervals sorted by lo. Times are taken relative
// to lo[0] so float64 keeps nanosecond precision.
func edf(lo, hi []int64, K, r float64, sc *scratch) bool {
	n := len(lo)
	base := lo[0]
	h := &idxHeap[int64]{key: hi, ix: sc.heap[:0]}
	defer func() { sc.heap = h.ix[:0] }()
	L := K
	t := 0.0
	i := 0
	advance := func(nt float64) {
		if nt > t {
			L = math.Min(K, L+r*(nt-t))
			t = nt
		}
	}
	for i < n || len(h.ix) > 0 {
		if len(h.ix) == 0 {
			advance(float64(lo[i] - base))
		}
		for i < n && float64(lo[i]-base) <= t {
			h.push(int32(i))
			i++
		}
		if L >= 1-1e-9 {
			j := h.pop()
			if float64(hi[j]-base) < t-1 {
				return false
			}
			L--
			continue
		}
		tn := t + (1-L)/r
		if i < n && float64(lo[i]-base) < tn {
			advance(float64(lo[i] - base))
			continue
		}
		if float64(hi[h.ix[0]]-base) < tn-1 {
			return false
		}
		t, L = tn, 1
	}
	return true
}

// hallCert finds the interval [a, b] maximising the number of requests of c
// that must be decided inside it minus what the bucket allows there. A
// positive excess is a certificate. The exact sweep (hallMax) runs only when
// hallMayExceed cannot rule an excess out, so the answer is that of the
// sweep alone; both are O(m log m) in the m requests of c.
func hallCert(c []rec, K, r float64, l *policy.Limit, sc *scratch) (cert, bool) {
	if !hallMayExceed(c, K, r, sc) {
		return cert{}, false
	}
	best, bestK, bestB := hallMax(c, K, r, sc)
	if best <= eps || bestK < 0 {
		return cert{}, false
	}
	a := c[bestK].lo
	ct := cert{limit: l, from: a, to: bestB, bound: K + r*float64(bestB-a)}
	for _, x := range c {
		if x.lo >= a && x.hi <= bestB {
			ct.recs = append(ct.recs, x)
		}
	}
	ct.count = len(ct.recs)
	if float64(ct.count) <= ct.bound+eps {
		return cert{}, false
	}
	return ct, true
}

// hallMax sweeps b = hi over c (sorted by lo) in increasing order with a
// max segment tree over the candidates a = lo_k: it returns the largest
// excess count(lo ≥ a, hi ≤ b) − r·(b−a) − K, the first b reaching it and
// the first such k. O(m log m) time in the m requests of c.
func hallMax(c []rec, K, r float64, sc *scratch) (best float64, bestK int, bestB int64) {
	m := len(c)
	base := c[0].lo
	sc.ord = sc.ord[:0]
	for i := range c {
		sc.ord = append(sc.ord, int32(i))
	}
	slices.SortFunc(sc.ord, func(a, b int32) int { return cmpI64(c[a].hi, c[b].hi) })
	seg := &sc.seg
	seg.init(m, func(k int) float64 { return r * float64(c[k].lo-base) })
	best, bestK, bestB = math.Inf(-1), -1, 0
	ub := 0
	for j := 0; j < m; {
		b := c[sc.ord[j]].hi
		for ; j < m && c[sc.ord[j]].hi == b; j++ {
			seg.add(0, int(sc.ord[j]), 1)
		}
		// Candidates a = lo_k with lo_k ≤ b.
		ub = searchLo(c, ub, b+1)
		if ub == 0 {
			continue
		}
		v, k := seg.max(0, ub-1)
		if ex := v - r*float64(b-base) - K; ex > best {
			best, bestK, bestB = ex, k, b
		}
	}
	return best, bestK, bestB
}

// orderByHi returns in ord the indices of c (sorted by lo) in increasing
// hi; equal hi in any order. c sorted by lo is nearly sorted by hi (an
// interval is short next to the gaps between many requests), so an
// insertion sort with a budget of moves does it in linear time, else
// pdqsort in O(m log m).
func orderByHi(ord []int32, c []rec) []int32 {
	ord = ord[:0]
	for i := range c {
		ord = append(ord, int32(i))
	}
	budget := 8*len(c) + 64
	for i := 1; i < len(ord); i++ {
		x := ord[i]
		j := i
		for j > 0 && c[ord[j-1]].hi > c[x].hi {
			j--
		}
		if j == i {
			continue
		}
		if budget -= i - j; budget < 0 {
			slices.SortFunc(ord, func(a, b int32) int { return cmpI64(c[a].hi, c[b].hi) })
			return ord
		}
		copy(ord[j+1:i+1], ord[j:i])
		ord[j] = x
	}
	return ord
}

// hallChunk is the fewest requests in one chunk of hallMayExceed.
const hallChunk = 256

// hallMayExceed reports false only when no interval of c holds more
// requests than the bucket allows (hallMax's excess is below −eps), with
// work linear in c beyond one sort, instead of one segment tree over all
// of c (which, for one key of 10^6 requests, is cache-bound). With S the
// widest interval of c, every pair (a, b) is one of two kinds:
//   - b − a ≥ S: a request with lo < a ends before a + S ≤ b, so
//     count(lo ≥ a, hi ≤ b) = #{hi ≤ b} − #{lo < a}, and the best a for
//     each b is a running minimum (two pointers over lo and hi order);
//   - b − a < S: the requests counted have lo in [a, a+S), so they lie in
//     a's chunk or the next one when chunks span at least S; hallMax over
//     each pair of neighbouring chunks covers these pairs.
//
// Any other pair a chunk sweep sees counts a subset of its requests, a
// lower bound, so the largest value found is the true maximum.
func hallMayExceed(c []rec, K, r float64, sc *scratch) bool {
	m := len(c)
	if m <= 4*hallChunk {
		return true
	}
	S := int64(0)
	for _, x := range c {
		S = max(S, x.hi-x.lo)
	}
	base := c[0].lo
	sc.ord = orderByHi(sc.ord, c)
	p, first := 0, 0    // c[:p] have lo ≤ b − S; first starts c[p−1]'s run of equal lo
	minH := math.Inf(1) // min over a = lo_k ≤ b − S of #{lo < a} − r·a
	for j := 0; j < m; {
		b := c[sc.ord[j]].hi
		for j < m && c[sc.ord[j]].hi == b {
			j++
		}
		for p < m && c[p].lo <= b-S {
			if p == 0 || c[p].lo != c[p-1].lo {
				first = p
			}
			minH = math.Min(minH, float64(first)-r*float64(c[p].lo-base))
			p++
		}
		if p > 0 && float64(j)-r*float64(b-base)-minH-K > -eps {
			return true
		}
	}
	// Near pairs, by a scan back from each b over the a in (b − S, b] while
	// that stays cheap (few requests per S, as for one key at any rate a
	// limiter allows), else by chunks.
	work := 0
	for j, ub := 0, 0; j < m; j++ {
		b := c[sc.ord[j]].hi
		for ub < m && c[ub].lo <= b {
			ub++
		}
		cnt := 0
		for k := ub - 1; k >= 0 && c[k].lo > b-S; k-- {
			if c[k].hi <= b {
				cnt++
			}
			if (k == 0 || c[k-1].lo != c[k].lo) && float64(cnt)-r*float64(b-c[k].lo)-K > -eps {
				return true
			}
			work++
		}
		if work > hallScan*m {
			return hallNearChunks(c, S, K, r, sc)
		}
	}
	return false
}

// hallScan bounds the average scan per request in hallMayExceed.
const hallScan = 32

// hallNearChunks is hallMayExceed's pairs with b − a < S by hallMax over
// neighbouring chunks of at least hallChunk requests that span at least S
// and never split a run of equal lo.
func hallNearChunks(c []rec, S int64, K, r float64, sc *scratch) bool {
	m := len(c)
	var bounds []int
	for s := 0; s < m; {
		bounds = append(bounds, s)
		e := min(m, s+hallChunk)
		for e < m && c[e].lo < c[s].lo+S {
			e++
		}
		for e < m && c[e].lo == c[e-1].lo {
			e++
		}
		s = e
	}
	bounds = append(bounds, m)
	for i := 0; i+1 < len(bounds); i++ {
		end := bounds[min(i+2, len(bounds)-1)]
		if best, _, _ := hallMax(c[bounds[i]:end], K, r, sc); best > -eps {
			return true
		}
	}
	return false
}

// judgeSliding finds groups of requests, consecutive by send time, that all
// had to be decided within less than W and number more than limit.
func judgeSliding(rs []rec, l *policy.Limit, limit float64, sc *scratch, st *envStatus) {
	M := int(limit) + 1
	if len(rs) < M {
		return
	}
	W := int64(l.W())
	// Sliding maximum of hi over rs[i : i+M] with a monotone deque.
	dq := sc.deque[:0]
	defer func() { sc.deque = dq[:0] }()
	next := 0 // first index not yet pushed
	for i := 0; i+M <= len(rs); i++ {
		for ; next < i+M; next++ {
			for len(dq) > 0 && rs[dq[len(dq)-1]].hi <= rs[next].hi {
				dq = dq[:len(dq)-1]
			}
			dq = append(dq, int32(next))
		}
		for dq[0] < int32(i) {
			dq = dq[1:]
		}
		mx := rs[dq[0]].hi
		if mx-rs[i].lo >= W {
			continue
		}
		// Extend the group while it still fits in less than W.
		j := i + M
		for j < len(rs) && max(mx, rs[j].hi)-rs[i].lo < W {
			mx = max(mx, rs[j].hi)
			j++
		}
		st.certs = append(st.certs, cert{limit: l, from: rs[i].lo, to: mx, count: j - i, bound: limit, recs: rs[i:j:j]})
		// Continue after this group; rebuild the deque from there.
		i = j - 1
		dq = dq[:0]
		next = j
	}
}

// judgeFixed counts admissions whose whole interval lies inside one
// epoch-aligned window, and measures the worst rolling window by send time.
func (ix *index) judgeFixed(rs []rec, l *policy.Limit, st *envStatus) {
	W := int64(l.W())
	N := int(l.Count)
	win := func(off int64) int64 { return floorDiv(ix.startNs+off, W) }
	// rs is sorted by lo, so windows of lo are non-decreasing; collect runs.
	for i := 0; i < len(rs); {
		k := win(rs[i].lo)
		j := i
		var in []rec
		for j < len(rs) && win(rs[j].lo) == k {
			if win(rs[j].hi) == k {
				in = append(in, rs[j])
			}
			j++
		}
		if len(in) > N {
			from := k*W - ix.startNs
			st.certs = append(st.certs, cert{limit: l, from: from, to: from + W - 1, count: len(in), bound: float64(N), recs: in})
		}
		i = j
	}
	// Worst rolling window by send time (lo + slack = Sent).
	j := 0
	for i := range rs {
		for rs[i].lo-rs[j].lo >= W {
			j++
		}
		if n := i - j + 1; n > st.worstRolling {
			st.worstRolling = n
		}
	}
}

// judgeAnchored judges a fixed window that opens at a key's first request
// and closes W later, the next opening at the first request after that.
// The anchors are known only within intervals: window j opens at some
// a_j ∈ [L_j, H_j]. a_1 is the first decision, so L_1 = min lo, H_1 = min
// hi; a_{j+1} is the first decision at or after a_j + W, so
// L_{j+1} = max(L_j + W, min{lo : hi ≥ L_j + W}) and
// H_{j+1} = min{hi : lo ≥ H_j + W}. A request with lo ≥ H_j and
// hi < L_j + W was decided inside window j whatever the anchors were; more
// than N admissions of that kind in one window are a certificate (for
// j ≥ 2, lo ≥ H_{j−1} + W already places a request after window j−1, which
// admits more of them). rs are
// admissions only, so requests the limiter refused do not move the anchors
// (a refused request never opens a window). The worst rolling window by send
// time is measured as for epoch windows.
func judgeAnchored(rs []rec, l *policy.Limit, st *envStatus) {
	W := int64(l.W())
	N := int(l.Count)
	if len(rs) > N {
		// rs is sorted by lo; span bounds hi − lo, so scans start there.
		span := int64(0)
		H := rs[0].hi
		for _, r := range rs {
			span = max(span, r.hi-r.lo)
			H = min(H, r.hi)
		}
		L := rs[0].lo
		from := func(t int64) int { // first index with lo ≥ t
			i, _ := slices.BinarySearchFunc(rs, t, func(x rec, t int64) int { return cmpI64(x.lo, t) })
			return i
		}
		// after: a request with lo ≥ after was decided after window j−1
		// closed (every decision then is at or after a_j); none for j = 1.
		after := int64(math.MinInt64)
		for {
			var in []rec
			for i := from(after); i < len(rs) && rs[i].lo < L+W; i++ {
				if rs[i].hi < L+W {
					in = append(in, rs[i])
				}
			}
			if len(in) > N {
				st.certs = append(st.certs, cert{limit: l, from: in[0].lo, to: maxHi(in), count: len(in), bound: float64(N), recs: in})
			}
			nextL, nextH := int64(math.MaxInt64), int64(math.MaxInt64)
			for i := from(L + W - span); i < len(rs) && rs[i].lo < nextL; i++ {
				if rs[i].hi >= L+W {
					nextL = rs[i].lo
				}
			}
			for i := from(H + W); i < len(rs) && rs[i].lo <= nextH; i++ {
				nextH = min(nextH, rs[i].hi)
			}
			if nextH == math.MaxInt64 || nextL == math.MaxInt64 {
				break
			}
			after = H + W
			L, H = max(L+W, nextL), nextH
		}
	}
	j := 0
	for i := range rs {
		for rs[i].lo-rs[j].lo >= W {
			j++
		}
		if n := i - j + 1; n > st.worstRolling {
			st.worstRolling = n
		}
	}
}

func maxHi(rs []rec) int64 {
	m := rs[0].hi
	for _, r := range rs {
		m = max(m, r.hi)
	}
	return m
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// maxIn is the most admissions limit l allows for one key in any closed
// interval of length d, starting from a full bucket or empty windows.
func maxIn(l *policy.Limit, d time.Duration) float64 {
	if d < 0 {
		d = 0
	}
	n := float64(l.Count)
	switch l.Algorithm {
	case policy.TokenBucket, policy.GCRA:
		return l.K() + l.R()*d.Seconds()
	case policy.FixedWindow:
		return n * float64(int64(d)/int64(l.W())+2)
	case policy.SlidingCounter:
		return math.Floor(n*(1+l.ErrorBound)+eps) * float64(int64(d)/int64(l.W())+1)
	}
	return n * float64(int64(d)/int64(l.W())+1)
}

// certMessage explains a certificate for people.
func certMessage(ct *cert) string {
	if ct.inst >= 0 {
		return fmt.Sprintf("on instance %d (the limit is per instance): %s", ct.inst, certText(ct))
	}
	return certText(ct)
}

func certText(ct *cert) string {
	d := time.Duration(ct.to - ct.from)
	l := ct.limit
	if l.AnchoredAtFirst() {
		return fmt.Sprintf("%d requests admitted in %s, all inside one window of %s opened by the key's request then; the limit is %d", ct.count, fmtDur(d), l.Window, l.Count)
	}
	switch l.Algorithm {
	case policy.TokenBucket, policy.GCRA:
		return fmt.Sprintf("%d requests admitted in %s; a bucket of K=%d refilling at %s allows at most %s",
			ct.count, fmtDur(d), l.Capacity, policy.FormatRate(l.R()), fmtF(ct.bound))
	case policy.FixedWindow:
		return fmt.Sprintf("%d requests admitted inside one fixed window of %s; the limit is %d", ct.count, l.Window, l.Count)
	case policy.SlidingCounter:
		return fmt.Sprintf("%d requests admitted within %s (< W=%s); a sliding counter of N=%d with error bound %g allows at most %s",
			ct.count, fmtDur(d), l.Window, l.Count, l.ErrorBound, fmtF(ct.bound))
	}
	return fmt.Sprintf("%d requests admitted within %s (< W=%s); a sliding log allows at most %d", ct.count, fmtDur(d), l.Window, l.Count)
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.String()
}

// fmtF formats a bound with one decimal, without a trailing ".0".
func fmtF(v float64) string {
	s := fmt.Sprintf("%.1f", math.Floor(v*10+eps)/10)
	if len(s) > 2 && s[len(s)-2:] == ".0" {
		s = s[:len(s)-2]
	}
	return s
}

// evidence turns a certificate into Evidence for key.
func (ix *index) evidence(key string, ct *cert, msg string) Evidence {
	idl, total := ix.idList(ct.recs)
	if msg == "" {
		msg = certMessage(ct)
	}
	return Evidence{Key: key, Limit: ct.limit.Name, From: ct.from, To: ct.to, Bound: ct.bound, Observed: float64(ct.count),
		RequestIDs: idl, TotalIDs: total, Message: msg}
}

// admitted appends to dst the admissions of rs that the envelope judges
// (each as many times as the tokens it asked for):
// those decided by the limiter itself (variants only when withVariants).
// Admissions during a store fault (and its recovery grace) were made by the
// declared failure mode and are judged by fail-mode instead.
func admitted(dst, rs []rec, withVariants bool) []rec {
	dst = slices.Grow(dst, len(rs)) // at most all of rs (unweighted): one allocation, not log n
	for _, r := range rs {
		if r.out == history.Admitted && (!r.fault || r.changed) && (withVariants || !r.variant) {
			// A weighted admission of cost n is n unit admissions in the
			// same interval; a peek (cost 0) consumes nothing.
			for range r.tokens() {
				dst = append(dst, r)
			}
		}
	}
	return dst
}

// segTree is a max segment tree with range add, over n leaves.
type segTree struct {
	n    int
	mx   []float64
	lazy []float64
}

func (s *segTree) init(n int, leaf func(int) float64) {
	s.n = n
	size := 1
	for size < n {
		size <<= 1
	}
	need := 2 * size
	if cap(s.mx) < need {
		s.mx = make([]float64, need)
		s.lazy = make([]float64, need)
	}
	s.mx = s.mx[:need]
	s.lazy = s.lazy[:need]
	clear(s.lazy)
	s.build(1, 0, n-1, leaf)
}

func (s *segTree) build(node, l, r int, leaf func(int) float64) {
	if l == r {
		s.mx[node] = leaf(l)
		return
	}
	m := (l + r) / 2
	s.build(2*node, l, m, leaf)
	s.build(2*node+1, m+1, r, leaf)
	s.mx[node] = math.Max(s.mx[2*node], s.mx[2*node+1])
}

func (s *segTree) add(l, r int, v float64) { s.addRec(1, 0, s.n-1, l, r, v) }

func (s *segTree) addRec(node, nl, nr, l, r int, v float64) {
	if r < nl || nr < l {
		return
	}
	if l <= nl && nr <= r {
		s.mx[node] += v
		s.lazy[node] += v
		return
	}
	m := (nl + nr) / 2
	s.addRec(2*node, nl, m, l, r, v)
	s.addRec(2*node+1, m+1, nr, l, r, v)
	s.mx[node] = math.Max(s.mx[2*node], s.mx[2*node+1]) + s.lazy[node]
}

// max returns the largest leaf value in [l, r] and its index.
func (s *segTree) max(l, r int) (float64, int) { return s.maxRec(1, 0, s.n-1, l, r) }

func (s *segTree) maxRec(node, nl, nr, l, r int) (float64, int) {
	if r < nl || nr < l {
		return math.Inf(-1), -1
	}
	if nl == nr {
		return s.mx[node], nl
	}
	if l <= nl && nr <= r {
		// Descend to the arg max.
		m := (nl + nr) / 2
		acc := s.lazy[node]
		if s.mx[2*node] >= s.mx[2*node+1] {
			v, k := s.maxRec(2*node, nl, m, l, r)
			return v + acc, k
		}
		v, k := s.maxRec(2*node+1, m+1, nr, l, r)
		return v + acc, k
	}
	m := (nl + nr) / 2
	v1, k1 := s.maxRec(2*node, nl, m, l, r)
	v2, k2 := s.maxRec(2*node+1, m+1, nr, l, r)
	if v2 > v1 {
		return v2 + s.lazy[node], k2
	}
	return v1 + s.lazy[node], k1
}
