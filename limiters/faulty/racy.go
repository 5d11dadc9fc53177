// Package faulty holds deliberately broken limiters. Each one documents the
// invariant it breaks; they exist so every checker can be shown to catch the
// defect it is written for. Never use them to protect anything.
package faulty

import (
	"context"
	"sync"
	"time"

	"github.com/rlverify/rlverify/limiters"
	"github.com/rlverify/rlverify/policy"
)

// DefaultGap is the pause between the read and the write of a racy limiter,
// standing in for the network round trip between a GET and a SET.
const DefaultGap = 2 * time.Millisecond

// RacyTokenBucket reads the bucket, thinks for a moment, then writes it back
// without any lock held across the two steps. Concurrent requests read the
// same level and each admits itself: it breaks "admitted ≤ K + r·Δt"
// (oversell). Only the first limit is enforced.
type RacyTokenBucket struct {
	k, r  float64
	gap   time.Duration
	sleep func(time.Duration)
	mu    sync.Mutex // guards the map, not the read-modify-write
	state map[string]*racyState
}

type racyState struct {
	tokens float64
	last   time.Time
}

// NewRacyTokenBucket builds the racy bucket; gap is the read-to-write pause
// (DefaultGap when 0).
func NewRacyTokenBucket(limits []policy.Limit, gap time.Duration) *RacyTokenBucket {
	if gap == 0 {
		gap = DefaultGap
	}
	l := limits[0]
	return &RacyTokenBucket{k: l.K(), r: l.R(), gap: gap, sleep: time.Sleep, state: map[string]*racyState{}}
}

// Allow implements limiters.Limiter, badly.
func (b *RacyTokenBucket) Allow(_ context.Context, now time.Time, key string, n int) (limiters.Decision, error) {
	// Read.
	b.mu.Lock()
	st, ok := b.state[key]
	if !ok {
		st = &racyState{tokens: b.k, last: now}
		b.state[key] = st
	}
	tokens, last := st.tokens, st.last
	b.mu.Unlock()

	b.sleep(b.gap) // the round trip between GET and SET

	tokens = min(b.k, tokens+b.r*now.Sub(last).Seconds())
	d := limiters.Decision{Limit: int64(b.k)}
	if tokens >= float64(n) {
		tokens -= float64(n)
		d.Allowed = true
	} else {
		d.RetryAfter = time.Duration((float64(n) - tokens) / b.r * float64(time.Second))
	}
	d.Remaining = int64(tokens)
	d.ResetAfter = time.Duration((b.k - tokens) / b.r * float64(time.Second))
	// Write, clobbering whatever concurrent requests wrote meanwhile.
	b.mu.Lock()
	st.tokens, st.last = tokens, now
	b.mu.Unlock()
	return d, nil
}
