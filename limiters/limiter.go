// Package limiters holds the reference rate-limiting algorithms and their
// state stores. Every algorithm decides at a time it is given (simulated time
// in tests); the Redis store takes time from Redis itself.
//
// limiters imports only policy (and its own sub-packages' dependencies); it
// knows nothing of HTTP, attacks or checks.
package limiters

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rlverify/rlverify/policy"
)

// Decision is the answer for one request.
type Decision struct {
	Allowed bool
	// Limit is the K or N of the limit that decided (the tightest one).
	Limit int64
	// Remaining is what is left of that limit after this decision.
	Remaining int64
	// RetryAfter is, for a denied request, how long until the same request
	// would be admitted if nothing else consumed; 0 when allowed.
	RetryAfter time.Duration
	// ResetAfter is how long until the limit is back to full (empty window).
	ResetAfter time.Duration
}

// Limiter decides requests for keys. Implementations are safe for concurrent
// use. key is the full store key of one tenant+action+version (see
// policy.Policy.LimitKey); a limiter with several limits derives one sub-key
// per limit from it.
type Limiter interface {
	// Allow decides a request of cost n for key at now. Stores that keep
	// their own clock (Redis TIME) ignore now. An error means the store
	// could not decide; the caller applies the failure mode.
	Allow(ctx context.Context, now time.Time, key string, n int) (Decision, error)
}

// ErrStore wraps every error caused by the state store being unavailable
// or slow, as opposed to a programming or configuration error.
var ErrStore = errors.New("limiter store unavailable")

// Closer is implemented by limiters that hold resources.
type Closer interface{ Close() error }

// validate checks the limits a constructor is given.
func validate(limits []policy.Limit, want ...policy.Algorithm) error {
	if len(limits) == 0 {
		return errors.New("limiters: no limits given")
	}
	for i, l := range limits {
		if l.Capacity <= 0 || l.Rate <= 0 || l.Count <= 0 || l.Window <= 0 {
			return fmt.Errorf("limiters: limit %d (%s) is not normalized: K=%d r=%g N=%d W=%s", i, l.Name, l.Capacity, float64(l.Rate), l.Count, l.Window)
		}
	}
	return nil
}

// nanoTokens is a token count in units of 1e-9 token. Integer arithmetic
// keeps decisions exact at equality (1.0 token is enough for one request)
// where floats would drift.
const nanoPerToken = 1_000_000_000

// refill returns the bucket level after dt at rate r tokens/s, capped at k.
func refill(level, k int64, r float64, dt time.Duration) int64 {
	if dt <= 0 {
		return level
	}
	missing := k - level
	if missing <= 0 {
		return k
	}
	// Time to fill completely, in ns; beyond it the bucket is full.
	full := float64(missing) / r // nano-tokens / (tokens/s) = ns
	if float64(dt) >= full {
		return k
	}
	add := int64(float64(dt) * r) // ns·tokens/s = nano-tokens
	if level+add > k {
		return k
	}
	return level + add
}

// waitFor returns how long a bucket at level needs to reach need at rate r.
func waitFor(level, need int64, r float64) time.Duration {
	if level >= need {
		return 0
	}
	ns := float64(need-level) / r
	return time.Duration(ns) + 1 // round up: never advise too short
}
