package rlverify_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policy"
)

// promise is what the middleware below declares: a token bucket of 10,
// refilled at 1/s, per X-API-Key, answering 429 with Retry-After.
const promise = `
name: example
version: v1
tiers:
  - name: free
    key_prefix: "free-"
    limits:
      - algorithm: token-bucket
        capacity: 10
        rate: 1/s
default_tier: free
headers:
  retry_after: true
`

// tokenBucket is a small rate-limiting middleware: one bucket of burst
// tokens, refilled at rate per second, per X-API-Key.
func tokenBucket(next http.Handler, burst, rate float64) http.Handler {
	type bucket struct {
		tokens float64
		at     time.Time
	}
	var mu sync.Mutex
	buckets := map[string]*bucket{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, now := r.Header.Get("X-API-Key"), time.Now()
		mu.Lock()
		b := buckets[key]
		if b == nil {
			b = &bucket{tokens: burst, at: now}
			buckets[key] = b
		}
		b.tokens = math.Min(burst, b.tokens+now.Sub(b.at).Seconds()*rate)
		b.at = now
		ok := b.tokens >= 1
		if ok {
			b.tokens--
		}
		wait := (1 - b.tokens) / rate
		mu.Unlock()
		if !ok {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait))))
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func hello(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "hello") }

func verdict(out *rlverify.Outcome, name string) checks.Verdict {
	return rlverify.ResultVerdict(out.Results, name)
}

// Verify a middleware: serve it on loopback for the run, fire a burst of
// 100 concurrent requests at one key and judge the history.
func Example_middleware() {
	pol, err := policy.Parse("example.yaml", []byte(promise))
	if err != nil {
		panic(err)
	}
	plan, err := attacks.Load("concurrent-burst")
	if err != nil {
		panic(err)
	}
	events := 0
	out, err := rlverify.Attack(context.Background(), rlverify.AttackOptions{
		Plan: plan, Policy: pol,
		Handler: tokenBucket(http.HandlerFunc(hello), 10, 1),
		OnEvent: func(e history.Event) { events++ },
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("requests:", events)
	fmt.Println("oversell:", verdict(out, "oversell"))
	fmt.Println("retry-after:", verdict(out, "retry-after"))
	// Output:
	// requests: 100
	// oversell: pass
	// retry-after: pass
}

// A Redis-backed limiter through a store outage: the reference token
// bucket on Redis (a local redis-server, else an in-process one) behind a
// fault proxy, and the plan cuts the store off and brings it back.
func Example_storeOutage() {
	plan, err := attacks.Load("store-outage")
	if err != nil {
		panic(err)
	}
	out, err := rlverify.Attack(context.Background(), rlverify.AttackOptions{
		Plan: plan, Limiter: "token-bucket", Store: catalog.Redis,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("fail-mode:", verdict(out, "fail-mode"))
	// Output:
	// fail-mode: pass
}

// Compare two implementations under the same plan and seed: the reference
// token bucket and one that decides with a non-atomic read-then-write.
func ExampleCompare() {
	plan, err := attacks.Load("concurrent-burst")
	if err != nil {
		panic(err)
	}
	col := func(limiter string) rlverify.CompareColumn {
		return rlverify.CompareColumn{Name: limiter, Attack: rlverify.AttackOptions{Plan: plan, Limiter: limiter, Seed: 1}}
	}
	cmp, err := rlverify.Compare(context.Background(), rlverify.CompareOptions{
		Plan:    plan.Name,
		Columns: []rlverify.CompareColumn{col("token-bucket"), col("faulty/racy-token-bucket")},
	})
	if err != nil {
		panic(err)
	}
	for _, c := range cmp.Columns {
		fmt.Printf("%s: oversell %s\n", c.Name, rlverify.ResultVerdict(c.Document.Checks, "oversell"))
	}
	// Output:
	// token-bucket: oversell pass
	// faulty/racy-token-bucket: oversell fail
}

// Interruptible returns as soon as the context ends (a signal in the CLI),
// without waiting for the work: rlverify.Check uses it to stop at Ctrl-C.
func ExampleInterruptible() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Ctrl-C
	_, err := rlverify.Interruptible(ctx, func() (int, error) {
		time.Sleep(time.Hour) // reading a huge history
		return 0, nil
	})
	var ie *rlverify.InterruptedError
	fmt.Println(errors.As(err, &ie), err)
	// Output: true run interrupted: context canceled
}
