package limiters

import (
	"fmt"
	"hash/maphash"
	"testing"
	"time"

	"github.com/rlverify/rlverify/policy"
)

func TestMemoryZeroAllocs(t *testing.T) {
	for _, alg := range policy.Algorithms {
		l, err := New(alg, limitsFor(alg, [][2]float64{{10, 1000}}, [][2]float64{{10, 0.01}}))
		if err != nil {
			t.Fatal(err)
		}
		now := t0.UnixNano()
		key := "rl:{free:k}:api:v1"
		for i := 0; i < 100; i++ { // warm: key exists, log capacity grown
			now += int64(time.Millisecond)
			l.AllowAt(now, key, 1)
		}
		allocs := testing.AllocsPerRun(1000, func() {
			now += int64(time.Millisecond)
			l.AllowAt(now, key, 1)
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocs per decision on an existing key, want 0", alg, allocs)
		}
	}
}

// TestMemoryExpiry: keys idle past their refill/window are dropped lazily,
// and a dropped key decides like a kept one.
func TestMemoryExpiry(t *testing.T) {
	for _, alg := range policy.Algorithms {
		t.Run(string(alg), func(t *testing.T) {
			limits := limitsFor(alg, [][2]float64{{5, 5}}, [][2]float64{{5, 1}})
			l, err := New(alg, limits)
			if err != nil {
				t.Fatal(err)
			}
			tab := func() int {
				switch x := l.(type) {
				case *TokenBucket:
					return x.tab.Len()
				case *GCRA:
					return x.tab.Len()
				case *FixedWindow:
					return x.tab.Len()
				case *SlidingLog:
					return x.tab.Len()
				case *SlidingCounter:
					return x.tab.Len()
				}
				return -1
			}
			now := t0.UnixNano()
			for i := 0; i < 20000; i++ {
				l.AllowAt(now, fmt.Sprintf("old-%d", i), 1)
			}
			if n := tab(); n != 20000 {
				t.Fatalf("held %d keys, want 20000", n)
			}
			later := now + int64(time.Hour)
			// Live keys, ten on every shard (the shards follow the process's
			// random seed: 640 keys taken at random left a shard with three
			// or fewer about one run in seven, too few calls to sweep), so
			// every shard has 3,120 calls, enough to sweep.
			var live []string
			per := make([]int, shards)
			for i := 0; len(live) < 10*shards; i++ {
				k := fmt.Sprintf("spread-%d", i)
				if sh := maphash.String(seed, k) % shards; per[sh] < 10 {
					per[sh]++
					live = append(live, k)
				}
			}
			for i := 0; i < 312*len(live); i++ {
				l.AllowAt(later, live[i%len(live)], 1)
			}
			if n := tab(); n > 1000 {
				t.Errorf("still %d keys after the old ones expired", n)
			}
		})
	}
}

func TestScaleLimits(t *testing.T) {
	ls := ScaleLimits([]policy.Limit{bucketLimit(10, 5), windowLimit(policy.FixedWindow, 100, time.Minute)}, 0.5)
	if ls[0].Capacity != 5 || float64(ls[0].Rate) != 2.5 || ls[0].W() != 2*time.Second {
		t.Errorf("bucket: %+v", ls[0])
	}
	if ls[1].Count != 50 || ls[1].W() != time.Minute {
		t.Errorf("window: %+v", ls[1])
	}
}

func BenchmarkMemory(b *testing.B) {
	for _, alg := range policy.Algorithms {
		b.Run(string(alg), func(b *testing.B) {
			l, _ := New(alg, limitsFor(alg, [][2]float64{{100, 1e6}}, [][2]float64{{1e6, 1}}))
			benchKeys(b, l.AllowAt)
		})
	}
}

// benchKeys decides over 1024 existing keys with an advancing given now.
func benchKeys(b *testing.B, allow func(int64, string, int) Decision) {
	keys := make([]string, 1024)
	now := t0.UnixNano()
	for i := range keys {
		keys[i] = fmt.Sprintf("rl:{free:key-%d}:api:v1", i)
		allow(now, keys[i], 1)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		now += 100
		allow(now, keys[i&1023], 1)
	}
}

// BenchmarkMemoryTokenBucket is the in-memory token bucket over 1024 keys
// (compare BenchmarkXTimeRate in limiters/thirdparty).
func BenchmarkMemoryTokenBucket(b *testing.B) {
	l, _ := NewTokenBucket([]policy.Limit{bucketLimit(100, 1e6)})
	b.Run("keyed", func(b *testing.B) { benchKeys(b, l.AllowAt) })
	b.Run("single", func(b *testing.B) {
		now := t0.UnixNano()
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			now += 100
			l.AllowAt(now, "k", 1)
		}
	})
	b.Run("keyed-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			now := t0.UnixNano()
			i := 0
			for pb.Next() {
				now += 100
				i++
				l.AllowAt(now, benchKeyNames[i&1023], 1)
			}
		})
	})
}

var benchKeyNames = func() []string {
	k := make([]string, 1024)
	for i := range k {
		k[i] = fmt.Sprintf("rl:{free:key-%d}:api:v1", i)
	}
	return k
}()
