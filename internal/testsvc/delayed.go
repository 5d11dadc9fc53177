package testsvc

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// The delayed service's route, identity and defaults (policies/delayed.yaml).
const (
	DelayedPath            = "/jobs"
	DelayedHeader          = "X-Client-Id"
	DefaultDelayedCapacity = 5
	DefaultDelayedRate     = 5.0
	DefaultDelayedMaxWait  = 600 * time.Millisecond
	DefaultDelayedQueue    = 20
)

// DelayedFault is a defect of the delayed service ("" for none); each
// breaks one property of its honest policy.
type DelayedFault string

// The delayed service's defects.
const (
	// DelayedHoldPast holds every delayed request HoldExtra longer than
	// its token is due, then admits it: past max_wait (the delay check).
	DelayedHoldPast DelayedFault = "hold-past"
	// DelayedNoDelay refuses at once every request whose token is not due
	// yet, though the queue has room (the delay check).
	DelayedNoDelay DelayedFault = "no-delay"
	// DelayedCapacityPlus2 holds K+2 tokens where K is declared: an
	// oversell, which the delay check must not blame.
	DelayedCapacityPlus2 DelayedFault = "capacity+2"
)

// DelayedConfig configures the delayed service.
type DelayedConfig struct {
	// Capacity K, Rate r per second, MaxWait D and Queue Q (waiting per
	// key); the defaults above when zero.
	Capacity int
	Rate     float64
	MaxWait  time.Duration
	Queue    int
	// Fault is a deliberate defect ("" for none).
	Fault DelayedFault
	// HoldExtra is how much longer DelayedHoldPast holds (default 1s).
	HoldExtra time.Duration
	// Now is the clock (time.Now when nil); waits are real timers.
	Now func() time.Time
}

// Delayed is a service that queues instead of refusing, in the manner of a
// job API behind a pacing gateway: POST DelayedPath only (404 elsewhere,
// 405 for other methods), the caller named by the DelayedHeader header (401
// without it). Each caller has a virtual-scheduling (GCRA) bucket of K
// refilled at r: a request whose slot is due now is answered 202 at once;
// one whose slot is due within MaxWait, while fewer than Queue of the
// caller's requests wait, is held until then and answered 202 with
// X-Queue-Wait (milliseconds held); any other is answered 429 with
// Retry-After (delay-seconds until its slot would be due, rounded up) and
// uses up nothing. It sends no other rate-limit headers.
type Delayed struct {
	cfg  DelayedConfig
	mu   sync.Mutex
	keys map[string]*delayedKey
}

type delayedKey struct {
	tat     time.Time // the theoretical arrival time of the next slot
	waiting int
}

// NewDelayed builds a delayed instance.
func NewDelayed(cfg DelayedConfig) (*Delayed, error) {
	if cfg.Capacity == 0 {
		cfg.Capacity = DefaultDelayedCapacity
	}
	if cfg.Rate == 0 {
		cfg.Rate = DefaultDelayedRate
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = DefaultDelayedMaxWait
	}
	if cfg.Queue == 0 {
		cfg.Queue = DefaultDelayedQueue
	}
	if cfg.HoldExtra == 0 {
		cfg.HoldExtra = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	switch {
	case cfg.Capacity < 1 || !(cfg.Rate > 0) || math.IsInf(cfg.Rate, 0) || cfg.MaxWait < 0 || cfg.Queue < 0:
		return nil, fmt.Errorf("testsvc: delayed: capacity %d, rate %g/s, max wait %s, queue %d: want positive values", cfg.Capacity, cfg.Rate, cfg.MaxWait, cfg.Queue)
	}
	switch cfg.Fault {
	case "", DelayedHoldPast, DelayedNoDelay, DelayedCapacityPlus2:
	default:
		return nil, fmt.Errorf("testsvc: delayed: unknown fault %q (want %s, %s or %s)", cfg.Fault, DelayedHoldPast, DelayedNoDelay, DelayedCapacityPlus2)
	}
	return &Delayed{cfg: cfg, keys: map[string]*delayedKey{}}, nil
}

// ServeHTTP implements http.Handler.
func (d *Delayed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" {
		w.WriteHeader(http.StatusOK)
		return
	}
	if r.URL.Path != DelayedPath {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	key := r.Header.Get(DelayedHeader)
	if key == "" || !validKey(key) {
		http.Error(w, "missing or invalid "+DelayedHeader, http.StatusUnauthorized)
		return
	}
	wait, ok := d.reserve(key)
	if !ok {
		w.Header().Set("Retry-After", strconv.FormatInt(int64(math.Ceil(wait.Seconds())), 10))
		http.Error(w, "queue full or wait too long", http.StatusTooManyRequests)
		return
	}
	if wait > 0 {
		hold := wait
		if d.cfg.Fault == DelayedHoldPast {
			hold += d.cfg.HoldExtra
		}
		t := time.NewTimer(hold)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
		}
		d.mu.Lock()
		d.keys[key].waiting--
		d.mu.Unlock()
		if r.Context().Err() != nil {
			return
		}
	}
	w.Header().Set("X-Queue-Wait", strconv.FormatInt(wait.Milliseconds(), 10))
	w.WriteHeader(http.StatusAccepted)
	_, _ = w.Write([]byte("{\"queued\":true}\n"))
}

// reserve takes the key's next slot: the wait until it is due and true, or
// the wait it would have needed and false (nothing used up).
func (d *Delayed) reserve(key string) (time.Duration, bool) {
	now := d.cfg.Now()
	k := d.cfg.Capacity
	if d.cfg.Fault == DelayedCapacityPlus2 {
		k += 2
	}
	T := time.Duration(float64(time.Second) / d.cfg.Rate)
	tau := time.Duration(k-1) * T
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.keys[key]
	if s == nil {
		s = &delayedKey{tat: now}
		d.keys[key] = s
	}
	tat := s.tat
	if tat.Before(now) {
		tat = now
	}
	wait := max(0, tat.Add(-tau).Sub(now))
	switch {
	case wait == 0:
	case d.cfg.Fault == DelayedNoDelay, wait > d.cfg.MaxWait, s.waiting >= d.cfg.Queue:
		return wait, false
	default:
		s.waiting++
	}
	s.tat = tat.Add(T)
	return wait, true
}
