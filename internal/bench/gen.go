// Package bench holds the pieces of rlverify's side-by-side benchmark
// (scripts/bench.sh, program internal/bench/cmd/rlbench): a synthetic
// history generator, a trivial loopback HTTP server, timing helpers and the
// result table. It measures; it never asserts on speed.
//
// bench may import every rlverify package; nothing imports bench.
package bench

import (
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/rlverify/rlverify/headers"
	"github.com/rlverify/rlverify/history"
)

// PolicyYAML is the policy the synthetic histories keep: the default
// policy's free tier (K=10, r=5/s) with X-RateLimit headers (relative
// reset) and Retry-After, without the RateLimit structured headers.
const PolicyYAML = `name: bench
version: v1
action: api
tiers:
  - name: free
    key_prefix: "free-"
    limits:
      - algorithm: token-bucket
        capacity: 10
        rate: 5/s
default_tier: free
headers:
  retry_after: true
  ratelimit: false
  x_ratelimit: true
  x_ratelimit_reset: relative
failure:
  mode: open
  store_timeout: 50ms
`

// Generate returns n events over keys keys of a correct token bucket
// (K=10, r=5/s per key) offered 1.5× its rate, each request decided at its
// send time, latency uniform in [0, 50ms], responses with the headers of
// PolicyYAML. The same (n, keys) always gives the same history.
func Generate(n, keys int) *history.History {
	h := &history.History{Run: benchRun(), Events: make([]history.Event, 0, n)}
	end := GenerateEach(n, keys, func(e *history.Event) error {
		h.Events = append(h.Events, *e)
		return nil
	})
	h.End = &end
	return h
}

func benchRun() history.Run {
	return history.Run{T: history.TypeRun, Version: history.Version, ID: "bench", Start: time.Unix(1_700_000_000, 0)}
}

// GenerateEach calls f with each event of Generate(n, keys) in turn (the
// event is reused) and returns the end record: histories larger than
// memory. It stops at f's first error (the end record is then zero).
func GenerateEach(n, keys int, f func(*history.Event) error) history.End {
	end, _ := generateEach(n, keys, f)
	return end
}

func generateEach(n, keys int, f func(*history.Event) error) (history.End, error) {
	const (
		K      = 10.0
		r      = 5.0 // per second
		maxLat = int64(50 * time.Millisecond)
	)
	rng := rand.New(rand.NewPCG(uint64(n), uint64(keys)))
	names := make([]string, keys)
	level := make([]float64, keys)
	last := make([]int64, keys)
	for k := range names {
		names[k] = "free-k" + strconv.Itoa(k)
		level[k] = K
	}
	small := make([]string, 11)
	for i := range small {
		small[i] = strconv.Itoa(i)
	}
	meanGap := 1e9 / (r * 1.5 * float64(keys))
	t := int64(0)
	for i := range n {
		t += int64(rng.ExpFloat64() * meanGap)
		k := rng.IntN(keys)
		// Refill to t, then decide.
		level[k] = min(K, level[k]+r*float64(t-last[k])/1e9)
		last[k] = t
		e := history.Event{T: history.TypeEvent, ID: uint64(i + 1), Key: names[k], Phase: "rate", Intended: t, Sent: t,
			Recv: t + rng.Int64N(maxLat+1), Fields: headers.Fields{XLimit: small[10]}}
		if level[k] >= 1 {
			level[k]--
			e.Status = 200
		} else {
			e.Status = 429
			e.RetryAfter = "1" // ≥ (1 − level)/r = at most 0.2 s, rounded up
		}
		rem := int(level[k])
		e.XRemaining = small[rem]
		// Seconds until full, rounded up (≤ 2 s = K/r).
		e.XReset = small[int((K-level[k])/r+0.999999)]
		if err := f(&e); err != nil {
			return history.End{}, err
		}
	}
	return history.End{T: history.TypeEnd, Elapsed: t, Requests: int64(n)}, nil
}

// WriteGenerated writes Generate(n, keys) to file as WriteHistory would,
// one event at a time: for 10^8 events (about 19 GB) that do not fit in
// memory.
func WriteGenerated(file string, n, keys int) error {
	w, err := history.Create(file)
	if err != nil {
		return err
	}
	defer w.Close()
	if err := w.WriteRun(benchRun()); err != nil {
		return err
	}
	end, err := generateEach(n, keys, w.WriteEvent)
	if err != nil {
		return err
	}
	if err := w.WriteEnd(end); err != nil {
		return err
	}
	return w.Close()
}

// WriteHistory writes h to file as the engine would (run header, events,
// end record).
func WriteHistory(file string, h *history.History) error {
	w, err := history.Create(file)
	if err != nil {
		return err
	}
	if err := w.WriteRun(h.Run); err != nil {
		return err
	}
	for i := range h.Events {
		if err := w.WriteEvent(&h.Events[i]); err != nil {
			return err
		}
	}
	if err := w.WriteEnd(*h.End); err != nil {
		return err
	}
	return w.Close()
}
