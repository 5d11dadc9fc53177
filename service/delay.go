package service

import (
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/rlverify/rlverify/headers"
	"github.com/rlverify/rlverify/policy"
)

// maxDelayKeys bounds the keys the delaying path keeps; past it, keys whose
// buckets are full and that have no request waiting are forgotten (a full
// bucket is what a new key starts with, so nothing is lost).
const maxDelayKeys = 100_000

// delayer keeps, for the tiers that delay (policy.Delay), one
// golang.org/x/time/rate limiter per key and limit, and how many of each
// key's requests wait. Its zero value is ready; it is safe for concurrent
// use.
type delayer struct {
	mu   sync.Mutex
	keys map[string]*delayKey
	last time.Time // the latest instant reserve was given
}

type delayKey struct {
	lims    []*rate.Limiter
	waiting int
}

// reserve takes key's next token of every limit at now: the wait until all
// are due and true, or the wait it would have needed and false when that
// passes d.MaxWait or d.Queue requests of the key already wait (nothing is
// used up then).
func (dl *delayer) reserve(now time.Time, key string, limits []policy.Limit, d *policy.Delay) (time.Duration, bool) {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	// x/time/rate counts the time since its last event again when told an
	// earlier instant (its last event moves back): requests that read the
	// clock before another took the lock would refill twice. Time here
	// never goes back.
	given := now
	if now.Before(dl.last) {
		now = dl.last
	}
	dl.last = now
	if dl.keys == nil {
		dl.keys = map[string]*delayKey{}
	}
	k := dl.keys[key]
	if k == nil {
		if len(dl.keys) >= maxDelayKeys {
			dl.prune(now)
		}
		k = &delayKey{}
		for _, l := range limits {
			k.lims = append(k.lims, rate.NewLimiter(rate.Limit(l.R()), int(min(l.Capacity, 1<<30))))
		}
		dl.keys[key] = k
	}
	rs := make([]*rate.Reservation, len(k.lims))
	wait := time.Duration(0)
	for i, l := range k.lims {
		rs[i] = l.ReserveN(now, 1)
		wait = max(wait, rs[i].DelayFrom(now))
	}
	if wait > d.MaxWait.D() || (wait > 0 && d.Queue > 0 && k.waiting >= d.Queue) {
		for _, r := range rs {
			r.CancelAt(now)
		}
		return wait, false
	}
	wait += now.Sub(given) // the caller waits from its own instant
	if wait > 0 {
		k.waiting++
	}
	return wait, true
}

// done ends a wait of key.
func (dl *delayer) done(key string) {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	if k := dl.keys[key]; k != nil {
		k.waiting--
	}
}

func (dl *delayer) prune(now time.Time) {
	for key, k := range dl.keys {
		full := k.waiting == 0
		for _, l := range k.lims {
			full = full && l.TokensAt(now) >= float64(l.Burst())
		}
		if full {
			delete(dl.keys, key)
		}
	}
}

// serveDelayed decides a request of a tier that delays: its tokens are
// reserved at once (golang.org/x/time/rate's Reserve), and it is held until
// they are due when that is within the declared max_wait and fewer than
// queue requests of the key wait; otherwise it is refused with 429 and
// Retry-After (the wait its tokens needed, rounded up), using up nothing.
// The delaying path decides in memory, per instance (the tier's store
// limiter is not consulted), and sends no RateLimit headers: declare
// ratelimit: none and x_ratelimit: false with a delay.
func (s *Service) serveDelayed(w http.ResponseWriter, r *http.Request, tier *policy.Tier, d *policy.Delay, storeKey, tenant string) {
	wait, ok := s.delays.reserve(s.now(), storeKey, tier.Limits, d)
	if !ok {
		headers.SetRetryAfter(w.Header(), wait)
		http.Error(w, http.StatusText(http.StatusTooManyRequests), http.StatusTooManyRequests)
		return
	}
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
		}
		s.delays.done(storeKey)
		if r.Context().Err() != nil {
			return
		}
	}
	s.admit(w, r, tenant)
}
