package limiters

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/rlverify/rlverify/policy"
)

// The in-memory limiters below share one shape: a sharded table of per-key
// states (one per limit), decisions under the key's shard lock, all limits
// checked before any is consumed (a request rejected by one limit consumes
// from none), and a per-key expiry instant after which the state equals a
// fresh one and is dropped lazily. They never read a clock.

// floorDiv returns ⌊a/b⌋ for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// ---------------------------------------------------------------- token bucket

// TokenBucket is the in-memory token bucket: capacity K, refill r/s, every
// key starting full. A key idle until its bucket is full again is dropped.
// Build it with NewTokenBucket; the zero value is not usable. Safe for
// concurrent use.
type TokenBucket struct {
	// p holds the limits' parameters; Reload swaps them whole.
	p   atomic.Pointer[[]bucketParams]
	tab *table[bucketState]
}

type bucketParams struct {
	k    int64 // capacity in nano-tokens
	r    float64
	kInt int64
}

type bucketState struct {
	level int64 // nano-tokens
	last  int64 // unix ns of the last update
}

// NewTokenBucket builds a bucket per limit; a request must fit every limit
// and a rejected one consumes from none.
func NewTokenBucket(limits []policy.Limit) (*TokenBucket, error) {
	if err := validate(limits); err != nil {
		return nil, err
	}
	tb := &TokenBucket{tab: newTable[bucketState](len(limits))}
	tb.p.Store(bucketParamsOf(limits))
	return tb, nil
}

func bucketParamsOf(limits []policy.Limit) *[]bucketParams {
	ps := make([]bucketParams, 0, len(limits))
	for _, l := range limits {
		ps = append(ps, bucketParams{k: l.Capacity * nanoPerToken, r: l.R(), kInt: l.Capacity})
	}
	return &ps
}

// Reload implements Reloader: limits (one for each of the bucket's, in its
// order) take the place of its own from the next decision on; every key
// keeps its level, capped at a lowered capacity when it is next decided.
func (tb *TokenBucket) Reload(limits []policy.Limit) error {
	if err := validate(limits); err != nil {
		return err
	}
	if old := tb.p.Load(); len(limits) != len(*old) {
		return fmt.Errorf("limiters: reload with %d limit(s) for a bucket of %d", len(limits), len(*old))
	}
	tb.p.Store(bucketParamsOf(limits))
	return nil
}

// Allow implements Limiter; it never fails.
func (tb *TokenBucket) Allow(_ context.Context, now time.Time, key string, n int) (Decision, error) {
	return tb.AllowAt(now.UnixNano(), key, n), nil
}

// AllowAt decides at now (Unix ns). A state written at a later now than this
// one is not refilled backwards: time never runs back for a key.
func (tb *TokenBucket) AllowAt(now int64, key string, n int) Decision {
	ps := *tb.p.Load()
	sh, c, fresh := tb.tab.lock(key, now)
	st := c.st
	if fresh {
		for i := range st {
			st[i] = bucketState{level: ps[i].k, last: now}
		}
	}
	need := int64(n) * nanoPerToken
	var lv [8]int64
	d := Decision{Allowed: true}
	tight := -1
	var worst int64
	for i := range st {
		p, s := &ps[i], &st[i]
		lv[i] = refill(s.level, p.k, p.r, now-s.last)
		if lv[i] < need {
			d.Allowed = false
			w := waitFor(lv[i], min(need, p.k), p.r)
			if tight < 0 || w > worst {
				worst, tight = w, i
			}
		}
	}
	if d.Allowed {
		var exp int64
		for i := range st {
			p, s := &ps[i], &st[i]
			lv[i] -= need
			s.level = lv[i]
			s.last = max(s.last, now)
			exp = max(exp, s.last+waitFor(s.level, p.k, p.r))
			if tight < 0 || lv[i] < lv[tight] {
				tight = i
			}
		}
		c.exp = exp
	}
	sh.mu.Unlock()
	p := &ps[tight]
	d.Limit = p.kInt
	d.Remaining = lv[tight] / nanoPerToken
	d.RetryAfter = time.Duration(worst)
	d.ResetAfter = time.Duration(waitFor(lv[tight], p.k, p.r))
	return d
}

// ------------------------------------------------------------------------ GCRA

// GCRA is the generic cell rate algorithm: per key a theoretical arrival
// time (TAT); a request of cost n is admitted when TAT' = max(TAT, now) +
// n·T stays within τ = K·T of now, with emission interval T = 1/r. It admits
// exactly what a token bucket (K, r) admits, storing one number per limit.
// Build it with NewGCRA. Safe for concurrent use.
type GCRA struct {
	p   []gcraParams
	tab *table[int64]
}

type gcraParams struct {
	t    float64 // emission interval, ns
	tau  int64   // K·T, ns
	kInt int64
}

// NewGCRA builds a GCRA per limit.
func NewGCRA(limits []policy.Limit) (*GCRA, error) {
	if err := validate(limits); err != nil {
		return nil, err
	}
	g := &GCRA{tab: newTable[int64](len(limits))}
	for _, l := range limits {
		t := 1e9 / l.R()
		g.p = append(g.p, gcraParams{t: t, tau: int64(math.Round(float64(l.Capacity) * t)), kInt: l.Capacity})
	}
	return g, nil
}

// Allow implements Limiter; it never fails.
func (g *GCRA) Allow(_ context.Context, now time.Time, key string, n int) (Decision, error) {
	return g.AllowAt(now.UnixNano(), key, n), nil
}

// AllowAt decides at now (Unix ns).
func (g *GCRA) AllowAt(now int64, key string, n int) Decision {
	sh, c, fresh := g.tab.lock(key, now)
	st := c.st
	if fresh {
		for i := range st {
			st[i] = now
		}
	}
	var nt [8]int64
	d := Decision{Allowed: true}
	tight := -1
	var worst int64
	for i := range st {
		p := &g.p[i]
		base := max(st[i], now)
		nt[i] = base + int64(math.Round(float64(n)*p.t))
		if nt[i]-now > p.tau {
			d.Allowed = false
			w := nt[i] - now - p.tau
			if int64(n) > p.kInt {
				w = base - now // never fits: advise the time to full
			}
			nt[i] = base
			if tight < 0 || w > worst {
				worst, tight = w, i
			}
		}
	}
	if d.Allowed {
		var exp int64
		best := int64(math.MaxInt64)
		for i := range st {
			st[i] = nt[i]
			exp = max(exp, nt[i])
			if r := gcraRemaining(&g.p[i], nt[i]-now); r < best {
				best, tight = r, i
			}
		}
		c.exp = exp
	} else {
		for i := range st {
			if i != tight {
				nt[i] = max(st[i], now)
			}
		}
	}
	sh.mu.Unlock()
	p := &g.p[tight]
	d.Limit = p.kInt
	d.Remaining = gcraRemaining(p, nt[tight]-now)
	d.RetryAfter = time.Duration(worst)
	d.ResetAfter = time.Duration(max(0, nt[tight]-now))
	return d
}

// gcraRemaining is the whole requests that fit now with a TAT ahead by ahead.
func gcraRemaining(p *gcraParams, ahead int64) int64 {
	return max(0, int64(math.Floor(float64(p.tau-max(0, ahead))/p.t)))
}

// ---------------------------------------------------------------- fixed window

// FixedWindow counts requests in epoch-aligned windows [k·W, (k+1)·W) of Unix
// time and admits while the count stays ≤ N. It can admit 2N in a rolling W
// around a boundary; that is its documented nature, not a defect. Build it
// with NewFixedWindow. Safe for concurrent use.
type FixedWindow struct {
	p   []windowParams
	tab *table[windowState]
}

type windowParams struct {
	n int64
	w int64 // ns
}

// windowParamsOf validates limits and returns their (N, W) views, shared by
// the window families.
func windowParamsOf(limits []policy.Limit) ([]windowParams, error) {
	if err := validate(limits); err != nil {
		return nil, err
	}
	p := make([]windowParams, len(limits))
	for i, l := range limits {
		p[i] = windowParams{n: l.Count, w: int64(l.W())}
	}
	return p, nil
}

type windowState struct {
	win  int64 // window index
	cnt  int64 // admitted in window win
	prev int64 // admitted in window win-1 (sliding counter only)
}

// NewFixedWindow builds a fixed window per limit.
func NewFixedWindow(limits []policy.Limit) (*FixedWindow, error) {
	p, err := windowParamsOf(limits)
	if err != nil {
		return nil, err
	}
	return &FixedWindow{p: p, tab: newTable[windowState](len(limits))}, nil
}

// Allow implements Limiter; it never fails.
func (fw *FixedWindow) Allow(_ context.Context, now time.Time, key string, n int) (Decision, error) {
	return fw.AllowAt(now.UnixNano(), key, n), nil
}

// AllowAt decides at now (Unix ns).
func (fw *FixedWindow) AllowAt(now int64, key string, n int) Decision {
	sh, c, fresh := fw.tab.lock(key, now)
	st := c.st
	if fresh {
		clear(st)
	}
	var cnt [8]int64
	d := Decision{Allowed: true}
	tight := -1
	var worst int64
	for i := range st {
		p, s := &fw.p[i], &st[i]
		idx := floorDiv(now, p.w)
		if s.win == idx {
			cnt[i] = s.cnt
		}
		if cnt[i]+int64(n) > p.n {
			d.Allowed = false
			w := (idx+1)*p.w - now
			if tight < 0 || w > worst {
				worst, tight = w, i
			}
		}
	}
	if d.Allowed {
		var exp int64
		for i := range st {
			p, s := &fw.p[i], &st[i]
			idx := floorDiv(now, p.w)
			cnt[i] += int64(n)
			s.win, s.cnt = idx, cnt[i]
			exp = max(exp, (idx+1)*p.w)
			if tight < 0 || p.n-cnt[i] < fw.p[tight].n-cnt[tight] {
				tight = i
			}
		}
		c.exp = exp
	}
	sh.mu.Unlock()
	p := &fw.p[tight]
	end := (floorDiv(now, p.w)+1)*p.w - now
	d.Limit = p.n
	d.Remaining = max(0, p.n-cnt[tight])
	d.RetryAfter = time.Duration(worst)
	if cnt[tight] > 0 {
		d.ResetAfter = time.Duration(end)
	}
	return d
}

// ----------------------------------------------------------------- sliding log

// SlidingLog is the in-memory sliding-window log: at most N admitted
// requests in any window (t-W, t]. Memory grows with N per key; a key whose
// newest entry is older than W is dropped. Build it with NewSlidingLog. Safe
// for concurrent use.
type SlidingLog struct {
	p   []windowParams
	tab *table[logState]
}

type logState struct {
	times []int64 // admitted times, ascending from head
	head  int
}

// NewSlidingLog builds a log per limit.
func NewSlidingLog(limits []policy.Limit) (*SlidingLog, error) {
	p, err := windowParamsOf(limits)
	if err != nil {
		return nil, err
	}
	return &SlidingLog{p: p, tab: newTable[logState](len(limits))}, nil
}

// Allow implements Limiter; it never fails.
func (sl *SlidingLog) Allow(_ context.Context, now time.Time, key string, n int) (Decision, error) {
	return sl.AllowAt(now.UnixNano(), key, n), nil
}

// AllowAt decides at now (Unix ns).
func (sl *SlidingLog) AllowAt(now int64, key string, n int) Decision {
	sh, c, fresh := sl.tab.lock(key, now)
	st := c.st
	if fresh {
		for i := range st {
			st[i].times, st[i].head = st[i].times[:0], 0
		}
	}
	d := Decision{Allowed: true}
	tight := -1
	var worst int64
	for i := range st {
		p, s := &sl.p[i], &st[i]
		// Drop entries at or before now-W: they left the window.
		for s.head < len(s.times) && s.times[s.head] <= now-p.w {
			s.head++
		}
		live := s.times[s.head:]
		if int64(len(live)+n) > p.n {
			d.Allowed = false
			var w int64
			if idx := len(live) + n - int(p.n) - 1; int64(n) <= p.n {
				w = live[idx] + p.w - now
			} else if len(live) > 0 {
				w = live[len(live)-1] + p.w - now
			}
			if tight < 0 || w > worst {
				worst, tight = w, i
			}
		}
	}
	if d.Allowed {
		var exp int64
		for i := range st {
			p, s := &sl.p[i], &st[i]
			if s.head > 0 && len(s.times)+n > cap(s.times) {
				m := copy(s.times, s.times[s.head:])
				s.times, s.head = s.times[:m], 0
			}
			for j := 0; j < n; j++ {
				s.times = append(s.times, now)
			}
			exp = max(exp, s.times[len(s.times)-1]+p.w)
			if tight < 0 || p.n-int64(len(s.times)-s.head) < sl.p[tight].n-int64(len(st[tight].times)-st[tight].head) {
				tight = i
			}
		}
		c.exp = exp
	}
	p, s := &sl.p[tight], &st[tight]
	live := s.times[s.head:]
	d.Limit = p.n
	d.Remaining = max(0, p.n-int64(len(live)))
	if len(live) > 0 {
		d.ResetAfter = time.Duration(live[len(live)-1] + p.w - now)
	}
	sh.mu.Unlock()
	d.RetryAfter = time.Duration(worst)
	return d
}

// ------------------------------------------------------------ sliding counter

// SlidingCounter approximates a rolling window with two epoch-aligned fixed
// windows: the estimate n ≈ n_prev·(1 − elapsed/W) + n_cur, and a request of
// cost c is admitted when n + c ≤ N. Constant memory per key; it can admit
// up to 2N in a rolling W in the worst case (policy.Limit.ErrorBound).
// Build it with NewSlidingCounter. Safe for concurrent use.
type SlidingCounter struct {
	p   []windowParams
	tab *table[windowState]
}

// NewSlidingCounter builds a sliding counter per limit.
func NewSlidingCounter(limits []policy.Limit) (*SlidingCounter, error) {
	p, err := windowParamsOf(limits)
	if err != nil {
		return nil, err
	}
	return &SlidingCounter{p: p, tab: newTable[windowState](len(limits))}, nil
}

// Allow implements Limiter; it never fails.
func (sc *SlidingCounter) Allow(_ context.Context, now time.Time, key string, n int) (Decision, error) {
	return sc.AllowAt(now.UnixNano(), key, n), nil
}

// counterRetry returns how long until a request of cost n fits, given the
// previous and current counts and the time el into the current window.
// Shared reasoning with the Lua script (which works in µs).
func counterRetry(prev, cur, n, limit int64, w, el int64) int64 {
	fw := float64(w)
	if n > limit { // never fits: advise the time until the estimate is 0
		return counterReset(prev, cur, w, el)
	}
	if cur+n <= limit && prev > 0 {
		// Wait inside this window for the previous window's weight to fall.
		at := ceilDiv(fw*float64(prev-(limit-cur-n)), float64(prev))
		return max(0, at-el)
	}
	// Wait for the next window, where the current count becomes the previous.
	at := int64(0)
	if cur > 0 {
		at = max(0, ceilDiv(fw*float64(cur-(limit-n)), float64(cur)))
	}
	return w - el + at
}

func counterReset(prev, cur, w, el int64) int64 {
	switch {
	case cur > 0:
		return 2*w - el
	case prev > 0:
		return w - el
	}
	return 0
}

func counterRemaining(prev, cur, limit, w, el int64) int64 {
	est := float64(prev)*float64(w-el)/float64(w) + float64(cur)
	return max(0, int64(math.Floor(float64(limit)-est)))
}

// AllowAt decides at now (Unix ns).
func (sc *SlidingCounter) AllowAt(now int64, key string, n int) Decision {
	sh, c, fresh := sc.tab.lock(key, now)
	st := c.st
	if fresh {
		clear(st)
	}
	var prev, cur [8]int64
	d := Decision{Allowed: true}
	tight := -1
	var worst int64
	cost := int64(n)
	for i := range st {
		p, s := &sc.p[i], &st[i]
		idx := floorDiv(now, p.w)
		switch s.win {
		case idx:
			prev[i], cur[i] = s.prev, s.cnt
		case idx - 1:
			prev[i] = s.cnt
		}
		el := now - idx*p.w
		if float64(prev[i])*float64(p.w-el)+float64(cur[i]+cost)*float64(p.w) > float64(p.n)*float64(p.w) {
			d.Allowed = false
			w := counterRetry(prev[i], cur[i], cost, p.n, p.w, el)
			if tight < 0 || w > worst {
				worst, tight = w, i
			}
		}
	}
	if d.Allowed {
		var exp int64
		best := int64(math.MaxInt64)
		for i := range st {
			p, s := &sc.p[i], &st[i]
			idx := floorDiv(now, p.w)
			cur[i] += cost
			s.win, s.prev, s.cnt = idx, prev[i], cur[i]
			exp = max(exp, (idx+2)*p.w)
			if r := counterRemaining(prev[i], cur[i], p.n, p.w, now-idx*p.w); r < best {
				best, tight = r, i
			}
		}
		c.exp = exp
	}
	sh.mu.Unlock()
	p := &sc.p[tight]
	el := now - floorDiv(now, p.w)*p.w
	d.Limit = p.n
	d.Remaining = counterRemaining(prev[tight], cur[tight], p.n, p.w, el)
	d.RetryAfter = time.Duration(worst)
	d.ResetAfter = time.Duration(counterReset(prev[tight], cur[tight], p.w, el))
	return d
}
