package attacks

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlverify/rlverify/headers"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// Defaults and bounds of the retry, probe, bypass and boundary phases.
const (
	// DefaultRetries is the retries per client of a retry phase that sets none.
	DefaultRetries = 3
	// MaxRetryWait is the longest advised wait a retrying client of a phase
	// without a duration honours; a longer advice ends that client.
	MaxRetryWait = time.Minute
	// MaxJitter bounds the jitter of a retry phase.
	MaxJitter = time.Minute
	// DefaultBypassExtra is added to the tier's capacity K to size each
	// variant of a bypass phase that sets no requests.
	DefaultBypassExtra = 5
	// edgeLead is how far ahead of now a boundary's first burst must lie so
	// its connections can be opened in time.
	edgeLead = 300 * time.Millisecond
)

// retry runs Requests clients for one key. Each sends at once; on a 429 or
// 503 it waits what Retry-After advises (delay-seconds or an HTTP-date;
// without a usable Retry-After a bounded exponential backoff from 100ms)
// plus a uniform jitter in [0, Jitter), then tries again, at most Retries
// times. Every attempt is an event whose Intended is when the client meant
// to send it. With Duration set, no attempt is planned after the phase's end.
func (e *Engine) retry(ctx context.Context, ph *Phase) (*history.Phase, error) {
	key := e.Key(ph.Key)
	n := e.share(ph.Requests)
	retries := ph.Retries
	if retries == 0 {
		retries = DefaultRetries
	}
	start := e.off()
	end := int64(-1)
	if ph.Duration > 0 {
		end = start + int64(ph.Duration)
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ph.Duration.D()+e.o.Timeout)
		defer cancel()
	}
	var attempts, late atomic.Int64
	var wg sync.WaitGroup
	for c := 0; c < n; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			intended := start
			for a := 0; a <= retries; a++ {
				if a > 0 {
					e.sleepUntil(ctx, intended)
				}
				if ctx.Err() != nil || !e.reserve(1) {
					return
				}
				ev := e.do(ctx, &req{key: key, sendKey: key, inst: e.pickInstance(ph, c), phase: ph.Name, intended: intended})
				attempts.Add(1)
				if ev.Sent-intended > int64(e.o.LateTolerance) {
					late.Add(1)
				}
				if e.classify(ev) != policy.ClassRejected && !e.o.Policy.Statuses.Closed.Has(ev.Status) {
					return
				}
				wait, ok := retryAdvice(ev.RetryAfter, e.wall(ev.Recv))
				if !ok {
					wait = min(100*time.Millisecond<<a, 5*time.Second)
				}
				if ph.Jitter > 0 {
					e.rngMu.Lock()
					wait += time.Duration(e.rng.Int64N(int64(ph.Jitter)))
					e.rngMu.Unlock()
				}
				intended = ev.Recv + int64(wait)
				if (end >= 0 && intended > end) || (end < 0 && wait > MaxRetryWait) {
					return
				}
			}
		}(c)
	}
	wg.Wait()
	return &history.Phase{Start: start, Requests: attempts.Load(), Late: late.Load()}, nil
}

// spread sends Requests requests for one key over the instances (per
// Instances). Without Concurrency they leave together as one burst; with it,
// that many clients send back to back until all are sent.
func (e *Engine) spread(ctx context.Context, ph *Phase) (*history.Phase, error) {
	key := e.Key(ph.Key)
	n := e.share(ph.Requests)
	if ph.Concurrency == 0 {
		return e.burst(ctx, ph, key, n, -1)
	}
	start := e.off()
	var next, sent, late atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < min(ph.Concurrency, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(n) || !e.reserve(1) {
					return
				}
				intended := e.off()
				ev := e.do(ctx, &req{key: key, sendKey: key, inst: e.pickInstance(ph, int(i)), phase: ph.Name, intended: intended})
				sent.Add(1)
				if ev.Sent-intended > int64(e.o.LateTolerance) {
					late.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return &history.Phase{Start: start, Requests: sent.Load(), Late: late.Load()}, nil
}

// probe sends one request for Key at a computed instant: when the last
// rejection of the key said a retry may succeed (its receive time plus its
// Retry-After), or At after the phase starts. The request is released by
// last-byte synchronisation, so its send time is the aimed instant to within
// the clock's polling; the record carries Target and AimError. An instant
// already past is fired at once (a positive AimError shows by how much).
func (e *Engine) probe(ctx context.Context, ph *Phase) (*history.Phase, error) {
	if e.share(1) == 0 {
		return &history.Phase{}, nil // one shard probes
	}
	key := e.Key(ph.Key)
	start := e.off()
	var target int64
	if ph.At == "" || ph.At == "retry-after" {
		v, ok := e.lastRejection.Load(key)
		if !ok {
			return nil, fmt.Errorf("probe at retry-after: no rejection with a usable Retry-After has been seen for key %s yet (run a phase that exceeds its limit first)", ph.Key)
		}
		rj := v.(rejection)
		target = rj.recv + int64(rj.retryAfter)
	} else {
		d, err := policy.ParseDuration(ph.At)
		if err != nil {
			return nil, fmt.Errorf("probe at %q: %w", ph.At, err)
		}
		target = start + int64(d)
	}
	if away := time.Duration(target - start); away > e.o.MaxDuration {
		return nil, fmt.Errorf("probe at %s: the instant is %s away, beyond --max-duration %s", ph.At, away, e.o.MaxDuration)
	}
	rec, err := e.burst(ctx, ph, key, 1, target)
	if rec != nil {
		rec.Start, rec.Target = start, target
	}
	return rec, err
}

// bypass sends the plain key and then each identity variant of it, one
// burst per variant, so a limiter that keys on something the client
// controls shows extra admissions for a variant after the plain key has
// been drained. Events keep the logical key in Key and name what was sent
// in Variant.
func (e *Engine) bypass(ctx context.Context, ph *Phase) (*history.Phase, error) {
	key := e.Key(ph.Key)
	n := ph.Requests
	if n == 0 {
		lim, err := e.limitFor(key)
		if err != nil {
			return nil, err
		}
		n = int(min(lim.Capacity+DefaultBypassExtra, MaxBurstRequests))
	}
	n = e.share(n)
	if n == 0 {
		return &history.Phase{}, nil
	}
	for _, v := range ph.Variants {
		if v != "space" {
			continue
		}
		for _, in := range e.o.Instances {
			if u, err := url.Parse(in); err != nil || u.Scheme != "http" {
				return nil, fmt.Errorf("bypass variant space needs plain http:// targets: over https the request goes through net/http, which trims header values, so the spaces would never be sent (%s)", in)
			}
		}
	}
	type group struct {
		variant, sendKey, path string
		xff                    bool
	}
	groups := []group{{sendKey: key}}
	for _, v := range ph.Variants {
		switch v {
		case "case":
			groups = append(groups, group{variant: "case", sendKey: strings.ToUpper(key)})
		case "space":
			groups = append(groups, group{variant: "space", sendKey: " " + key + " "})
		case "xff":
			groups = append(groups, group{variant: "xff", sendKey: key, xff: true})
		case "path":
			for _, p := range []string{DefaultPath + "/", "/" + DefaultPath} {
				groups = append(groups, group{variant: "path:" + p, sendKey: key, path: p})
			}
		}
	}
	ips := e.benchmarkIPs(n)
	rec := &history.Phase{}
	for _, g := range groups {
		if ctx.Err() != nil {
			break
		}
		rs := make([]*req, n)
		for i := range rs {
			r := &req{key: key, sendKey: g.sendKey, variant: g.variant, path: g.path, inst: e.pickInstance(ph, i), phase: ph.Name}
			if g.xff {
				r.xff = ips[i]
				r.variant = "xff:" + ips[i]
			}
			rs[i] = r
		}
		r, err := e.burstOf(ctx, rs, -1)
		if err != nil {
			return rec, err
		}
		if rec.Start == 0 {
			rec.Start = r.Start
		}
		rec.Requests += r.Requests
		rec.SpreadP50 = max(rec.SpreadP50, r.SpreadP50)
		rec.SpreadP99 = max(rec.SpreadP99, r.SpreadP99)
		rec.SpreadMax = max(rec.SpreadMax, r.SpreadMax)
	}
	return rec, nil
}

// benchmarkIPs returns n distinct addresses from 198.18.0.0/15, the range
// RFC 2544 reserves for benchmarking. They are only header values; nothing
// is ever sent to them.
func (e *Engine) benchmarkIPs(n int) []string {
	const size = 1 << 17
	n = min(n, size-2)
	seen := make(map[uint32]bool, n)
	out := make([]string, 0, n)
	e.rngMu.Lock()
	defer e.rngMu.Unlock()
	for len(out) < n {
		o := uint32(e.rng.IntN(size))
		if o == 0 || o == size-1 || seen[o] {
			continue // skip the network and broadcast addresses
		}
		seen[o] = true
		out = append(out, fmt.Sprintf("198.%d.%d.%d", 18+o>>16, o>>8&0xff, o&0xff))
	}
	return out
}

// headerEdge discovers the next window edge of key from the target's reset
// headers: it sends one request (recorded like any other) and reads
// X-RateLimit-Reset (in the declared form, or when the policy declares no
// X-RateLimit-* relative seconds, epoch seconds or an HTTP-date as they
// look) or else the reset of the RateLimit fields (t=, reset= or
// RateLimit-Reset, in the declared generation or the one the response
// uses). Whole-second headers place the edge only within a second: a
// relative reset v means the edge lies in (sent+v-1s, recv+v], and the
// midpoint of that interval is returned. An edge closer than lead is moved
// on by whole windows w.
func (e *Engine) headerEdge(ctx context.Context, ph *Phase, key string, w, lead time.Duration) (int64, error) {
	if !e.reserve(1) {
		return 0, fmt.Errorf("align: headers: the request budget (--max-requests) is spent")
	}
	ev := e.do(ctx, &req{key: key, sendKey: key, inst: e.pickInstance(ph, 0), phase: ph.Name, intended: e.off()})
	if ev.Status == 0 {
		return 0, fmt.Errorf("align: headers: the discovery request failed: %s", ev.Err)
	}
	edge, ok := resetEdge(ev, e.start, e.o.Policy)
	if !ok {
		return 0, fmt.Errorf("align: headers: the response (status %d) carries no usable X-RateLimit-Reset or RateLimit reset (t=, reset=, RateLimit-Reset) (X-RateLimit-Reset %q, RateLimit %q, RateLimit-Reset %q); use align: epoch", ev.Status, ev.XReset, ev.RateLimit, ev.RLReset)
	}
	if now := e.off() + int64(lead); edge < now && w > 0 {
		k := (now - edge + int64(w) - 1) / int64(w)
		edge += k * int64(w)
	}
	return edge, nil
}

// resetEdge computes the window edge a response's reset headers point at,
// as an offset from start, reading them as p declares; see headerEdge.
func resetEdge(ev *history.Event, start time.Time, p *policy.Policy) (int64, bool) {
	mid := (ev.Sent + ev.Recv) / 2
	half := int64(500 * time.Millisecond)
	f := fieldsOf(ev)
	if f.XReset != "" {
		form := headers.ResetGuess
		if p.Headers.XRateLimit {
			form = headers.ResetForm(p.Headers.XReset)
		}
		if r, err := headers.ParseXReset(f.XReset, form); err == nil {
			if r.Absolute() {
				return r.At.Sub(start).Nanoseconds() - half, true
			}
			return mid + r.Delta*int64(time.Second) - half, true
		}
	}
	gen := headers.Generation(p.Headers.RateLimit)
	if gen == headers.None {
		gen = headers.Detect(f)
	}
	if o := headers.Read(gen, f); o.Reset.Valid() {
		return mid + o.Reset.N*int64(time.Second) - half, true
	}
	return 0, false
}
