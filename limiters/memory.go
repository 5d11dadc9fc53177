package limiters

import (
	"context"
	"hash/maphash"
	"sync"
	"time"

	"github.com/rlverify/rlverify/policy"
)

// shards spreads keys over independent locks.
const shards = 64

var seed = maphash.MakeSeed()

type shard[S any] struct {
	mu sync.Mutex
	m  map[string]*S
}

// table is a sharded map from key to per-key state.
type table[S any] struct {
	s [shards]shard[S]
}

func newTable[S any]() *table[S] {
	t := &table[S]{}
	for i := range t.s {
		t.s[i].m = make(map[string]*S)
	}
	return t
}

// lock returns the locked shard holding key and the key's state, created with
// mk on first sight. The caller unlocks.
func (t *table[S]) lock(key string, mk func() *S) (*shard[S], *S) {
	sh := &t.s[maphash.String(seed, key)%shards]
	sh.mu.Lock()
	st := sh.m[key]
	if st == nil {
		st = mk()
		sh.m[key] = st
	}
	return sh, st
}

// TokenBucket is the in-memory token bucket: capacity K, refill r/s,
// starting full. Its zero value is not usable; build it with NewTokenBucket.
// Safe for concurrent use.
type TokenBucket struct {
	limits []bucketParams
	tab    *table[[]bucketState]
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
	tb := &TokenBucket{tab: newTable[[]bucketState]()}
	for _, l := range limits {
		tb.limits = append(tb.limits, bucketParams{k: l.Capacity * nanoPerToken, r: l.R(), kInt: l.Capacity})
	}
	return tb, nil
}

// Allow implements Limiter.
func (tb *TokenBucket) Allow(_ context.Context, now time.Time, key string, n int) (Decision, error) {
	return tb.AllowAt(now.UnixNano(), key, n), nil
}

// AllowAt decides at now (unix ns) without a context; it never fails.
func (tb *TokenBucket) AllowAt(now int64, key string, n int) Decision {
	sh, st := tb.tab.lock(key, func() *[]bucketState {
		s := make([]bucketState, len(tb.limits))
		for i, p := range tb.limits {
			s[i] = bucketState{level: p.k, last: now}
		}
		return &s
	})
	defer sh.mu.Unlock()
	states := *st
	need := int64(n) * nanoPerToken
	d := Decision{Allowed: true}
	tight := -1
	for i := range states {
		p := &tb.limits[i]
		s := &states[i]
		if now > s.last {
			s.level = refill(s.level, p.k, p.r, time.Duration(now-s.last))
			s.last = now
		}
		if s.level < need {
			d.Allowed = false
			if w := waitFor(s.level, need, p.r); w > d.RetryAfter {
				d.RetryAfter = w
				tight = i
			}
		}
	}
	if d.Allowed {
		for i := range states {
			states[i].level -= need
		}
	}
	// Report the limit with the least remaining (or the one that denied).
	if tight < 0 {
		best := int64(-1)
		for i := range states {
			rem := states[i].level / nanoPerToken
			if best < 0 || rem < best {
				best, tight = rem, i
			}
		}
	}
	p, s := &tb.limits[tight], &states[tight]
	d.Limit = p.kInt
	d.Remaining = s.level / nanoPerToken
	d.ResetAfter = waitFor(s.level, p.k, p.r)
	if d.ResetAfter == 1 {
		d.ResetAfter = 0
	}
	return d
}

// SlidingLog is the in-memory sliding-window log: at most N admitted
// requests in any window (t-W, t]. Memory grows with N per key.
type SlidingLog struct {
	limits []windowParams
	tab    *table[[]logState]
}

type windowParams struct {
	n int64
	w int64 // ns
}

type logState struct {
	times []int64 // admitted times, ascending, a ring would do but N is small
}

// NewSlidingLog builds a log per limit.
func NewSlidingLog(limits []policy.Limit) (*SlidingLog, error) {
	if err := validate(limits); err != nil {
		return nil, err
	}
	sl := &SlidingLog{tab: newTable[[]logState]()}
	for _, l := range limits {
		sl.limits = append(sl.limits, windowParams{n: l.Count, w: int64(l.W())})
	}
	return sl, nil
}

// Allow implements Limiter.
func (sl *SlidingLog) Allow(_ context.Context, now time.Time, key string, n int) (Decision, error) {
	return sl.AllowAt(now.UnixNano(), key, n), nil
}

// AllowAt decides at now (unix ns).
func (sl *SlidingLog) AllowAt(now int64, key string, n int) Decision {
	sh, st := sl.tab.lock(key, func() *[]logState {
		s := make([]logState, len(sl.limits))
		return &s
	})
	defer sh.mu.Unlock()
	states := *st
	d := Decision{Allowed: true}
	tight := 0
	var bestRem int64 = -1
	for i := range states {
		p, s := &sl.limits[i], &states[i]
		// Drop entries at or before now-W: they left the window.
		drop := 0
		for drop < len(s.times) && s.times[drop] <= now-p.w {
			drop++
		}
		if drop > 0 {
			s.times = append(s.times[:0], s.times[drop:]...)
		}
		if int64(len(s.times)+n) > p.n {
			d.Allowed = false
			// The request fits once enough of the oldest entries expire.
			idx := len(s.times) + n - int(p.n) - 1
			if idx < 0 || idx >= len(s.times) {
				d.RetryAfter = time.Duration(p.w) // n > N: never fits
			} else if w := time.Duration(s.times[idx] + p.w - now); w > d.RetryAfter {
				d.RetryAfter = w
				tight = i
			}
		}
	}
	if d.Allowed {
		for i := range states {
			for j := 0; j < n; j++ {
				states[i].times = append(states[i].times, now)
			}
		}
		for i := range states {
			rem := sl.limits[i].n - int64(len(states[i].times))
			if bestRem < 0 || rem < bestRem {
				bestRem, tight = rem, i
			}
		}
	}
	p, s := &sl.limits[tight], &states[tight]
	d.Limit = p.n
	d.Remaining = max(0, p.n-int64(len(s.times)))
	if len(s.times) > 0 {
		d.ResetAfter = time.Duration(s.times[len(s.times)-1] + p.w - now)
	}
	return d
}
