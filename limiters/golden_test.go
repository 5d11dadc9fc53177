package limiters

import (
	"testing"
	"time"

	"github.com/rlverify/rlverify/policy"
)

// seedTimes are the 20 request times of the seeds' simulation, in ms from t0.
var seedTimes = []int64{0, 100, 200, 300, 400, 500, 600, 800, 1000, 1200, 2000, 2100, 2500, 3000, 3100, 3200, 3300, 3400, 3500, 3600}

// t0 is an epoch-aligned instant (a whole number of seconds), so fixed and
// sliding-counter windows of 1 s start at the simulation's 0.0 s.
var t0 = time.Unix(1_700_000_000, 0)

func bucketLimit(k int64, r float64) policy.Limit {
	return policy.Limit{Algorithm: policy.TokenBucket, Capacity: k, Rate: policy.Rate(r), Count: k,
		Window: policy.Duration(time.Duration(float64(k) / r * float64(time.Second)))}
}

func windowLimit(alg policy.Algorithm, n int64, w time.Duration) policy.Limit {
	return policy.Limit{Algorithm: alg, Count: n, Window: policy.Duration(w), Capacity: n,
		Rate: policy.Rate(float64(n) / w.Seconds())}
}

func outcomes(l AtLimiter, key string) string {
	b := make([]byte, len(seedTimes))
	for i, ms := range seedTimes {
		d := l.AllowAt(t0.Add(time.Duration(ms)*time.Millisecond).UnixNano(), key, 1)
		b[i] = 'D'
		if d.Allowed {
			b[i] = 'A'
		}
	}
	return string(b)
}

// TestSeedsSimulation is the golden test from the seeds: token bucket K=5
// r=2/s and sliding log 5 per 1.0 s on the same 20 request times.
func TestSeedsSimulation(t *testing.T) {
	tb, err := NewTokenBucket([]policy.Limit{bucketLimit(5, 2)})
	if err != nil {
		t.Fatal(err)
	}
	sl, err := NewSlidingLog([]policy.Limit{windowLimit(policy.SlidingLog, 5, time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := outcomes(tb, "k"), "AAAAAADDADAAAADDDDAD"; got != want {
		t.Errorf("token bucket K=5 r=2/s:\n got %s\nwant %s", got, want)
	}
	if got, want := outcomes(sl, "k"), "AAAAADDDAAAAAAAAADAD"; got != want {
		t.Errorf("sliding log 5/1s:\n got %s\nwant %s", got, want)
	}
}
