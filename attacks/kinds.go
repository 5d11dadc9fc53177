package attacks

import (
	"context"
	"fmt"
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
	var attempts, late, beyondCap atomic.Int64
	var longest atomic.Int64
	maxWait := MaxRetryWait
	if e.o.MaxProbeWait > 0 {
		maxWait = e.o.MaxProbeWait
	}
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
				r := e.newReq(ph, ph.Key, e.pickInstance(ph, c))
				r.intended = intended
				ev := e.do(ctx, r)
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
				if wait > maxWait {
					// Advice longer than the cap is a finding, not a reason
					// to stall the run.
					beyondCap.Add(1)
					for old := longest.Load(); int64(wait) > old && !longest.CompareAndSwap(old, int64(wait)); old = longest.Load() {
					}
					return
				}
				if end >= 0 && intended > end {
					return
				}
			}
		}(c)
	}
	wg.Wait()
	rec := &history.Phase{Start: start, Requests: attempts.Load(), Late: late.Load()}
	if n := beyondCap.Load(); n > 0 {
		rec.Notes = append(rec.Notes, fmt.Sprintf("%d retrying clients were advised to wait longer than the cap %s (the longest: %s) and stopped", n, maxWait, time.Duration(longest.Load()).Round(time.Millisecond)))
	}
	return rec, nil
}

// spread sends Requests requests for one key over the instances (per
// Instances). Without Concurrency they leave together as one burst; with it,
// that many clients send back to back until all are sent.
func (e *Engine) spread(ctx context.Context, ph *Phase) (*history.Phase, error) {
	n := e.share(ph.Requests)
	if ph.Concurrency == 0 {
		return e.burst(ctx, ph, ph.Key, n, -1)
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
				r := e.newReq(ph, ph.Key, e.pickInstance(ph, int(i)))
				r.intended = intended
				ev := e.do(ctx, r)
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
	advice, extra, err := ProbeAt(ph.At)
	if err != nil {
		return nil, err
	}
	if advice {
		v, ok := e.lastRejection.Load(key)
		if !ok {
			// Nothing to probe is a finding about this run, not a reason to
			// stop the plan: the phase says why and the plan goes on.
			return &history.Phase{Start: start, Notes: []string{fmt.Sprintf("probe at retry-after: not sent, no refusal with a usable Retry-After was seen for key %s before this phase", ph.Key)}}, nil
		}
		rj := v.(rejection)
		target = rj.recv + int64(rj.retryAfter) + int64(extra)
	} else {
		target = start + int64(extra)
	}
	if away := time.Duration(target - start); away > e.o.MaxDuration || (e.o.MaxProbeWait > 0 && away > e.o.MaxProbeWait) {
		limit, name := e.o.MaxDuration, "MaxDuration"
		if e.o.MaxProbeWait > 0 && e.o.MaxProbeWait < limit {
			limit, name = e.o.MaxProbeWait, "the probe cap"
		}
		return &history.Phase{Start: start, Target: target, Notes: []string{fmt.Sprintf("probe at %s: not sent, the instant is %s away, beyond %s %s", ph.At, fmtAway(away), name, limit)}}, nil
	}
	rec, err := e.burst(ctx, ph, ph.Key, 1, target)
	if rec != nil {
		rec.Start, rec.Target = start, target
	}
	return rec, err
}

// Bypass variants a plan can name. Which are sent follows from the policy's
// identity declaration (see variantGroups); "path" stands for every path
// spelling the policy declares the same route.
var BypassVariants = []string{"xff", "xff-shared", "repeat", "space", "case", "long", "path"}

// variantGroup is one bypass variant: how its requests differ from the
// plain key's.
type variantGroup struct {
	name string
	// mod changes a request of the key into the variant's (i: its index).
	mod func(r *req, i int)
}

// variantGroups derives the variants to send for key from the declared
// identity: only spellings the declaration says are the SAME key (so an
// extra admission proves a bypass) — or, for a repeated identity with
// repeated: rejected and keys beyond max_length with too_long: reject,
// requests the limiter must refuse. Variants the plan names that the
// declaration rules out are returned as notes.
func (e *Engine) variantGroups(ph *Phase, logical, key string, n int) (groups []variantGroup, notes []string, err error) {
	id := &e.o.Policy.Identity
	want := ph.Variants
	if len(want) == 0 {
		want = BypassVariants
	}
	plainHTTP := true
	for _, b := range e.bases {
		if b.scheme == SchemeGRPC {
			return nil, nil, fmt.Errorf("bypass variants change how an HTTP request carries its key; a grpc:// rate-limit service is sent a descriptor, not the request (how a request's header becomes a descriptor value is Envoy's part: test it with Envoy in front)")
		}
		plainHTTP = plainHTTP && b.scheme == "http"
	}
	ips := e.benchmarkIPs(n)
	for _, v := range want {
		switch v {
		case "xff", "xff-shared":
			if id.TrustsLoopback() {
				notes = append(notes, v+": not sent, the policy trusts X-Forwarded-For from loopback, so other addresses are other identities")
				continue
			}
			if v == "xff" {
				groups = append(groups, variantGroup{name: "xff", mod: func(r *req, i int) { r.xff = ips[i%len(ips)]; r.variant = "xff:" + r.xff }})
			} else {
				shared := ips[0]
				groups = append(groups, variantGroup{name: "xff-shared", mod: func(r *req, i int) { r.xff = shared; r.variant = "xff-shared:" + shared }})
			}
		case "repeat":
			spare, ok := e.keys.spare(logical)
			if !ok {
				notes = append(notes, "repeat: not sent, the keys file has no spare key of this tier to send beside the real one")
				continue
			}
			// The key goes where the application finds its tenant, the
			// spare key in the other place: a limiter that counts the other
			// occurrence (declared so, or not) charges the spare key and
			// serves the tenant beyond its quota.
			vals := []string{key, spare}
			if id.Tenant() == policy.RepeatedLast {
				vals = []string{spare, key}
			}
			groups = append(groups, variantGroup{name: "repeat", mod: func(r *req, i int) {
				r.send, r.variant = vals, "repeat"
				if id.Repeated == policy.RepeatedRejected && i%2 == 1 {
					r.send = []string{vals[1], vals[0]}
				}
			}})
		case "space":
			if !id.Trimmed() {
				notes = append(notes, "space: not sent, the policy declares keys untrimmed (trim: false), so \" key \" is another key")
				continue
			}
			if !plainHTTP && id.In != policy.InQuery {
				return nil, nil, fmt.Errorf("bypass variant space needs plain http:// targets: over https the request goes through net/http, which trims header values, so the spaces would never be sent")
			}
			groups = append(groups, variantGroup{name: "space", mod: func(r *req, _ int) { r.send, r.variant = []string{" " + key + " "}, "space" }})
		case "case":
			if !id.CaseFolded() {
				notes = append(notes, "case: not sent, the policy declares keys case-sensitive, so another case is another key")
				continue
			}
			up := strings.ToUpper(key)
			if up == key {
				up = strings.ToLower(key)
			}
			if up == key {
				notes = append(notes, "case: not sent, the key has no letters")
				continue
			}
			groups = append(groups, variantGroup{name: "case", mod: func(r *req, _ int) { r.send, r.variant = []string{up}, "case" }})
		case "long":
			if id.MaxLength == 0 {
				notes = append(notes, "long: not sent, the policy declares no identity.max_length")
				continue
			}
			if id.TooLong == policy.TooLongCut && len(key) < id.MaxLength {
				notes = append(notes, fmt.Sprintf("long: not sent, the key (%d characters) is shorter than max_length %d, so a longer one cut to %d is another key", len(key), id.MaxLength, id.MaxLength))
				continue
			}
			long := key + "-" + strings.Repeat("x", max(1, id.MaxLength+1-len(key)))
			groups = append(groups, variantGroup{name: "long", mod: func(r *req, _ int) { r.send, r.variant = []string{long}, "long" }})
		case "path":
			if len(id.PathVariants) == 0 {
				notes = append(notes, "path: not sent, the policy declares no identity.path_variants (path spellings counted as the same route)")
				continue
			}
			sh := e.shapes[ph.Name]
			if sh == nil {
				sh = e.defShape
			}
			full := e.bases[0].requestTarget(sh.path.render(&vars{key: key, tenant: logical, run: e.o.RunID}), e.defPath, nil)
			for _, pv := range id.PathVariants {
				p, q := pathVariant(full, pv, id.PathPrefix)
				name := "path:" + pv
				groups = append(groups, variantGroup{name: name, mod: func(r *req, _ int) {
					r.path, r.absPath, r.variant = p, true, name
					if q != "" {
						r.query = append(r.query, q)
					}
				}})
			}
		default:
			return nil, nil, fmt.Errorf("unknown bypass variant %q", v)
		}
	}
	return groups, notes, nil
}

// pathVariant spells the request-target full (path and query) as the path
// variant pv; q is an extra query parameter. The sibling variant asks for
// another path under prefix (the policy's identity.path_prefix).
func pathVariant(full, pv, prefix string) (path, q string) {
	p, query, hasQ := strings.Cut(full, "?")
	if p == "" {
		p = "/"
	}
	switch pv {
	case "trailing-slash":
		if strings.HasSuffix(p, "/") && len(p) > 1 {
			p = strings.TrimSuffix(p, "/")
		} else {
			p += "/"
		}
	case "double-slash":
		p = "/" + p
	case "case":
		if up := strings.ToUpper(p); up != p {
			p = up
		} else {
			p = strings.ToLower(p)
		}
	case "query":
		q = "rlverify-variant=1"
	case "sibling":
		sib := strings.TrimSuffix(prefix, "/") + "/" + policy.SiblingPath
		if p == sib {
			sib += "-2"
		}
		p = sib
	}
	if hasQ {
		p += "?" + query
	}
	return p, q
}

// absTarget is a variant's whole request-target with extra query
// parameters.
func absTarget(path string, extra []string) string {
	if len(extra) == 0 {
		return path
	}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return path + sep + strings.Join(extra, "&")
}

// bypass drains the plain key with one burst, then sends one burst per
// identity variant. Each variant burst interleaves the variant's requests
// with as many requests of the plain key (the control group), released
// together over the same instances, so a limiter that oversells any burst
// (a race, per-instance state) oversells the control as much as the
// variant, and only a variant that buys quota the control does not get is
// a bypass. Events keep the key in Key and name the variant in Variant
// (control requests have none).
func (e *Engine) bypass(ctx context.Context, ph *Phase) (*history.Phase, error) {
	key := e.Key(ph.Key)
	n := ph.Requests
	if n == 0 {
		lim, err := e.limitFor(key)
		if err != nil {
			return nil, err
		}
		n = int(min(lim.Capacity+DefaultBypassExtra, MaxBurstRequests/2))
	}
	n = e.share(n)
	if n == 0 {
		return &history.Phase{}, nil
	}
	groups, notes, err := e.variantGroups(ph, ph.Key, key, n)
	if err != nil {
		return nil, err
	}
	rec := &history.Phase{Notes: notes}
	merge := func(r *history.Phase) {
		if rec.Start == 0 {
			rec.Start = r.Start
		}
		rec.Requests += r.Requests
		rec.SpreadP50 = max(rec.SpreadP50, r.SpreadP50)
		rec.SpreadP99 = max(rec.SpreadP99, r.SpreadP99)
		rec.SpreadMax = max(rec.SpreadMax, r.SpreadMax)
	}
	drain, err := e.burst(ctx, ph, ph.Key, n, -1)
	if err != nil {
		return rec, err
	}
	merge(drain)
	for _, g := range groups {
		if ctx.Err() != nil {
			break
		}
		rs := make([]*req, 2*n)
		for i := 0; i < n; i++ {
			inst := e.pickInstance(ph, i)
			control := e.newReq(ph, ph.Key, inst)
			variant := e.newReq(ph, ph.Key, inst)
			g.mod(variant, i)
			rs[2*i], rs[2*i+1] = control, variant
		}
		r, err := e.burstOf(ctx, rs, -1)
		if err != nil {
			return rec, err
		}
		merge(r)
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
		return 0, fmt.Errorf("align: headers: the request budget (MaxRequests) is spent")
	}
	r := e.newReq(ph, ph.Key, e.pickInstance(ph, 0))
	r.intended = e.off()
	ev := e.do(ctx, r)
	if ev.Status == 0 {
		return 0, fmt.Errorf("align: headers: the discovery request failed: %s", ev.Err)
	}
	edge, ok := resetEdge(ev, e.start, e.o.Policy)
	if !ok {
		return 0, fmt.Errorf("align: headers: the response (status %d) carries no usable X-RateLimit-Reset or RateLimit reset (t=, reset=, RateLimit-Reset) (X-RateLimit-Reset %q, RateLimit %q, RateLimit-Reset %q); use align: epoch", ev.Status, ev.XReset, ev.RateLimit, ev.RateLimitReset)
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
	f := ev.Fields
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

func fmtAway(d time.Duration) string { return d.Round(time.Millisecond).String() }
