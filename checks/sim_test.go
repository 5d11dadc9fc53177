package checks

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

var propSeed = flag.Uint64("seed", 1, "base seed of the property test")

// simOpts describes a run against a correct token bucket.
type simOpts struct {
	keys   int
	n      int
	K      int64
	r      float64 // tokens per second
	maxLat int64   // ns; latency is uniform in [0, maxLat]
	// timeoutP is the chance a request gets no response (status 0); such a
	// request may or may not have reached the limiter.
	timeoutP float64
	// load is the offered rate per key as a multiple of r.
	load float64
}

// simulate runs a correct token bucket with exactly the checkers' semantics:
// every request is decided at an instant uniform inside [Sent, Recv], in
// decision order, by a bucket per key that starts full (capacity K, refill r
// per second, a request needs one token, a rejection consumes nothing).
// Responses carry the headers the reference limiter would send.
func simulate(rng *rand.Rand, o simOpts) *history.History {
	h := &history.History{Run: history.Run{T: history.TypeRun, Version: 1, ID: "sim", Start: time.Unix(1_700_000_000, 0)}}
	type req struct {
		i       int
		d       int64
		reached bool
	}
	evs := make([]history.Event, o.n)
	reqs := make([]req, o.n)
	t := int64(0)
	meanGap := 1e9 / (o.r * o.load * float64(o.keys))
	for i := range evs {
		if rng.Float64() >= 0.25 { // a quarter of requests leave in a burst
			t += int64(rng.ExpFloat64() * meanGap)
		}
		lat := int64(0)
		if o.maxLat > 0 {
			lat = rng.Int64N(o.maxLat + 1)
		}
		e := history.Event{T: history.TypeEvent, ID: uint64(i + 1), Key: "k" + strconv.Itoa(rng.IntN(o.keys)), Sent: t, Intended: t, Recv: t + lat, Phase: "sim"}
		reached := true
		if rng.Float64() < o.timeoutP {
			e.Status, e.Err = 0, "context deadline exceeded"
			reached = rng.IntN(2) == 0
		}
		evs[i] = e
		reqs[i] = req{i: i, d: e.Sent + rng.Int64N(lat+1), reached: reached}
	}
	slices.SortStableFunc(reqs, func(a, b req) int { return cmpI64(a.d, b.d) })
	type bucket struct {
		level float64
		last  int64
	}
	state := map[string]*bucket{}
	K := float64(o.K)
	w := int64(math.Ceil(K/o.r - 1e-9))
	for _, q := range reqs {
		if !q.reached {
			continue
		}
		e := &evs[q.i]
		b := state[e.Key]
		if b == nil {
			b = &bucket{level: K, last: q.d}
			state[e.Key] = b
		}
		b.level = math.Min(K, b.level+o.r*float64(q.d-b.last)/1e9)
		b.last = q.d
		allowed := b.level >= 1-1e-9
		if allowed {
			b.level--
		}
		if e.Err != "" {
			continue
		}
		rem := int64(math.Floor(b.level + 1e-9))
		if rem < 0 {
			rem = 0
		}
		reset := int64(math.Ceil((K - b.level) / o.r))
		e.Status = 200
		if !allowed {
			e.Status = 429
			e.RetryAfter = strconv.FormatInt(int64(math.Ceil((1-b.level)/o.r)), 10)
		}
		e.XLimit = strconv.FormatInt(o.K, 10)
		e.XRemaining = strconv.FormatInt(rem, 10)
		e.XReset = strconv.FormatInt(reset, 10)
		e.RateLimit = fmt.Sprintf(`"k";r=%d;t=%d`, rem, reset)
		e.RateLimitPolicy = fmt.Sprintf(`"k";q=%d;w=%d`, o.K, w)
	}
	h.Events = evs
	h.End = &history.End{T: history.TypeEnd, Requests: int64(o.n)}
	return h
}

func simPolicy(tb testing.TB, K int64, r float64) *policy.Policy {
	tb.Helper()
	y := fmt.Sprintf(`name: sim
tiers:
  - name: k
    key_prefix: "k"
    limits:
      - algorithm: token-bucket
        capacity: %d
        rate: %s
headers:
  retry_after: true
  ratelimit: true
  x_ratelimit: true
`, K, strconv.FormatFloat(r, 'g', -1, 64))
	p, err := policy.Parse("sim.yaml", []byte(y))
	require.NoError(tb, err)
	return p
}

// TestPropertyCorrectBucketNeverFails: histories of a correct token bucket,
// with random latencies, timeouts and parameters, never fail the checks that
// judge a single limiter's decisions.
func TestPropertyCorrectBucketNeverFails(t *testing.T) {
	iters := 10_000
	if testing.Short() {
		iters = 1000
	}
	only := []string{"oversell", "under-admission", "token-bounds", "retry-after", "headers"}
	verdicts := map[Verdict]int{}
	for i := 0; i < iters; i++ {
		seed := *propSeed + uint64(i)
		rng := rand.New(rand.NewPCG(seed, 0x5eed))
		o := simOpts{
			keys:     1 + rng.IntN(3),
			n:        10 + rng.IntN(50),
			K:        1 + rng.Int64N(10),
			r:        0.5 + rng.Float64()*50,
			maxLat:   rng.Int64N(51) * int64(time.Millisecond),
			timeoutP: []float64{0, 0.05, 0.2}[rng.IntN(3)],
			load:     0.3 + rng.Float64()*3,
		}
		h := simulate(rng, o)
		p := simPolicy(t, o.K, o.r)
		for _, r := range Run(h, p, Options{Only: only}) {
			verdicts[r.Verdict]++
			if r.Verdict == Fail {
				t.Fatalf("seed %d (rerun with -seed %d -run Property): %+v: %s fails on a correct bucket:\n%s", seed, seed, o, r.Name, dump(r))
			}
		}
	}
	t.Logf("verdicts over %d histories: %v", iters, verdicts)
}

// TestPropertyFaultyBucketIsCaught: the same runs against a bucket that
// refills twice as fast as declared (or has a larger burst) must fail
// oversell often, and a bucket that refills at half the rate must fail
// under-admission: the checks have power, not only soundness.
func TestPropertyFaultyBucketIsCaught(t *testing.T) {
	over, under := 0, 0
	const iters = 300
	for i := 0; i < iters; i++ {
		seed := *propSeed + uint64(i)
		rng := rand.New(rand.NewPCG(seed, 0xbad))
		o := simOpts{keys: 1, n: 60, K: 2 + rng.Int64N(8), r: 1 + rng.Float64()*20, maxLat: rng.Int64N(20) * int64(time.Millisecond), load: 3}
		fast := o
		fast.r *= 2
		fast.K += 2
		if Run(simulate(rng, fast), simPolicy(t, o.K, o.r), Options{Only: []string{"oversell"}})[0].Verdict == Fail {
			over++
		}
		slow := o
		slow.r /= 4
		slow.load = 0.5
		if Run(simulate(rng, slow), simPolicy(t, o.K, o.r), Options{Only: []string{"under-admission"}})[0].Verdict == Fail {
			under++
		}
	}
	t.Logf("caught: oversell %d/%d, under-admission %d/%d", over, iters, under, iters)
	require.Greater(t, over, iters/2)
	require.Greater(t, under, iters/4)
}
