package thirdparty

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/rlverify/rlverify/envs/redisproc"
	"github.com/rlverify/rlverify/limiters"
	"github.com/rlverify/rlverify/policy"
)

var t0 = time.Unix(1_700_000_000, 0)

func bucket(k int64, r float64) []policy.Limit {
	return []policy.Limit{{Algorithm: policy.TokenBucket, Capacity: k, Rate: policy.Rate(r), Count: k,
		Window: policy.Duration(time.Duration(float64(k) / r * float64(time.Second)))}}
}

// TestXTimeRateMatchesSeeds: with the (K, r) mapping, x/time/rate gives the
// seeds' token-bucket column.
func TestXTimeRateMatchesSeeds(t *testing.T) {
	x, err := NewXTimeRate(bucket(5, 2))
	if err != nil {
		t.Fatal(err)
	}
	ms := []int64{0, 100, 200, 300, 400, 500, 600, 800, 1000, 1200, 2000, 2100, 2500, 3000, 3100, 3200, 3300, 3400, 3500, 3600}
	got := ""
	for _, m := range ms {
		got += map[bool]string{true: "A", false: "D"}[x.AllowAt(t0.Add(time.Duration(m)*time.Millisecond).UnixNano(), "k", 1).Allowed]
	}
	if want := "AAAAAADDADAAAADDDDAD"; got != want {
		t.Errorf("got %s want %s", got, want)
	}
}

func redisAddr(tb testing.TB) string {
	tb.Helper()
	if err := redisproc.Available(); err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("CI=true and Redis is required: %v", err)
		}
		tb.Skipf("skipping Redis test: %v", err)
	}
	s, err := redisproc.Start()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Stop)
	return s.Addr
}

func TestRedisRateBurst(t *testing.T) {
	c := limiters.NewRedisClient(redisAddr(t), time.Second)
	defer c.Close()
	r, err := NewRedisRate(c, bucket(5, 0.1))
	if err != nil {
		t.Fatal(err)
	}
	admitted := 0
	var last limiters.Decision
	for i := 0; i < 8; i++ {
		d, err := r.Allow(context.Background(), time.Time{}, "{rr}", 1)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			admitted++
		}
		last = d
	}
	if admitted != 5 || last.RetryAfter <= 0 || last.RetryAfter > 10*time.Second {
		t.Errorf("admitted %d, last %+v; want 5 and a retry ≤ 1/r", admitted, last)
	}
}

// BenchmarkXTimeRate is x/time/rate with a given now: keyed through the
// adapter's sharded map (as BenchmarkMemoryTokenBucket/keyed) and a single
// limiter.
func BenchmarkXTimeRate(b *testing.B) {
	x, _ := NewXTimeRate(bucket(100, 1e6))
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("rl:{free:key-%d}:api:v1", i)
	}
	b.Run("keyed", func(b *testing.B) {
		now := t0.UnixNano()
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			now += 100
			x.AllowAt(now, keys[i&1023], 1)
		}
	})
	b.Run("keyed-allow-only", func(b *testing.B) {
		// The library's AllowN alone behind the same map, without the
		// Decision fields (Remaining, RetryAfter) our limiter computes.
		now := t0
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			now = now.Add(100)
			x.limiter(keys[i&1023]).AllowN(now, 1)
		}
	})
	b.Run("single", func(b *testing.B) {
		l := rate.NewLimiter(1e6, 100)
		now := t0
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			now = now.Add(100)
			l.AllowN(now, 1)
		}
	})
}

// BenchmarkRedisRate and BenchmarkRedisTokenBucket run on the same fresh
// redis-server with 16·GOMAXPROCS… goroutines; decisions/s is reported.
func BenchmarkRedisRate(b *testing.B) {
	addr := redisAddr(b)
	for _, par := range []int{8, 32} {
		b.Run(fmt.Sprintf("par%d", par*2), func(b *testing.B) {
			c := limiters.NewRedisClient(addr, time.Second)
			defer c.Close()
			r, _ := NewRedisRate(c, bucket(1000, 1e5))
			runParallel(b, par, r)
		})
	}
}

func BenchmarkRedisTokenBucket(b *testing.B) {
	addr := redisAddr(b)
	for _, par := range []int{8, 32} {
		b.Run(fmt.Sprintf("par%d", par*2), func(b *testing.B) {
			c := limiters.NewRedisClient(addr, time.Second)
			defer c.Close()
			for _, alg := range policy.Algorithms {
				if alg != policy.TokenBucket && alg != policy.GCRA {
					continue
				}
				l, _ := limiters.NewRedis(alg, c, bucket(1000, 1e5))
				b.Run(string(alg), func(b *testing.B) { runParallel(b, par, l) })
			}
		})
	}
}

var runSeq atomic.Int64

func runParallel(b *testing.B, par int, l limiters.Limiter) {
	var seq atomic.Int64
	run := runSeq.Add(1)
	b.SetParallelism(par)
	b.ReportAllocs()
	start := time.Now()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		key := fmt.Sprintf("rl:{bench%d:%d}:api:v1", run, seq.Add(1)%64)
		ctx := context.Background()
		for pb.Next() {
			if _, err := l.Allow(ctx, time.Time{}, key, 1); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "decisions/s")
}

// TestMoreAdaptersEnforceTheirMapping: a fresh key admits its quota at once
// and the next request is denied with a positive Retry-After.
func TestMoreAdaptersEnforceTheirMapping(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		mk   func() (limiters.Limiter, error)
		want int
	}{
		{"ulule", func() (limiters.Limiter, error) { return NewUlule(bucket(5, 0.5)) }, 5},
		{"throttled", func() (limiters.Limiter, error) { return NewThrottled(bucket(5, 0.5)) }, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := tc.mk()
			if err != nil {
				t.Fatal(err)
			}
			admitted := 0
			var last limiters.Decision
			for i := 0; i < 8; i++ {
				d, err := l.Allow(ctx, time.Now(), "k", 1)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					admitted++
				}
				last = d
			}
			if admitted != tc.want {
				t.Fatalf("admitted %d of 8, want %d", admitted, tc.want)
			}
			if last.Allowed || last.RetryAfter <= 0 {
				t.Fatalf("the 8th request: %+v, want denied with a Retry-After", last)
			}
			if _, err := tc.mk(); err != nil {
				t.Fatal(err)
			}
		})
	}
	if _, err := NewThrottled(append(bucket(5, 1), bucket(5, 1)...)); err == nil {
		t.Fatal("two limits must be refused")
	}
}
