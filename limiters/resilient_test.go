package limiters

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlverify/rlverify/envs/redisproc"
	"github.com/rlverify/rlverify/policy"
)

// fakeStore fails with ErrStore while down is set, else admits.
type fakeStore struct {
	down  atomic.Bool
	calls atomic.Int64
}

func (f *fakeStore) Allow(context.Context, time.Time, string, int) (Decision, error) {
	f.calls.Add(1)
	if f.down.Load() {
		return Decision{}, errors.Join(ErrStore, errors.New("fake: down"))
	}
	return Decision{Allowed: true, Limit: 5, Remaining: 4}, nil
}

type recObserver struct {
	mu       sync.Mutex
	circuits []string
	fallback map[string]int
}

func (r *recObserver) OnDecision(_, _, fb string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fallback == nil {
		r.fallback = map[string]int{}
	}
	r.fallback[fb]++
}
func (r *recObserver) OnStoreLatency(time.Duration) {}
func (r *recObserver) OnStoreError(error)           {}
func (r *recObserver) OnCircuit(s string) {
	r.mu.Lock()
	r.circuits = append(r.circuits, s)
	r.mu.Unlock()
}

func TestBreakerOpensAndRecovers(t *testing.T) {
	st := &fakeStore{}
	obs := &recObserver{}
	clock := t0
	r, err := NewResilient(st, policy.TokenBucket, []policy.Limit{bucketLimit(5, 1)},
		policy.Failure{Mode: policy.FailOpen, BreakerFailures: 3, BreakerCooldown: policy.Duration(10 * time.Second)}, obs)
	if err != nil {
		t.Fatal(err)
	}
	r.Now = func() time.Time { return clock }
	ctx := context.Background()
	st.down.Store(true)
	for i := 0; i < 3; i++ {
		d, err := r.Allow(ctx, clock, "k", 1)
		if err != nil || !d.Allowed || d.Fallback != FallbackOpen {
			t.Fatalf("call %d: %+v %v", i, d, err)
		}
	}
	if r.Circuit() != CircuitOpen {
		t.Fatalf("circuit %s after 3 failures, want open", r.Circuit())
	}
	calls := st.calls.Load()
	for i := 0; i < 10; i++ {
		r.Allow(ctx, clock, "k", 1)
	}
	if st.calls.Load() != calls {
		t.Errorf("store called %d times while the circuit was open", st.calls.Load()-calls)
	}
	clock = clock.Add(10 * time.Second) // cooldown over: one probe, still down
	r.Allow(ctx, clock, "k", 1)
	if st.calls.Load() != calls+1 || r.Circuit() != CircuitOpen {
		t.Fatalf("probe: calls %d, circuit %s", st.calls.Load()-calls, r.Circuit())
	}
	st.down.Store(false)
	clock = clock.Add(5 * time.Second)
	if d, _ := r.Allow(ctx, clock, "k", 1); d.Fallback != FallbackOpen {
		t.Fatalf("within the new cooldown the store was used: %+v", d)
	}
	clock = clock.Add(5 * time.Second)
	d, err := r.Allow(ctx, clock, "k", 1)
	if err != nil || d.Fallback != "" || r.Circuit() != CircuitClosed {
		t.Fatalf("after recovery: %+v %v circuit %s", d, err, r.Circuit())
	}
	want := []string{CircuitOpen, CircuitHalfOpen, CircuitOpen, CircuitHalfOpen, CircuitClosed}
	if len(obs.circuits) != len(want) {
		t.Fatalf("circuit transitions %v, want %v", obs.circuits, want)
	}
	for i := range want {
		if obs.circuits[i] != want[i] {
			t.Fatalf("circuit transitions %v, want %v", obs.circuits, want)
		}
	}
}

// TestFailureModesRedisDown stops a real redis-server and checks every mode
// answers as declared within the store timeout.
func TestFailureModesRedisDown(t *testing.T) {
	needRedis(t)
	srv, err := redisproc.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	client := NewRedisClient(srv.Addr, 50*time.Millisecond)
	defer client.Close()
	limits := []policy.Limit{bucketLimit(4, 1)}
	store, err := NewRedis(policy.TokenBucket, client, limits)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(f policy.Failure) *Resilient {
		f.StoreTimeout = policy.Duration(50 * time.Millisecond)
		r, err := NewResilient(store, policy.TokenBucket, limits, f, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	ctx := context.Background()
	// Up: the store decides.
	if d, err := mk(policy.Failure{Mode: policy.FailClosed}).Allow(ctx, time.Now(), uniqueKey("up"), 1); err != nil || !d.Allowed || d.Fallback != "" {
		t.Fatalf("store up: %+v %v", d, err)
	}
	srv.Stop()

	timed := func(t *testing.T, r *Resilient, key string) Decision {
		t.Helper()
		start := time.Now()
		d, err := r.Allow(ctx, time.Now(), key, 1)
		if err != nil {
			t.Fatalf("error instead of a fallback decision: %v", err)
		}
		if el := time.Since(start); el > 500*time.Millisecond {
			t.Errorf("decision took %v with a 50ms store timeout", el)
		}
		return d
	}
	t.Run("open", func(t *testing.T) {
		d := timed(t, mk(policy.Failure{Mode: policy.FailOpen}), "k")
		if !d.Allowed || d.Fallback != FallbackOpen {
			t.Errorf("%+v", d)
		}
	})
	t.Run("closed", func(t *testing.T) {
		d := timed(t, mk(policy.Failure{Mode: policy.FailClosed}), "k")
		if d.Allowed || d.Fallback != FallbackClosed || d.RetryAfter < time.Second {
			t.Errorf("%+v", d)
		}
	})
	t.Run("local", func(t *testing.T) {
		r := mk(policy.Failure{Mode: policy.FailLocal, LocalShare: 0.5})
		var got string
		for i := 0; i < 4; i++ {
			d := timed(t, r, "k")
			if d.Fallback != FallbackLocal {
				t.Fatalf("%+v", d)
			}
			got += map[bool]string{true: "A", false: "D"}[d.Allowed]
		}
		if got != "AADD" { // K=4 at share 0.5: 2 per instance
			t.Errorf("local fallback pattern %s, want AADD", got)
		}
	})
	t.Run("queue", func(t *testing.T) {
		// A queued request cannot come back before QueueWait (the store stays
		// down), so "waited" is decided by that lower bound; one second keeps
		// a rejection at once on a busy runner on its side of the cut.
		const queueWait = time.Second
		r := mk(policy.Failure{Mode: policy.FailQueue, QueueSize: 2, QueueWait: policy.Duration(queueWait)})
		var wg sync.WaitGroup
		var immediate, waited atomic.Int64
		for i := 0; i < 6; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				d, err := r.Allow(ctx, time.Now(), "k", 1)
				if err != nil || d.Allowed || d.Fallback != FallbackQueue {
					t.Errorf("%+v %v", d, err)
				}
				if time.Since(start) >= queueWait {
					waited.Add(1)
				} else {
					immediate.Add(1)
				}
			}()
		}
		wg.Wait()
		// Exactly the queue's two wait: a queue that holds none, or more,
		// fails here.
		if waited.Load() != 2 || immediate.Load() != 4 {
			t.Errorf("queue of 2: %d waited, %d rejected at once", waited.Load(), immediate.Load())
		}
		// The store comes back while a request waits: the store decides it.
		r2 := mk(policy.Failure{Mode: policy.FailQueue, QueueSize: 2, QueueWait: policy.Duration(5 * time.Second),
			BreakerCooldown: policy.Duration(20 * time.Millisecond)})
		go func() {
			time.Sleep(100 * time.Millisecond)
			if err := srv.Restart(); err != nil {
				t.Error(err)
			}
		}()
		d, err := r2.Allow(ctx, time.Now(), uniqueKey("q"), 1)
		if err != nil || !d.Allowed || d.Fallback != "" {
			t.Errorf("after the store came back: %+v %v", d, err)
		}
	})
}
