// Package discover measures a rate limiter's policy from outside: it probes
// a service with the request shape the user gives (through the attack
// engine, so a probe is shaped, keyed and recorded exactly as an attack's
// requests are) and infers, per tier, the algorithm family, capacity K or
// limit N, rate r or window W, the window's anchoring, whether refused
// requests cost, the scope across instances, the statuses and the headers
// and what they mean. Every number comes with its evidence and its
// uncertainty; what could not be pinned down within the time budget is
// said, not guessed. Policy writes the result as a policy in rlverify's own
// YAML format, each number commented.
//
// discover imports attacks, history, headers and policy; never checks,
// reports, envs or the root package.
package discover

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// Defaults of Options.
const (
	// DefaultBudget bounds a discovery when Options.Budget is 0.
	DefaultBudget = 2 * time.Minute
	// MinBudget is the least budget that can measure anything.
	MinBudget = 5 * time.Second
	// maxProbeBurst is the largest capacity probe (requests on one key).
	maxProbeBurst = 50_000
	// maxRate bounds the probes' request rate (per second).
	maxRate = 4000
)

// Options configure a discovery.
type Options struct {
	// Targets are the base URLs of the service's instances (one or more).
	Targets []string
	// Request is the shape of the probes (method, path, headers, body).
	Request attacks.Request
	// Identity is where the key goes (default: header X-API-Key).
	Identity policy.Identity
	// Admitted and Rejected, when set, say which statuses mean admitted
	// and refused instead of discovering them.
	Admitted, Rejected policy.StatusSet
	// Keys are real keys by tier; nil generates a fresh key per probe.
	// With keys, each tier is measured with its own keys, reused only
	// after the measured refill time.
	Keys *attacks.KeyFile
	// Budget bounds the whole discovery (DefaultBudget when 0): probes
	// adapt to it (bigger bursts, fewer waits) and say what it left open.
	Budget time.Duration
	// Timeout bounds one request (attacks.DefaultTimeout when 0).
	Timeout time.Duration
	// Log receives progress lines (may be nil).
	Log func(format string, args ...any)
}

// Number is a measured quantity: Value, within [Low, High], and how it was
// measured. Pinned is false when the budget or the behaviour left it open
// (then Value is the best bound known and Evidence says which way).
type Number struct {
	Value, Low, High float64
	Pinned           bool
	Evidence         string
}

// Tier is what was measured of one tier's limit.
type Tier struct {
	Name      string
	KeyPrefix string
	// Family is the algorithm family ("" when it could not be told).
	Family         policy.Algorithm
	FamilyEvidence string
	// Capacity is K (buckets) or N (windows).
	Capacity Number
	// Rate is r per second (buckets; for windows N/W).
	Rate Number
	// Window is W in seconds (windows; for buckets K/r).
	Window Number
	// Anchor is epoch or first for windows ("" otherwise or unknown).
	Anchor         string
	AnchorEvidence string
	// RefusedCost is set when it was measured; Counts then says so.
	RefusedCost     *bool
	RefusedEvidence string
	// Scope is cluster or instance (measured with 2+ targets; "" else).
	Scope         string
	ScopeEvidence string
	Notes         []string
}

// Headers is what the service's rate-limit headers are and mean.
type Headers struct {
	// RateLimit is the IETF generation seen (none, structured, dictionary, split).
	RateLimit policy.RateLimitHeaders
	// XRateLimit: X-RateLimit-* seen; XReset is the reset's form.
	XRateLimit bool
	XReset     string
	// RetryAfter: every refusal carried Retry-After; RetryForm its form
	// (delay-seconds or http-date), RetryRounding how it rounds.
	RetryAfter    bool
	RetryForm     string
	RetryRounding string
	// AdmittedOnly: the rate-limit headers come on admitted responses
	// only, not on refusals.
	AdmittedOnly bool
	// Agree lists what the headers say that matches the behaviour;
	// Disagree what contradicts it (a finding of the service).
	Agree, Disagree []string
}

// Result is a discovery's outcome.
type Result struct {
	Targets []string
	// Admitted, Refused are the statuses seen meaning each; InvalidKey the
	// status of an unknown key (0: not probed).
	Admitted, Refused []int
	InvalidKey        int
	StatusEvidence    string
	Identity          policy.Identity
	// PathPrefix, when set, is a prefix every path under which shares the
	// key's quota (a spent key was refused on a sibling path too).
	PathPrefix   string
	PathEvidence string
	Tiers        []Tier
	Headers      Headers
	// Requests sent, Elapsed time, and the Estimate given at the start.
	Requests int
	Elapsed  time.Duration
	Estimate time.Duration
	Notes    []string
	// NotProbed says what discovery does not measure, so a policy written
	// from it is silent there only by saying so.
	NotProbed []string
	// Events are every probe's record (keys as the engine recorded them).
	Events []history.Event
}

// Estimate is how long a discovery takes at most under o, said before it
// starts: the budget, less for fast limits (about 8 s plus three times the
// longest refill or window).
func Estimate(o Options) (most time.Duration, typical string) {
	b := o.Budget
	if b == 0 {
		b = DefaultBudget
	}
	return b, "about 8s plus 3× the longest refill interval or window (a 5-per-2s bucket: 10–15s)"
}

// notProbed is what no probe measures: each needs what discovery cannot
// cause or see from a few keys.
var notProbed = []string{
	"the failure mode (fail-open or fail-closed, and its status): it needs the limiter's store to fail, which only a fault you cause shows; declare failure: yourself",
	"global guards (a limit over every key together): probes on a few keys at a time stay under one; declare global: if yours has one",
	"several limits on one key: only the one that refuses first was measured (a longer window behind it, say per hour beside per second, shows only once its own quota is spent); add the others to limits:",
}

// ErrNothingAdmitted is a service that refused the first request of a fresh
// key: the shape, the key or the statuses are wrong, and nothing can be
// measured.
var ErrNothingAdmitted = errors.New("discover: the first request of a fresh key was not admitted")

// prober runs probe steps through the attack engine.
type prober struct {
	o        Options
	probePol *policy.Policy
	runID    string
	deadline time.Time
	start    time.Time
	seq      int
	requests int
	events   []history.Event
	all      []obs
	// used[tier] counts keys of a keys file handed out; lastUse when each
	// was last used (reuse waits for the refill).
	used    map[string]int
	lastUse map[string]time.Time
	refill  time.Duration
	// retried: tiers measured a second time (once at most).
	retried map[string]bool
}

// obs is one probe's outcome on one clock (wall time with monotonic part).
type obs struct {
	key        string
	inst       int
	sent, recv time.Time
	status     int
	ev         history.Event
}

// Run discovers the policy of the service at o.Targets.
func Run(ctx context.Context, o Options) (*Result, error) {
	if len(o.Targets) == 0 {
		return nil, errors.New("discover: no target URL")
	}
	if o.Budget == 0 {
		o.Budget = DefaultBudget
	}
	if o.Budget < MinBudget {
		return nil, fmt.Errorf("discover: budget %s: want at least %s", o.Budget, MinBudget)
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	p := &prober{o: o, runID: "d" + hex.EncodeToString(b[:]), start: time.Now(), used: map[string]int{}, lastUse: map[string]time.Time{}, retried: map[string]bool{}}
	p.deadline = p.start.Add(o.Budget)
	tiers := []string{"all"}
	if o.Keys != nil {
		tiers = tiers[:0]
		for t := range o.Keys.ByTier {
			tiers = append(tiers, t)
		}
		sort.Strings(tiers)
	}
	var err error
	if p.probePol, err = probePolicy(tiers, o.Identity); err != nil {
		return nil, err
	}
	res := &Result{Targets: o.Targets, Identity: p.probePol.Identity}
	_, typical := Estimate(o)
	res.Estimate = o.Budget
	p.log("discover: probing %s for at most %s (%s)", strings.Join(o.Targets, " "), o.Budget, typical)
	share := o.Budget / time.Duration(len(tiers))
	for i, t := range tiers {
		tierDeadline := p.start.Add(share * time.Duration(i+1))
		tr, err := p.tier(ctx, t, tierDeadline, res)
		if err != nil {
			return nil, err
		}
		res.Tiers = append(res.Tiers, tr)
	}
	if len(res.Tiers) > 0 && res.Tiers[0].Capacity.Pinned {
		p.pathScope(ctx, res)
	}
	if o.Keys != nil {
		p.invalidKey(ctx, res)
		prefixes(res.Tiers, o.Keys)
	}
	res.Headers = readHeaders(p.all, res)
	res.NotProbed = notProbed
	res.Requests, res.Elapsed, res.Events = p.requests, time.Since(p.start), p.events
	if ctx.Err() != nil {
		return res, fmt.Errorf("discover: interrupted after %s: %w", res.Elapsed.Round(time.Millisecond), ctx.Err())
	}
	return res, nil
}

func (p *prober) log(format string, args ...any) {
	if p.o.Log != nil {
		p.o.Log(format, args...)
	}
}

// probePolicy is the policy the engine needs to shape and key the probes:
// the identity as given and one tier per tier measured. Its limits are
// never used to judge; they are tiny so the engine's refill wait for reused
// keys is a few milliseconds (discover waits itself, by what it measured).
func probePolicy(tiers []string, id policy.Identity) (*policy.Policy, error) {
	p := &policy.Policy{Name: "discover", Version: "v1", Identity: id}
	for _, t := range tiers {
		p.Tiers = append(p.Tiers, policy.Tier{Name: t, Limits: []policy.Limit{{Algorithm: policy.TokenBucket, Capacity: 1, Rate: 1000}}})
	}
	if len(tiers) == 1 {
		p.DefaultTier = tiers[0]
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("discover: request identity: %w", err)
	}
	return p, nil
}

// key returns a logical key for a new probe of tier (a fresh key when keys
// are generated; the next key of the file, after its refill, otherwise) and
// the keys file the engine should map it with.
func (p *prober) key(ctx context.Context, tier string) (string, *attacks.KeyFile) {
	p.seq++
	logical := fmt.Sprintf("%s-p%d", tier, p.seq)
	if p.o.Keys == nil {
		return logical, nil
	}
	keys := p.o.Keys.ByTier[tier]
	n := p.used[tier]
	p.used[tier] = n + 1
	k := keys[n%len(keys)]
	if last, ok := p.lastUse[k]; ok && p.refill > 0 {
		if wait := time.Until(last.Add(p.refill)); wait > 0 {
			p.log("discover: waiting %s for key %d of tier %s to refill before reusing it", wait.Round(time.Millisecond), n%len(keys)+1, tier)
			sleep(ctx, wait)
		}
	}
	p.lastUse[k] = time.Now()
	return logical, oneKey(p.o.Keys.Source, tier, k)
}

// oneKey is a keys file holding only key k of tier, so the engine sends k
// for the probe's logical key.
func oneKey(source, tier, k string) *attacks.KeyFile {
	return &attacks.KeyFile{Source: source, ByTier: map[string][]string{tier: {k}}}
}

// step runs phases as one plan through the engine and returns every
// probe's outcome in send order.
func (p *prober) step(ctx context.Context, kf *attacks.KeyFile, phases ...attacks.Phase) ([]obs, error) {
	return p.stepAt(ctx, p.o.Targets, kf, phases...)
}

// stepAt is step against other URLs (a sibling path of the target's).
func (p *prober) stepAt(ctx context.Context, targets []string, kf *attacks.KeyFile, phases ...attacks.Phase) ([]obs, error) {
	plan := &attacks.Plan{Name: "discover", Phases: phases}
	if err := plan.Validate(); err != nil {
		return nil, fmt.Errorf("discover: probe plan: %w", err)
	}
	var mu sync.Mutex
	var evs []history.Event
	w := history.NewWriter(io.Discard)
	w.OnEvent(func(e history.Event) {
		mu.Lock()
		evs = append(evs, e)
		mu.Unlock()
	})
	eng, err := attacks.New(attacks.Options{
		Instances: targets, Policy: p.probePol, Writer: w, RunID: p.runID, Seed: int64(p.seq),
		Request: p.o.Request, Keys: kf, Timeout: p.o.Timeout, MaxRequests: maxProbeBurst + 10_000,
		MaxDuration: time.Until(p.deadline) + 5*time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("discover: %w", err)
	}
	sum, err := eng.Run(ctx, plan, history.Run{Env: "external", Plan: "discover"})
	_ = w.Close()
	if err != nil {
		return nil, fmt.Errorf("discover: %w", err)
	}
	sort.Slice(evs, func(i, j int) bool { return evs[i].Sent < evs[j].Sent })
	out := make([]obs, 0, len(evs))
	for _, e := range evs {
		if e.Status == 0 && e.Err != "" && strings.Contains(e.Err, "cancel") {
			continue
		}
		out = append(out, obs{key: e.Key, inst: e.Instance, status: e.Status, ev: e,
			sent: sum.Start.Add(time.Duration(e.Sent)), recv: sum.Start.Add(time.Duration(e.Recv))})
	}
	p.requests += len(out)
	p.events = append(p.events, evs...)
	p.all = append(p.all, out...)
	if len(out) > 0 && allFailed(out) {
		return nil, fmt.Errorf("discover: no probe got a response (%s): is the target up?", out[0].ev.Err)
	}
	return out, nil
}

func allFailed(os []obs) bool {
	for _, o := range os {
		if o.status != 0 {
			return false
		}
	}
	return true
}

// burst is a phase sending n requests on key at once (a burst up to 400,
// above that a rate phase as fast as the probes go).
func burst(key string, n int) []attacks.Phase {
	if n <= 400 {
		return []attacks.Phase{{Kind: attacks.KindBurst, Key: key, Requests: n}}
	}
	rate := float64(maxRate)
	return []attacks.Phase{{Kind: attacks.KindRate, Key: key, Requests: n, Concurrency: 64, Rate: policy.Rate(rate),
		Duration: policy.Duration(time.Duration(float64(n) / rate * float64(time.Second)))}}
}

func pinned(ph []attacks.Phase, inst int) []attacks.Phase {
	for i := range ph {
		ph[i].Instances, ph[i].Instance = "pinned", inst
	}
	return ph
}

func idle(d time.Duration) attacks.Phase {
	return attacks.Phase{Kind: attacks.KindIdle, Duration: policy.Duration(max(d, time.Millisecond))}
}

func trickle(key string, rate float64, d time.Duration) attacks.Phase {
	return attacks.Phase{Kind: attacks.KindRate, Key: key, Rate: policy.Rate(rate), Duration: policy.Duration(d), Concurrency: 16}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// classifier tells admitted from refused statuses.
type classifier struct{ admitted, refused policy.StatusSet }

func (c classifier) admitted_(s int) bool {
	if len(c.admitted) > 0 {
		return c.admitted.Has(s)
	}
	return s >= 200 && s < 300
}

func (c classifier) refused_(s int) bool {
	if len(c.refused) > 0 {
		return c.refused.Has(s)
	}
	return s == 429 || s == 503
}

func count(os []obs, f func(int) bool) int {
	n := 0
	for _, o := range os {
		if f(o.status) {
			n++
		}
	}
	return n
}

func (p *prober) left(deadline time.Time) time.Duration { return time.Until(deadline) }

func round(x float64) float64 { return math.Round(x*1000) / 1000 }

func fmtS(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}
