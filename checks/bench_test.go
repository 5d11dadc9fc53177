package checks

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

var benchHist sync.Map // "n/keys" → *history.History

// benchHistory simulates n events over keys keys of a correct bucket
// (K=10, r=5/s: the default policy's free tier) with up to 50ms latency.
func benchHistory(n, keys int) *history.History {
	k := fmt.Sprintf("%d/%d", n, keys)
	if h, ok := benchHist.Load(k); ok {
		return h.(*history.History)
	}
	rng := rand.New(rand.NewPCG(uint64(n), uint64(keys)))
	h := simulate(rng, simOpts{keys: keys, n: n, K: 10, r: 5, maxLat: int64(50 * time.Millisecond), timeoutP: 0.01, load: 1.5})
	for i := range h.Events {
		h.Events[i].Key = "free-" + h.Events[i].Key
		h.Events[i].RateLimit = ""
		h.Events[i].RateLimitPolicy = ""
	}
	benchHist.Store(k, h)
	return h
}

func benchPolicy() *policy.Policy {
	p := policy.Default()
	p.Headers.RateLimit = policy.RateLimitNone // the simulation names its policy "k"
	return p
}

// BenchmarkRunAll runs every check over 1,000,000 events of 10,000 keys.
func BenchmarkRunAll(b *testing.B) {
	h := benchHistory(1_000_000, 10_000)
	p := benchPolicy()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		for _, r := range Run(h, p, Options{}) {
			if r.Verdict == Fail {
				b.Fatalf("%s fails on a correct bucket: %s", r.Name, r.Summary)
			}
		}
	}
	b.ReportMetric(float64(len(h.Events))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
}

// BenchmarkRunAllKeys runs every check at 10^5 and 10^6 events over one
// key and over 1,000 keys, reporting ns/event: with linear checkers the
// figure stays flat across sizes and key distributions.
func BenchmarkRunAllKeys(b *testing.B) {
	p := benchPolicy()
	for _, n := range []int{100_000, 1_000_000} {
		for _, keys := range []int{1, 1000} {
			b.Run(fmt.Sprintf("events=%d/keys=%d", n, keys), func(b *testing.B) {
				h := benchHistory(n, keys)
				b.ResetTimer()
				cpu0 := processCPU()
				for i := 0; i < b.N; i++ {
					for _, r := range Run(h, p, Options{}) {
						if r.Verdict == Fail {
							b.Fatalf("%s fails on a correct bucket: %s", r.Name, r.Summary)
						}
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n)/float64(b.N), "ns/event")
				b.ReportMetric(float64(processCPU()-cpu0)/float64(n)/float64(b.N), "cpu-ns/event")
			})
		}
	}
}

// BenchmarkOversell measures the oversell check alone (index included) at
// several sizes and key counts, to state how it scales.
func BenchmarkOversell(b *testing.B) {
	p := benchPolicy()
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		for _, keys := range []int{1, 1000, 100_000} {
			b.Run(fmt.Sprintf("events=%d/keys=%d", n, keys), func(b *testing.B) {
				h := benchHistory(n, keys)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if r := Run(h, p, Options{Only: []string{"oversell"}})[0]; r.Verdict == Fail {
						b.Fatalf("oversell fails on a correct bucket: %s", r.Summary)
					}
				}
				b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
			})
		}
	}
}

// BenchmarkIndex measures building the shared index alone.
func BenchmarkIndex(b *testing.B) {
	h := benchHistory(1_000_000, 10_000)
	p := benchPolicy()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		newIndex(h, p, Options{})
	}
	b.ReportMetric(float64(len(h.Events))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
}

// BenchmarkEach measures each check alone on an index of 1,000,000 events
// of 10,000 keys; lazily shared results (envelopes, under-admission) are
// reset, so each check pays for what it needs.
func BenchmarkEach(b *testing.B) {
	h := benchHistory(1_000_000, 10_000)
	p := benchPolicy()
	ix := newIndex(h, p, Options{})
	for _, c := range registry {
		b.Run(c.name, func(b *testing.B) {
			cpu0 := processCPU()
			for i := 0; i < b.N; i++ {
				ix.envOnce, ix.underOnce = sync.Once{}, sync.Once{}
				ix.envCache, ix.underRes = nil, nil
				c.run(ix)
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
		})
	}
}

// TestRetryAfterRecordPathMatchesEvents: the Retry-After cached in the
// records (rec.ra) gives exactly the result of reading every event.
func TestRetryAfterRecordPathMatchesEvents(t *testing.T) {
	hc := *benchHistory(20_000, 50)
	h := &hc
	h.Events = append([]history.Event(nil), h.Events...)
	// Mix in the forms the records do not cache.
	for i := range h.Events {
		switch e := &h.Events[i]; {
		case e.Status != 429:
		case i%7 == 0:
			e.RetryAfter = h.Wall(e.Recv).Add(time.Second).UTC().Format(http.TimeFormat)
		case i%11 == 0:
			e.RetryAfter = " 1"
		case i%13 == 0:
			e.RetryAfter = ""
		case i%17 == 0:
			e.RetryAfter = "99999"
		}
	}
	p := benchPolicy()
	ix := newIndex(h, p, Options{Slack: time.Millisecond})
	fast := checkRetryAfter(ix)
	for i := range ix.recs {
		ix.recs[i].ra = 0
	}
	slow := checkRetryAfter(ix)
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("record path differs:\n%+v\n%+v", fast, slow)
	}
	if fast.Figures["probed"] == 0 || fast.Figures["too_long"] == 0 || fast.Figures["missing"] == 0 {
		t.Fatalf("the mix did not reach every branch: %v", fast.Figures)
	}
}

// BenchmarkReadAndCheck is `rlverify check` without the report: it reads a
// 1,000,000-event JSONL history of 10,000 keys (history.ReadFile) and runs
// every check on it.
func BenchmarkReadAndCheck(b *testing.B) {
	h := benchHistory(1_000_000, 10_000)
	p := benchPolicy()
	file := filepath.Join(b.TempDir(), "history.jsonl")
	w, err := history.Create(file)
	if err != nil {
		b.Fatal(err)
	}
	if err := w.WriteRun(h.Run); err != nil {
		b.Fatal(err)
	}
	for i := range h.Events {
		if err := w.WriteEvent(&h.Events[i]); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.WriteEnd(history.End{Requests: int64(len(h.Events))}); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		hh, err := history.ReadFile(file)
		if err != nil {
			b.Fatal(err)
		}
		if len(hh.Events) != len(h.Events) {
			b.Fatalf("read %d events, want %d", len(hh.Events), len(h.Events))
		}
		for _, r := range Run(hh, p, Options{}) {
			if r.Verdict == Fail {
				b.Fatalf("%s fails on a correct bucket: %s", r.Name, r.Summary)
			}
		}
	}
	b.ReportMetric(float64(len(h.Events))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
}

// headerHistory is benchHistory(1,000,000, 10,000) with the RateLimit
// fields of generation g beside X-RateLimit-*, as a correct limiter sends
// them.
func headerHistory(g policy.RateLimitHeaders) *history.History {
	k := "headers/" + string(g)
	if h, ok := benchHist.Load(k); ok {
		return h.(*history.History)
	}
	hc := *benchHistory(1_000_000, 10_000)
	h := &hc
	h.Events = append([]history.Event(nil), h.Events...)
	for i := range h.Events {
		e := &h.Events[i]
		if e.XRemaining == "" {
			continue
		}
		switch g {
		case policy.RateLimitStructured:
			e.RateLimit, e.RateLimitPolicy = fmt.Sprintf(`"free";r=%s;t=%s`, e.XRemaining, e.XReset), `"free";q=10;w=2`
		case policy.RateLimitDictionary:
			e.RateLimit, e.RateLimitPolicy = fmt.Sprintf(`limit=10, remaining=%s, reset=%s`, e.XRemaining, e.XReset), `10;w=2`
		case policy.RateLimitSplit:
			e.RateLimitLimit, e.RateLimitRemaining, e.RateLimitReset, e.RateLimitPolicy = "10", e.XRemaining, e.XReset, `10;w=2`
		}
	}
	benchHist.Store(k, h)
	return h
}

// BenchmarkHeaderGenerations runs the index and the three checks that read
// rate-limit headers (token-bounds, headers, isolation) over 1,000,000
// events of 10,000 keys carrying the fields of each generation.
func BenchmarkHeaderGenerations(b *testing.B) {
	for _, g := range []policy.RateLimitHeaders{policy.RateLimitStructured, policy.RateLimitDictionary, policy.RateLimitSplit} {
		b.Run(string(g), func(b *testing.B) {
			h := headerHistory(g)
			p := policy.Default()
			p.Headers.RateLimit, p.Headers.XRateLimit = g, true
			b.ResetTimer()
			cpu0 := processCPU()
			for i := 0; i < b.N; i++ {
				for _, r := range Run(h, p, Options{Only: []string{"token-bounds", "headers", "isolation"}}) {
					if r.Verdict == Fail {
						b.Fatalf("%s fails on a correct bucket: %s", r.Name, r.Summary)
					}
				}
			}
			b.ReportMetric(float64(len(h.Events))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
		})
	}
}
