package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/time/rate"

	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/internal/bench"
	"github.com/rlverify/rlverify/limiters"
	"github.com/rlverify/rlverify/limiters/thirdparty"
	"github.com/rlverify/rlverify/policy"
)

// ---- load engine ----

// engineRun runs one rate phase through attacks.Engine with full history
// recording to a file and returns its phase record.
func (c *config) engineRun(ctx context.Context, ratePerS float64, dur time.Duration, conc int) (history.Phase, error) {
	w, err := history.Create(c.tmpFile("bench-load.jsonl"))
	if err != nil {
		return history.Phase{}, err
	}
	defer w.Close()
	e, err := attacks.New(attacks.Options{Instances: []string{c.url}, Policy: policy.Default(), Writer: w,
		MaxRequests: 1 << 40, MaxDuration: dur + 30*time.Second, RunID: "bench", Timeout: 5 * time.Second})
	if err != nil {
		return history.Phase{}, err
	}
	p := &attacks.Plan{Name: "bench-rate", Phases: []attacks.Phase{{Name: "rate", Kind: attacks.KindRate, Key: "paid-bench",
		Rate: policy.Rate(ratePerS), Duration: policy.Duration(dur), Concurrency: conc}}}
	sum, err := e.Run(ctx, p, history.Run{})
	if err != nil {
		return history.Phase{}, err
	}
	if len(sum.Phases) != 1 {
		return history.Phase{}, fmt.Errorf("engine: %d phase records", len(sum.Phases))
	}
	return sum.Phases[0], nil
}

var wrkRate = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)

func (c *config) wrkRun(dur time.Duration) (float64, error) {
	out, err := exec.Command(c.wrk, "-t2", "-c64", "-d"+strconv.Itoa(int(dur.Seconds()))+"s", c.url+attacks.DefaultPath).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("wrk: %v: %s", err, out)
	}
	m := wrkRate.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("wrk: no Requests/sec in %s", out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

func (c *config) vegetaRun(dur time.Duration) (float64, error) {
	atk := exec.Command(c.vegeta, "attack", "-rate=0", "-max-workers=64", "-duration="+dur.String(), "-keepalive=true")
	atk.Stdin = strings.NewReader("GET " + c.url + attacks.DefaultPath + "\n")
	rep := exec.Command(c.vegeta, "report", "-type=json")
	pipe, err := atk.StdoutPipe()
	if err != nil {
		return 0, err
	}
	rep.Stdin = pipe
	var out, errb bytes.Buffer
	rep.Stdout = &out
	atk.Stderr, rep.Stderr = &errb, &errb
	if err := rep.Start(); err != nil {
		return 0, err
	}
	if err := atk.Run(); err != nil {
		return 0, fmt.Errorf("vegeta attack: %v: %s", err, errb.String())
	}
	if err := rep.Wait(); err != nil {
		return 0, fmt.Errorf("vegeta report: %v: %s", err, errb.String())
	}
	var r struct {
		Requests    float64            `json:"requests"`
		Throughput  float64            `json:"throughput"`
		Rate        float64            `json:"rate"`
		StatusCodes map[string]float64 `json:"status_codes"`
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return 0, fmt.Errorf("vegeta report: %v", err)
	}
	return r.Rate, nil
}

func (c *config) load(ctx context.Context, t *bench.Table) error {
	var wrk, veg, eng []float64
	for i := 0; i < c.rounds; i++ {
		w, err := c.wrkRun(c.dur)
		if err != nil {
			return err
		}
		wrk = append(wrk, w)
		if c.vegeta != "" {
			v, err := c.vegetaRun(c.dur)
			if err != nil {
				return err
			}
			veg = append(veg, v)
		}
		// Max sustainable rate: ask for far more than loopback can take
		// with 64 requests in flight; the achieved rate is the capacity.
		ph, err := c.engineRun(ctx, 150_000, c.dur, 64)
		if err != nil {
			return err
		}
		eng = append(eng, ph.Rate)
		v := 0.0
		if len(veg) > 0 {
			v = veg[len(veg)-1]
		}
		fmt.Fprintf(os.Stderr, "  round %d: wrk %.0f/s vegeta %.0f/s engine %.0f/s (late %d, dropped %d)\n", i+1, w, v, ph.Rate, ph.Late, ph.Dropped)
	}
	mw, mv, me := bench.Median(wrk), bench.Median(veg), bench.Median(eng)
	t.Add("load", "wrk -t2 -c64, req/s (runs)", fmt.Sprintf("%s (%s)", bench.Rate(mw), bench.Join(wrk, bench.Rate)), "reference", "")
	if c.vegeta != "" {
		t.Add("load", "vegeta -rate=0 -max-workers=64, req/s (runs)", fmt.Sprintf("%s (%s) = %s wrk", bench.Rate(mv), bench.Join(veg, bench.Rate), ratio(mv, mw)), "", "")
	}
	t.Add("load", "rlverify rate phase, 64 in flight, full history, req/s (runs)", fmt.Sprintf("%s (%s)", bench.Rate(me), bench.Join(eng, bench.Rate)), "", "")
	t.Check("load", "engine / wrk", ratio(me, mw), "≥ 1.0×", me/mw, 1.0, false)
	if c.vegeta != "" {
		t.Check("load", "engine / vegeta", ratio(me, mv), "≥ 1.4×", me/mv, 1.4, false)
	}
	// A fixed rate: held, or the shortfall reported.
	var got, lates, drops []float64
	for i := 0; i < c.rounds; i++ {
		ph, err := c.engineRun(ctx, 10_000, c.dur, 64)
		if err != nil {
			return err
		}
		got = append(got, ph.Rate)
		lates = append(lates, float64(ph.Late))
		drops = append(drops, float64(ph.Dropped))
	}
	g := bench.Median(got)
	t.Check("load", "fixed 10k/s requested: achieved (runs)", fmt.Sprintf("%s (%s); late %s, dropped %s", bench.Rate(g), bench.Join(got, bench.Rate),
		bench.Join(lates, func(x float64) string { return strconv.Itoa(int(x)) }), bench.Join(drops, func(x float64) string { return strconv.Itoa(int(x)) })),
		"held (≥ 0.98×) or shortfall reported", g/10_000, 0.98, false)
	return nil
}

// ---- burst release ----

func (c *config) burst(ctx context.Context, t *bench.Table) error {
	for _, n := range []int{100, 1000} {
		var p50, p99, mx []float64
		runs := max(c.rounds, 5)
		for i := 0; i < runs; i++ {
			w := history.NewWriter(nopWriter{})
			e, err := attacks.New(attacks.Options{Instances: []string{c.url}, Policy: policy.Default(), Writer: w, MaxRequests: 1 << 40, RunID: "bench"})
			if err != nil {
				return err
			}
			p := &attacks.Plan{Name: "bench-burst", Phases: []attacks.Phase{{Name: "burst", Kind: attacks.KindBurst, Key: "paid-bench", Requests: n}}}
			sum, err := e.Run(ctx, p, history.Run{})
			if err != nil {
				return err
			}
			ph := sum.Phases[0]
			p50, p99, mx = append(p50, float64(ph.SpreadP50)), append(p99, float64(ph.SpreadP99)), append(mx, float64(ph.SpreadMax))
		}
		v := fmt.Sprintf("p50 %s, p99 %s, max %s (p99 runs: %s)", bench.Dur(bench.Median(p50)), bench.Dur(bench.Median(p99)), bench.Dur(bench.Median(mx)), bench.Join(p99, bench.Dur))
		if n == 100 {
			t.Check("burst", "100-request burst, send-time spread (median of runs)", v, "p99 ≤ 1 ms in every run", slices.Max(p99), 1e6, true)
		} else {
			t.Add("burst", "1,000-request burst, send-time spread", v, "(net/http ref: 31 ms spread, 46 ms p99)", "")
		}
	}
	return nil
}

type nopWriter struct{}

func (nopWriter) Write(b []byte) (int, error) { return len(b), nil }

// ---- checkers ----

func benchPolicy() *policy.Policy {
	p, err := policy.Parse("bench", []byte(bench.PolicyYAML))
	if err != nil {
		panic(err)
	}
	return p
}

// runChecks times checks.Run on h and returns wall ns, CPU ns and bytes
// allocated.
func runChecks(h *history.History, p *policy.Policy) (wall, cpu float64, alloc uint64, err error) {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	c0, t0 := bench.CPU(), time.Now()
	res := checks.Run(h, p, checks.Options{})
	wall, cpu = float64(time.Since(t0)), float64(bench.CPU()-c0)
	runtime.ReadMemStats(&m1)
	for _, r := range res {
		if r.Verdict == checks.Fail {
			return 0, 0, 0, fmt.Errorf("check %s fails on the synthetic correct bucket: %s", r.Name, r.Summary)
		}
	}
	return wall, cpu, m1.TotalAlloc - m0.TotalAlloc, nil
}

func (c *config) checks(ctx context.Context, t *bench.Table) error {
	const n = 1_000_000
	p := benchPolicy()
	h := bench.Generate(n, 10_000)
	var walls, cpus []float64
	var alloc uint64
	for i := 0; i < c.rounds; i++ {
		w, cp, a, err := runChecks(h, p)
		if err != nil {
			return err
		}
		walls, cpus, alloc = append(walls, w), append(cpus, cp), a
	}
	evs := func(ns float64) string { return bench.Rate(n / (ns / 1e9)) }
	mw := bench.Median(walls)
	t.Check("checks", "full checker set, 1M events / 10k keys in memory (runs)", fmt.Sprintf("%s (%s); CPU %s ev/CPU-s", evs(mw), bench.Join(walls, evs), evs(bench.Median(cpus))),
		"≥ 2 M/s", n/(mw/1e9), 2e6, false)
	t.Add("checks", "memory per event", fmt.Sprintf("%d B allocated by the checks + %d B the in-memory Event", alloc/n, eventSize()), "", "")

	// End to end: rlverify check on a JSONL file.
	file := c.tmpFile("bench-1m.jsonl")
	pfile := c.tmpFile("bench-policy.yaml")
	if err := os.WriteFile(pfile, []byte(bench.PolicyYAML), 0o644); err != nil {
		return err
	}
	if err := bench.WriteHistory(file, h); err != nil {
		return err
	}
	defer os.Remove(file)
	st, _ := os.Stat(file)
	// Decoding alone, fast decoder vs encoding/json per line.
	var dec, std []float64
	for i := 0; i < c.rounds; i++ {
		t0 := time.Now()
		hh, err := history.ReadFile(file)
		if err != nil {
			return err
		}
		dec = append(dec, float64(len(hh.Events))/time.Since(t0).Seconds())
		hh = nil
		runtime.GC()
		r, err := stdDecode(file)
		if err != nil {
			return err
		}
		std = append(std, r)
	}
	t.Add("checks", "history.Read of the 1M-event file (runs)", fmt.Sprintf("%s (%s); encoding/json per line %s = %s", bench.Rate(bench.Median(dec)), bench.Join(dec, bench.Rate),
		bench.Rate(bench.Median(std)), ratio(bench.Median(dec), bench.Median(std))), fmt.Sprintf("%.0f MB file, %d B/line", float64(st.Size())/1e6, st.Size()/n), "")
	if c.rlverify == "" {
		return nil
	}
	var e2e []float64
	for i := 0; i < c.rounds; i++ {
		t0 := time.Now()
		cmd := exec.CommandContext(ctx, c.rlverify, "check", "--history", file, "--policy", pfile, "--format", "json")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("rlverify check: %v: %.500s", err, out.String())
		}
		e2e = append(e2e, n/time.Since(t0).Seconds())
	}
	m := bench.Median(e2e)
	t.Check("checks", "`rlverify check --history` 1M-event JSONL end to end (runs)", fmt.Sprintf("%s (%s)", bench.Rate(m), bench.Join(e2e, bench.Rate)), "≥ 1.5 M/s", m, 1.5e6, false)
	return nil
}

func eventSize() int { return int(unsafe.Sizeof(history.Event{})) }

// bucket is a token-bucket limit of capacity k and rate r per second (with
// the equivalent window, as the third-party adapters want).
func bucket(k int64, r float64) []policy.Limit {
	return []policy.Limit{{Algorithm: policy.TokenBucket, Capacity: k, Rate: policy.Rate(r), Count: k,
		Window: policy.Duration(time.Duration(float64(k) / r * float64(time.Second)))}}
}

// stdDecode decodes the event lines of file the way history.Read did before
// the fast decoder: a strict encoding/json Decoder per line.
func stdDecode(file string) (float64, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<16), history.MaxLine)
	var evs []history.Event
	t0 := time.Now()
	for sc.Scan() {
		b := sc.Bytes()
		if !bytes.HasPrefix(b, []byte(`{"t":"e",`)) {
			continue
		}
		evs = append(evs, history.Event{})
		d := json.NewDecoder(bytes.NewReader(b))
		d.DisallowUnknownFields()
		if err := d.Decode(&evs[len(evs)-1]); err != nil {
			return 0, err
		}
	}
	return float64(len(evs)) / time.Since(t0).Seconds(), sc.Err()
}

// ---- limiter decisions ----

func (c *config) limiters(ctx context.Context, t *bench.Table) error {
	limits := bucket(100, 1e6)
	tb, err := limiters.NewTokenBucket(limits)
	if err != nil {
		return err
	}
	x, err := thirdparty.NewXTimeRate(limits)
	if err != nil {
		return err
	}
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("rl:{free:key-%d}:api:v1", i)
	}
	t0 := time.Unix(1_700_000_000, 0).UnixNano()
	keyed := func(allow func(int64, string, int) limiters.Decision) func(*testing.B) {
		return func(b *testing.B) {
			now := t0
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				now += 100
				allow(now, keys[i&1023], 1)
			}
		}
	}
	single := func(b *testing.B) {
		l := rate.NewLimiter(1e6, 100)
		now := time.Unix(0, t0)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			now = now.Add(100)
			l.AllowN(now, 1)
		}
	}
	type res struct{ ns, allocs []float64 }
	cases := []struct {
		name string
		f    func(*testing.B)
		r    res
	}{
		{"rlverify token bucket, 1024 keys, given now", keyed(tb.AllowAt), res{}},
		{"x/time/rate behind the same keyed map", keyed(x.AllowAt), res{}},
		{"x/time/rate AllowN, one limiter, given now", single, res{}},
	}
	for i := 0; i < c.rounds; i++ {
		for j := range cases {
			r := testing.Benchmark(cases[j].f)
			cases[j].r.ns = append(cases[j].r.ns, float64(r.NsPerOp()))
			cases[j].r.allocs = append(cases[j].r.allocs, float64(r.AllocsPerOp()))
		}
	}
	for j, cs := range cases {
		ns, al := bench.Median(cs.r.ns), bench.Median(cs.r.allocs)
		v := fmt.Sprintf("%.0f ns/op, %.0f allocs (runs %s ns)", ns, al, bench.Join(cs.r.ns, func(x float64) string { return strconv.Itoa(int(x)) }))
		if j == 0 {
			st := "ok"
			if ns > 100 || al > 0 {
				st = "BELOW"
			}
			t.Add("limiters", cs.name, v+"; "+ratio(ns, bench.Median(cases[1].r.ns))+" x/time/rate's time", "≤ 100 ns, 0 allocs", st)
		} else {
			t.Add("limiters", cs.name, v, "", "")
		}
	}
	return nil
}

// ---- Redis ----

// redisRun makes decisions with par goroutines over 64 keys for dur and
// returns decisions/s.
func redisRun(ctx context.Context, l limiters.Limiter, par int, dur time.Duration, tag string) (float64, error) {
	var n atomic.Int64
	var firstErr atomic.Value
	deadline := time.Now().Add(dur)
	var wg sync.WaitGroup
	t0 := time.Now()
	for g := 0; g < par; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			key := fmt.Sprintf("rl:{bench-%s:%d}:api:v1", tag, g%64)
			for time.Now().Before(deadline) {
				for k := 0; k < 64; k++ {
					if _, err := l.Allow(ctx, time.Time{}, key, 1); err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
				}
				n.Add(64)
			}
		}(g)
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return 0, err
	}
	return float64(n.Load()) / time.Since(t0).Seconds(), nil
}

var rbRate = regexp.MustCompile(`([0-9.]+) requests per second`)

func (c *config) redis(ctx context.Context, t *bench.Table) error {
	if c.redisAddr == "" {
		t.Add("redis", "skipped", "no redis-server", "", "")
		return nil
	}
	const par = 32
	limits := bucket(1000, 1e5)
	client := limiters.NewRedisClient(c.redisAddr, time.Second)
	defer client.Close()
	ours, err := limiters.NewRedis(policy.TokenBucket, client, limits)
	if err != nil {
		return err
	}
	client2 := limiters.NewRedisClient(c.redisAddr, time.Second)
	defer client2.Close()
	rr, err := thirdparty.NewRedisRate(client2, limits)
	if err != nil {
		return err
	}
	if _, err := ours.Allow(ctx, time.Time{}, "warm", 1); err != nil { // loads the script
		return err
	}
	host, port, _ := strings.Cut(c.redisAddr, ":")
	dur := c.dur
	var o, r, raw []float64
	for i := 0; i < c.rounds; i++ {
		x, err := redisRun(ctx, ours, par, dur, fmt.Sprintf("o%d", i))
		if err != nil {
			return err
		}
		y, err := redisRun(ctx, rr, par, dur, fmt.Sprintf("r%d", i))
		if err != nil {
			return err
		}
		// The raw script rate: the same EVALSHA (same keys, same arguments,
		// Redis TIME) from redis-benchmark's C client, 32 connections.
		nreq := strconv.Itoa(int(max(x, y) * dur.Seconds()))
		out, err := exec.CommandContext(ctx, c.redisBenchmark, "-h", host, "-p", port, "-c", strconv.Itoa(par), "-n", nreq, "-r", "64", "-q",
			"EVALSHA", ours.ScriptHash(), "1", "{bench-raw"+strconv.Itoa(i)+":__rand_int__}:0", "", "1", "1000", "100000").CombinedOutput()
		if err != nil {
			return fmt.Errorf("redis-benchmark: %v: %s", err, out)
		}
		m := rbRate.FindSubmatch(out)
		if m == nil {
			return fmt.Errorf("redis-benchmark: no rate in %q", out)
		}
		z, _ := strconv.ParseFloat(string(m[1]), 64)
		o, r, raw = append(o, x), append(r, y), append(raw, z)
		fmt.Fprintf(os.Stderr, "  round %d: ours %.0f/s redis_rate %.0f/s raw %.0f/s\n", i+1, x, y, z)
	}
	mo, mr, mraw := bench.Median(o), bench.Median(r), bench.Median(raw)
	t.Add("redis", fmt.Sprintf("raw token-bucket EVALSHA, redis-benchmark -c %d (runs)", par), fmt.Sprintf("%s (%s)", bench.Rate(mraw), bench.Join(raw, bench.Rate)), "reference", "")
	t.Add("redis", fmt.Sprintf("go-redis/redis_rate, %d goroutines (runs)", par), fmt.Sprintf("%s (%s)", bench.Rate(mr), bench.Join(r, bench.Rate)), "", "")
	t.Add("redis", fmt.Sprintf("rlverify Redis token bucket, %d goroutines (runs)", par), fmt.Sprintf("%s (%s)", bench.Rate(mo), bench.Join(o, bench.Rate)), "", "")
	t.Check("redis", "ours / redis_rate", ratio(mo, mr), "≥ 1.1×", mo/mr, 1.1, false)
	t.Check("redis", "ours / raw EVALSHA", ratio(mo, mraw), "≥ 0.85×", mo/mraw, 0.85, false)
	return nil
}

// ---- scaling ----

func (c *config) scaling(ctx context.Context, t *bench.Table) error {
	p := benchPolicy()
	for _, keys := range []int{1, 1000, 100_000} {
		var cells []string
		var perEv []float64
		for _, n := range []int{10_000, 100_000, 1_000_000} {
			h := bench.Generate(n, keys)
			var walls []float64
			var alloc uint64
			for i := 0; i < c.rounds; i++ {
				w, _, a, err := runChecks(h, p)
				if err != nil {
					return fmt.Errorf("keys=%d n=%d: %w", keys, n, err)
				}
				walls, alloc = append(walls, w), a
			}
			m := bench.Median(walls)
			perEv = append(perEv, m/float64(n))
			cells = append(cells, fmt.Sprintf("10^%d: %s, %d B/ev", len(strconv.Itoa(n))-1, bench.Dur(m), alloc/uint64(n)))
			h = nil
			runtime.GC()
		}
		growth := fmt.Sprintf("ns/event %.0f → %.0f → %.0f; ≤ 400 ns/event at 10^6", perEv[0], perEv[1], perEv[2])
		t.Check("scaling", fmt.Sprintf("checks, %d key(s): time and allocation by events", keys), strings.Join(cells, "; "), growth, perEv[2], 400, true)
	}
	if err := c.checkMemory(ctx, t); err != nil {
		return err
	}
	return c.scaleLarge(ctx, t)
}
