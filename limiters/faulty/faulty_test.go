package faulty

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlverify/rlverify/envs/redisproc"
	"github.com/rlverify/rlverify/limiters"
	"github.com/rlverify/rlverify/policy"
)

var t0 = time.Unix(1_700_000_000, 0)

func bucket(k int64, r float64) []policy.Limit {
	return []policy.Limit{{Algorithm: policy.TokenBucket, Capacity: k, Rate: policy.Rate(r), Count: k,
		Window: policy.Duration(time.Duration(float64(k) / r * float64(time.Second)))}}
}

func redisAddr(t *testing.T) string {
	t.Helper()
	if err := redisproc.Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and Redis is required: %v", err)
		}
		t.Skipf("skipping Redis test: %v", err)
	}
	s, err := redisproc.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s.Addr
}

// burst fires g concurrent requests at the same instant and counts admissions.
func burst(t *testing.T, l limiters.Limiter, g int, now time.Time, key string) int64 {
	var n atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < g; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			d, err := l.Allow(context.Background(), now, key, 1)
			if err != nil {
				t.Error(err)
			}
			if d.Allowed {
				n.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	return n.Load()
}

func TestRacyTokenBucketOversells(t *testing.T) {
	got := burst(t, NewRacyTokenBucket(bucket(5, 1), 0), 64, t0, "k")
	if got <= 5 {
		t.Errorf("racy bucket admitted %d of 64 at once, want > K=5", got)
	}
}

func TestRacyRedisTokenBucketOversells(t *testing.T) {
	c := limiters.NewRedisClient(redisAddr(t), time.Second)
	defer c.Close()
	l, err := NewRacyRedisTokenBucket(c, bucket(5, 0.01), time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if got := burst(t, l, 64, time.Time{}, "{racy}"); got <= 5 {
		t.Errorf("racy Redis bucket admitted %d of 64 at once, want > K=5", got)
	}
	// The correct script on the same server does not.
	ok, _ := limiters.NewRedis(policy.TokenBucket, c, bucket(5, 0.01))
	if got := burst(t, ok, 64, time.Time{}, "{atomic}"); got != 5 {
		t.Errorf("atomic Redis bucket admitted %d, want 5", got)
	}
}

func TestUncappedRefillAfterIdle(t *testing.T) {
	l, _ := NewUncappedRefill(bucket(5, 1))
	ctx := context.Background()
	l.Allow(ctx, t0, "k", 1)
	later := t0.Add(time.Minute) // idle: a correct bucket is full at 5
	admitted := 0
	for i := 0; i < 100; i++ {
		if d, _ := l.Allow(ctx, later, "k", 1); d.Allowed {
			admitted++
		}
	}
	if admitted <= 5 {
		t.Errorf("admitted %d at once after idle, want > K=5", admitted)
	}
}

func TestDeductOnRejectLocksOut(t *testing.T) {
	l, _ := NewDeductOnReject(bucket(2, 1))
	ctx := context.Background()
	now := t0
	for i := 0; i < 5; i++ { // 2 admitted, 3 rejected but deducted
		l.Allow(ctx, now, "k", 1)
	}
	d, _ := l.Allow(ctx, now, "k", 1)
	if d.Allowed {
		t.Fatal("admitted past K")
	}
	now = now.Add(d.RetryAfter) // an honest client waits as advised
	if d2, _ := l.Allow(ctx, now, "k", 1); d2.Allowed {
		t.Errorf("admitted after the advised %v: the defect did not show", d.RetryAfter)
	}
}

func TestLocalOnlyMultipliesQuota(t *testing.T) {
	var total int64
	for inst := 0; inst < 3; inst++ {
		l, _ := NewLocalOnly(policy.TokenBucket, bucket(5, 0.1))
		total += burst(t, l, 20, t0, "k")
	}
	if total != 15 {
		t.Errorf("3 local-only instances admitted %d, want 3×K = 15", total)
	}
}

func TestInstanceClockSkewCreditsTokens(t *testing.T) {
	c := limiters.NewRedisClient(redisAddr(t), time.Second)
	defer c.Close()
	limits := bucket(5, 1)
	a, _ := NewInstanceClock(c, limits, nil, 0)
	b, _ := NewInstanceClock(c, limits, nil, 5*time.Second)
	ctx := context.Background()
	admitted := 0
	for _, l := range []limiters.Limiter{a, b} {
		for i := 0; i < 10; i++ {
			if d, err := l.Allow(ctx, time.Time{}, "{skew}", 1); err != nil {
				t.Fatal(err)
			} else if d.Allowed {
				admitted++
			}
		}
	}
	if admitted < 9 { // a correct bucket admits 5 (+1 if a second passes)
		t.Errorf("admitted %d with one instance 5s ahead, want ~10 > K + r·Δt", admitted)
	}
}

func TestNoAndShortRetryAfter(t *testing.T) {
	ctx := context.Background()
	mk := func() limiters.Limiter { l, _ := limiters.NewTokenBucket(bucket(1, 1)); return l }
	no := NoRetryAfter{mk()}
	no.Allow(ctx, t0, "k", 1)
	if d, _ := no.Allow(ctx, t0, "k", 1); d.Allowed || d.RetryAfter != 0 || !d.OmitRetryAfter {
		t.Errorf("no-retry-after: %+v", d)
	}
	short := ShortRetryAfter{mk()}
	short.Allow(ctx, t0, "k", 1)
	d, _ := short.Allow(ctx, t0, "k", 1)
	if d.Allowed || d.RetryAfter != 500*time.Millisecond {
		t.Fatalf("short-retry-after: %+v", d)
	}
	if d2, _ := short.Allow(ctx, t0.Add(d.RetryAfter), "k", 1); d2.Allowed {
		t.Errorf("admitted after the short advice: defect not shown")
	}
}

func TestUnweightedFixedWindowDoubleBurst(t *testing.T) {
	limits := []policy.Limit{{Algorithm: policy.SlidingLog, Count: 5, Window: policy.Duration(time.Second), Capacity: 5, Rate: 5}}
	l, _ := NewUnweightedFixedWindow(nil, limits)
	ctx := context.Background()
	admitted := 0
	for _, at := range []time.Duration{990 * time.Millisecond, 1010 * time.Millisecond} {
		for i := 0; i < 5; i++ {
			if d, _ := l.Allow(ctx, t0.Add(at), "k", 1); d.Allowed {
				admitted++
			}
		}
	}
	if admitted != 10 {
		t.Errorf("admitted %d within 20ms, want 2N = 10 (a sliding log admits 5)", admitted)
	}
}
