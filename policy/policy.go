// Package policy describes what a rate limiter promises: the algorithm and its
// parameters, the tiers and the keys they apply to, the response-header
// contract, the failure mode when the state store is down, and the declared
// tolerances. It also holds the envelope arithmetic the checkers use.
//
// policy is a leaf package: it imports no other rlverify package except
// internal helpers, and does no I/O beyond reading the file it is asked to load.
package policy

import (
	_ "embed"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/rlverify/rlverify/policy/yamlx"
)

// Algorithm names a family of rate-limiting algorithms.
type Algorithm string

// The algorithm families a policy can declare.
const (
	TokenBucket    Algorithm = "token-bucket"
	GCRA           Algorithm = "gcra"
	FixedWindow    Algorithm = "fixed-window"
	SlidingLog     Algorithm = "sliding-log"
	SlidingCounter Algorithm = "sliding-counter"
)

// Algorithms lists every family in a stable order.
var Algorithms = []Algorithm{TokenBucket, GCRA, FixedWindow, SlidingLog, SlidingCounter}

// Bucketed reports whether a is parametrised by capacity and refill rate
// (token bucket, GCRA) rather than by a count per window.
func (a Algorithm) Bucketed() bool { return a == TokenBucket || a == GCRA }

// Valid reports whether a is a known family.
func (a Algorithm) Valid() bool {
	for _, k := range Algorithms {
		if a == k {
			return true
		}
	}
	return false
}

// Limit is one limit on a key. Both views are always filled after loading:
// a bucket of Capacity K refilled at Rate r per second maps to Count N = K per
// Window W = K/r, and the other way round.
type Limit struct {
	// Name tells limits on the same key apart ("per-minute", "per-day").
	Name      string    `yaml:"name,omitempty" json:"name,omitempty"`
	Algorithm Algorithm `yaml:"algorithm" json:"algorithm"`
	// Capacity is the bucket size K (token bucket, GCRA burst).
	Capacity int64 `yaml:"capacity,omitempty" json:"capacity"`
	// Rate is the refill rate r in tokens per second.
	Rate Rate `yaml:"rate,omitempty" json:"rate"`
	// Count is the number of requests N allowed per Window.
	Count int64 `yaml:"limit,omitempty" json:"limit"`
	// Window is W.
	Window Duration `yaml:"window,omitempty" json:"window"`
	// ErrorBound is the declared relative over-admission of a sliding-window
	// counter in any rolling window (0.0 means the default, 1.0: up to 2N).
	ErrorBound float64 `yaml:"error_bound,omitempty" json:"error_bound,omitempty"`
	// Scope is cluster (default: one quota per key across every instance)
	// or instance (each instance enforces its own quota).
	Scope string `yaml:"scope,omitempty" json:"scope,omitempty"`
	// Anchor places fixed windows: epoch (default; window k is
	// [k·W, (k+1)·W) of Unix time) or first (a key's window opens at its
	// first request and closes W later; the next opens at its first request
	// after that, as many popular libraries do). A sliding counter anchored
	// at first has windows that start at a key's first request (HAProxy's
	// frequency counters): the checks then assume no alignment.
	Anchor string `yaml:"anchor,omitempty" json:"anchor,omitempty"`
	// Counts says which requests use up the limit: admitted (the default,
	// also when empty) or all, refused ones included (HAProxy's http_req_rate, counters
	// incremented before they are compared).
	Counts string `yaml:"counts,omitempty" json:"counts,omitempty"`
}

// What a limit counts.
const (
	CountsAdmitted = "admitted"
	CountsAll      = "all"
)

// CountsRejected reports a limit that refused requests use up as well.
func (l Limit) CountsRejected() bool { return l.Counts == CountsAll }

// Limit scopes.
const (
	ScopeCluster  = "cluster"
	ScopeInstance = "instance"
)

// Fixed-window anchors.
const (
	AnchorEpoch = "epoch"
	AnchorFirst = "first"
)

// PerInstance reports whether each instance enforces this limit on its own.
func (l Limit) PerInstance() bool { return l.Scope == ScopeInstance }

// NeverRefills reports a one-off quota (rate: 0, or a first-anchored
// window as long as MaxWindow): no run lasts until it refills, so any
// admission past its count is oversell and no plan waits for a refill.
func (l Limit) NeverRefills() bool {
	return l.Algorithm == FixedWindow && l.Anchor == AnchorFirst && l.W() >= MaxWindow
}

// AnchoredAtFirst reports a fixed window that opens at a key's first request.
func (l Limit) AnchoredAtFirst() bool { return l.Algorithm == FixedWindow && l.Anchor == AnchorFirst }

// Tier is a class of keys with their own limits.
type Tier struct {
	Name string `yaml:"name" json:"name"`
	// KeyPrefix selects the keys of this tier; the longest matching prefix wins.
	KeyPrefix string  `yaml:"key_prefix" json:"key_prefix"`
	Limits    []Limit `yaml:"limits" json:"limits"`
	// Delay, when set, makes this tier's limiter hold requests instead of
	// refusing them (over the policy's Delay; see Delay).
	Delay *Delay `yaml:"delay,omitempty" json:"delay,omitempty"`
}

// Exempt is a class of keys the limiter never limits (internal callers,
// an unlimited plan): every request of such a key is admitted, however many
// arrive. A refusal is an under-admission finding.
type Exempt struct {
	Name string `yaml:"name" json:"name"`
	// KeyPrefix selects the keys: the longest matching prefix among the
	// tiers' and the exempt classes' wins (so "int-" here and "" for a
	// tier exempts int-… keys only).
	KeyPrefix string `yaml:"key_prefix" json:"key_prefix"`
}

// Headers is the response contract the limiter declares.
type Headers struct {
	// RetryAfter: every 429 carries Retry-After.
	RetryAfter bool `yaml:"retry_after" json:"retry_after"`
	// RateLimit is the generation of IETF RateLimit headers sent (none,
	// structured, dictionary or split; see RateLimitHeaders).
	RateLimit RateLimitHeaders `yaml:"ratelimit" json:"ratelimit"`
	// XRateLimit: X-RateLimit-Limit, -Remaining and -Reset.
	XRateLimit bool `yaml:"x_ratelimit" json:"x_ratelimit"`
	// XReset is the form of X-RateLimit-Reset: "relative" seconds, "epoch"
	// seconds or an HTTP "date".
	XReset string `yaml:"x_ratelimit_reset" json:"x_ratelimit_reset"`
	// On says which responses carry the rate-limit headers: all (the
	// default: admitted and refused) or admitted (many gateways add them
	// only to responses they let through; a refusal without them is then
	// no header failure, while an admission without them still is).
	On string `yaml:"on,omitempty" json:"on,omitempty"`
}

// Which responses carry the rate-limit headers (Headers.On).
const (
	HeadersOnAll      = "all"
	HeadersOnAdmitted = "admitted"
)

// Failure modes when the state store is unavailable.
const (
	FailOpen   = "open"
	FailClosed = "closed"
	FailLocal  = "local"
	FailQueue  = "queue"
)

// DefaultStoreTimeout bounds a store call when a policy does not say: loose
// enough that the built-in environments, where the load generator, the
// service and Redis share a busy machine, decide by the store and not by
// the failure mode.
const DefaultStoreTimeout = 200 * time.Millisecond

// Failure is the declared behaviour when the store is down or slow.
type Failure struct {
	// Mode is open (admit), closed (reject with 503), local (per-instance
	// in-memory limit at LocalShare of the quota) or queue (hold up to
	// QueueWait, at most QueueSize waiting, then reject).
	Mode string `yaml:"mode,omitempty" json:"mode"`
	// StoreTimeout bounds every store call.
	StoreTimeout Duration `yaml:"store_timeout" json:"store_timeout"`
	// LocalShare is the fraction of each limit an instance enforces alone in
	// local mode.
	LocalShare float64  `yaml:"local_share,omitempty" json:"local_share,omitempty"`
	QueueSize  int      `yaml:"queue_size,omitempty" json:"queue_size,omitempty"`
	QueueWait  Duration `yaml:"queue_wait,omitempty" json:"queue_wait,omitempty"`
	// BreakerFailures consecutive store errors open the circuit for
	// BreakerCooldown.
	BreakerFailures int      `yaml:"breaker_failures,omitempty" json:"breaker_failures,omitempty"`
	BreakerCooldown Duration `yaml:"breaker_cooldown,omitempty" json:"breaker_cooldown,omitempty"`
	// Recovery is how long after the store is back the limiter may still
	// decide by its failure mode (breaker cooldown, reconnection); from then
	// on the envelope must hold again. Default 1s.
	Recovery Duration `yaml:"recovery,omitempty" json:"recovery,omitempty"`
	// Undeclared is set when the policy names no failure mode: Mode is
	// then open for the services that need one, but no check judges a
	// fault's behaviour against it and reports say "not declared".
	Undeclared bool `yaml:"-" json:"undeclared,omitempty"`
}

// MarshalYAML writes f with no mode when none was declared, so the policy
// read back declares none either.
func (f Failure) MarshalYAML() (any, error) {
	type plain Failure // without the method
	if f.Undeclared {
		f.Mode = ""
	}
	return plain(f), nil
}

// Policy is the whole declared promise of a limiter. The zero value is not
// useful; build one with Load, Parse or Default.
type Policy struct {
	Name string `yaml:"name" json:"name"`
	// Version is part of every limit key, so a policy change starts fresh.
	Version string `yaml:"version" json:"version"`
	// Action is the API action limited (part of the key); default "api".
	Action string `yaml:"action" json:"action"`
	Tiers  []Tier `yaml:"tiers" json:"tiers"`
	// Exempt are the key classes the limiter must never refuse.
	Exempt []Exempt `yaml:"exempt,omitempty" json:"exempt,omitempty"`
	// DefaultTier applies to keys that match no prefix; empty rejects them.
	DefaultTier string   `yaml:"default_tier" json:"default_tier"`
	Headers     Headers  `yaml:"headers" json:"headers"`
	Failure     Failure  `yaml:"failure" json:"failure"`
	Identity    Identity `yaml:"identity" json:"identity"`
	// Cost, when set, declares weighted requests: each names the tokens
	// it asks for (see Cost); nil: every request costs one.
	Cost *Cost `yaml:"cost,omitempty" json:"cost,omitempty"`
	// RefundOn are the statuses of answers after which the service gives
	// the request's tokens back (a downstream error: 502, 503): such a
	// request holds its tokens only while it is decided, never after.
	RefundOn StatusSet `yaml:"refund_on,omitempty" json:"refund_on,omitempty"`
	// Service, for a limiter behind Envoy's external rate-limit protocol
	// (a grpc:// target), is the domain and descriptor each request asks
	// about; nil for an HTTP service.
	Service *RateLimitService `yaml:"ratelimit_service,omitempty" json:"ratelimit_service,omitempty"`
	// Statuses says which responses mean admitted and rejected.
	Statuses Statuses `yaml:"statuses,omitempty" json:"statuses"`
	// Global is an optional aggregate cap across all keys (protects downstream).
	Global *Limit `yaml:"global,omitempty" json:"global,omitempty"`
	// Delay, when set, makes every tier's limiter hold a request for which
	// no token is free, up to a bound, instead of refusing it (see Delay;
	// a tier's own Delay overrides it).
	Delay *Delay `yaml:"delay,omitempty" json:"delay,omitempty"`
	// RulesFallback names the tier whose limits every key gets while the
	// rule source cannot be read (the conservative defaults from code);
	// default: the tier with the smallest capacity.
	RulesFallback string `yaml:"rules_fallback,omitempty" json:"rules_fallback,omitempty"`
	// Tolerance is what the checks allow beyond the exact arithmetic: the
	// relative overrun across regions and the timing slack of refusals.
	// A plain number is the regions' overrun (tolerance: 0.05).
	Tolerance Tolerance `yaml:"tolerance" json:"tolerance"`
	// Changes are limits the policy says may take the place of a tier's
	// own during a run (an operator lowering or raising a limit; a plan's
	// limit-change fault applies one by name). A change keeps every key's
	// counters and applies the new limits from the instant it takes effect,
	// within Tolerance.Propagation of being made.
	Changes []Change `yaml:"changes,omitempty" json:"changes,omitempty"`
	// ChecksOff turns checks off by name, for promises the limiter
	// knowingly does not keep (e.g. retry-after for one that sends no
	// Retry-After); the report says so.
	ChecksOff []string `yaml:"checks_off,omitempty" json:"checks_off,omitempty"`
	// ClockQuantum is the resolution of the limiter's clock; it widens every
	// decision interval in the checks.
	ClockQuantum Duration `yaml:"clock_quantum" json:"clock_quantum"`

	// Source is the file the policy came from ("builtin:NAME" for shipped ones).
	Source string `yaml:"-" json:"source"`
}

//go:embed default.yaml
var defaultYAML []byte

// DefaultYAML returns the text of the built-in default policy.
func DefaultYAML() []byte { return append([]byte(nil), defaultYAML...) }

// Default returns the built-in policy, what the reference limiter enforces when none is declared: free keys (prefix
// "free-") get a bucket of 10 refilled at 5/s, paid keys ("paid-") 100 at 50/s.
func Default() *Policy {
	p, err := Parse("builtin:default", defaultYAML)
	if err != nil {
		panic(fmt.Sprintf("policy: built-in default is invalid: %v", err))
	}
	return p
}

// Load reads and validates the policy in file (at most yamlx.MaxBytes).
func Load(file string) (*Policy, error) {
	data, err := yamlx.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return Parse(file, data)
}

// Parse decodes and validates a policy; file names it in errors.
func Parse(file string, data []byte) (*Policy, error) {
	var p Policy
	doc, err := yamlx.Decode(file, data, &p)
	if err != nil {
		return nil, err
	}
	p.Source = file
	if err := p.normalize(doc); err != nil {
		return nil, err
	}
	return &p, nil
}

// Validate checks a policy built in code and fills in the derived fields.
func (p *Policy) Validate() error { return p.normalize(nil) }

func (p *Policy) normalize(doc *yamlx.Doc) error {
	errf := func(path, format string, args ...any) error {
		if doc != nil {
			return doc.Errorf(path, format, args...)
		}
		name := p.Name
		if CheckName(name) != nil {
			name = fmt.Sprintf("%q", name)
		}
		return fmt.Errorf("policy %s: %s: %s", name, path, fmt.Sprintf(format, args...))
	}
	if p.Name == "" {
		p.Name = "policy"
	}
	if err := CheckName(p.Name); err != nil {
		return errf("name", "policy name %v", err)
	}
	if p.Version == "" {
		p.Version = "v1"
	}
	if p.Action == "" {
		p.Action = "api"
	}
	if strings.ContainsAny(p.Version+p.Action, "{}: \t") {
		return errf("version", "version and action must not contain braces, colons or spaces")
	}
	if len(p.Tiers) == 0 {
		return errf("tiers", "at least one tier is required")
	}
	names := map[string]bool{}
	for i := range p.Tiers {
		t := &p.Tiers[i]
		path := fmt.Sprintf("tiers.%d", i)
		if t.Name == "" {
			return errf(path+".name", "a tier needs a name")
		}
		if err := CheckName(t.Name); err != nil {
			return errf(path+".name", "tier name %v", err)
		}
		if err := CheckKeyPrefix(t.KeyPrefix); err != nil {
			return errf(path+".key_prefix", "%v", err)
		}
		if names[t.Name] {
			return errf(path+".name", "tier %q is declared twice", t.Name)
		}
		names[t.Name] = true
		if len(t.Limits) == 0 {
			return errf(path+".limits", "tier %q needs at least one limit", t.Name)
		}
		if len(t.Limits) > 8 {
			return errf(path+".limits", "tier %q has %d limits; at most 8", t.Name, len(t.Limits))
		}
		for j := range t.Limits {
			if err := t.Limits[j].normalize(fmt.Sprintf("%s.limits.%d", path, j), errf, doc); err != nil {
				return err
			}
		}
	}
	if err := p.normalizeChanges(errf, doc); err != nil {
		return err
	}
	prefixes := map[string]string{}
	for _, t := range p.Tiers {
		prefixes[t.KeyPrefix] = t.Name
	}
	for i := range p.Exempt {
		e := &p.Exempt[i]
		path := fmt.Sprintf("exempt.%d", i)
		if err := CheckName(e.Name); err != nil {
			return errf(path+".name", "exempt class name %v", err)
		}
		if names[e.Name] {
			return errf(path+".name", "%q is already the name of a tier or exempt class", e.Name)
		}
		names[e.Name] = true
		if e.KeyPrefix == "" {
			return errf(path+".key_prefix", "an exempt class needs a key_prefix (an empty one would exempt every key)")
		}
		if err := CheckKeyPrefix(e.KeyPrefix); err != nil {
			return errf(path+".key_prefix", "%v", err)
		}
		if other, dup := prefixes[e.KeyPrefix]; dup {
			return errf(path+".key_prefix", "%q is also the key_prefix of %s: a key would be both limited and exempt", e.KeyPrefix, other)
		}
		prefixes[e.KeyPrefix] = e.Name
	}
	if p.DefaultTier != "" && p.exemptNamed(p.DefaultTier) != nil {
		return errf("default_tier", "%q is an exempt class: keys that match no prefix must get a tier with limits", p.DefaultTier)
	}
	if p.DefaultTier != "" && !names[p.DefaultTier] {
		return errf("default_tier", "default tier %q is not one of the tiers", p.DefaultTier)
	}
	if p.RulesFallback == "" {
		best := 0
		for i, t := range p.Tiers {
			if t.Limits[0].Capacity < p.Tiers[best].Limits[0].Capacity {
				best = i
			}
		}
		p.RulesFallback = p.Tiers[best].Name
	} else if !names[p.RulesFallback] {
		return errf("rules_fallback", "tier %q is not one of the tiers", p.RulesFallback)
	}
	if p.Global != nil {
		if err := p.Global.normalize("global", errf, doc); err != nil {
			return err
		}
	}
	if err := p.normalizeDelays(errf); err != nil {
		return err
	}
	if p.Headers.XReset == "" {
		p.Headers.XReset = "relative"
	}
	switch p.Headers.XReset {
	case "relative", "epoch", "date":
	default:
		return errf("headers.x_ratelimit_reset", "%q: want relative, epoch or date", p.Headers.XReset)
	}
	switch p.Headers.On {
	case "", HeadersOnAll, HeadersOnAdmitted:
	default:
		return errf("headers.on", "%q: want all (admitted and refused responses carry the headers) or admitted (admitted ones only)", p.Headers.On)
	}
	f := &p.Failure
	if f.Mode == "" {
		f.Mode, f.Undeclared = FailOpen, true
	}
	switch f.Mode {
	case FailOpen, FailClosed, FailQueue:
	case FailLocal:
		if f.LocalShare == 0 {
			f.LocalShare = 1
		}
	default:
		return errf("failure.mode", "%q: want open, closed, local or queue", f.Mode)
	}
	if f.LocalShare < 0 || f.LocalShare > 1 {
		return errf("failure.local_share", "%g: want a fraction in (0, 1]", f.LocalShare)
	}
	if f.StoreTimeout == 0 {
		f.StoreTimeout = Duration(DefaultStoreTimeout)
	}
	if f.StoreTimeout < 0 || f.StoreTimeout.D() > time.Minute {
		return errf("failure.store_timeout", "%s: want a duration in (0, 1m]", f.StoreTimeout)
	}
	if f.Mode == FailQueue {
		if f.QueueSize <= 0 {
			f.QueueSize = 100
		}
		if f.QueueWait <= 0 {
			f.QueueWait = Duration(time.Second)
		}
	}
	if f.QueueSize < 0 || f.QueueSize > 1_000_000 {
		return errf("failure.queue_size", "%d: want 0 … 1000000", f.QueueSize)
	}
	if f.BreakerFailures == 0 {
		f.BreakerFailures = 5
	}
	if f.BreakerFailures < 0 {
		return errf("failure.breaker_failures", "%d: must be positive", f.BreakerFailures)
	}
	if f.BreakerCooldown == 0 {
		f.BreakerCooldown = Duration(500 * time.Millisecond)
	}
	if f.BreakerCooldown < 0 || f.BreakerCooldown.D() > time.Minute {
		return errf("failure.breaker_cooldown", "%s: want a duration in (0, 1m]", f.BreakerCooldown)
	}
	if f.Recovery == 0 {
		f.Recovery = Duration(time.Second)
	}
	if f.Recovery < 0 || f.Recovery.D() > 10*time.Minute {
		return errf("failure.recovery", "%s: want a duration in (0, 10m]", f.Recovery)
	}
	if err := p.Identity.normalize(errf); err != nil {
		return err
	}
	if p.Cost != nil {
		if err := p.Cost.normalize(errf); err != nil {
			return err
		}
	}
	if p.Service != nil {
		if err := p.Service.normalize(errf); err != nil {
			return err
		}
	}
	if err := p.Statuses.normalize(errf); err != nil {
		return err
	}
	if p.RefundOn.Overlaps(p.Statuses.Admitted) || p.RefundOn.Overlaps(p.Statuses.Rejected) {
		return errf("refund_on", "%s: a refunded answer is neither an admission (%s) nor a refusal (%s)", p.RefundOn, p.Statuses.Admitted, p.Statuses.Rejected)
	}
	if p.Tolerance.Regions < 0 || p.Tolerance.Regions > 10 || math.IsNaN(p.Tolerance.Regions) {
		return errf("tolerance.regions", "%g: want a fraction ≥ 0 (0.05 = 5%%)", p.Tolerance.Regions)
	}
	if p.Tolerance.Timing < 0 || p.Tolerance.Timing.D() > time.Minute {
		return errf("tolerance.timing", "%s: want a duration in [0, 1m]", p.Tolerance.Timing)
	}
	if p.ClockQuantum < 0 {
		return errf("clock_quantum", "must not be negative")
	}
	return nil
}

// Bounds on limit parameters: outside them the arithmetic stops being
// meaningful (float precision) or a run could never finish.
const (
	MaxCount  = 1_000_000_000
	MinWindow = time.Millisecond
	MaxWindow = 400 * 24 * time.Hour
)

func (l *Limit) normalize(path string, errf func(string, string, ...any) error, doc *yamlx.Doc) error {
	if l.Algorithm == "" {
		l.Algorithm = TokenBucket
	}
	if !l.Algorithm.Valid() {
		return errf(path+".algorithm", "unknown algorithm %q (want one of %s)", l.Algorithm, joinAlgorithms())
	}
	hasBucket := l.Capacity != 0 || l.Rate != 0
	hasWindow := l.Count != 0 || l.Window != 0
	normalized := false
	if hasBucket && hasWindow && l.Count == l.Capacity && l.Rate > 0 &&
		math.Abs(l.Window.D().Seconds()-float64(l.Capacity)/float64(l.Rate)) < 1e-6 {
		// An already normalized limit (both views agree): check the bucket
		// view and keep both as they are. Deriving the window again from
		// K/r would move a declared window by a nanosecond of float
		// rounding (limit 100 per 11s: 100/(100/11) s = 10.999999999s).
		hasWindow = false
		normalized = true
	}
	if hasBucket && !hasWindow && l.Rate == 0 && l.Capacity > 0 && (doc == nil || doc.Has(path+".rate")) {
		// rate: 0, a one-off quota (a trial of K requests): every check,
		// plan and reference limiter works from r (or W = K/r), so a bucket
		// that never refills is judged as the window that outlasts any run,
		// K per MaxWindow opened by the key's first request (NeverRefills).
		// A capacity whose rate is left out is still an error: a forgotten
		// rate must not become a quota that never refills.
		l.Algorithm, l.Count, l.Window, l.Anchor = FixedWindow, l.Capacity, Duration(MaxWindow), AnchorFirst
		l.Capacity = 0
		hasBucket, hasWindow = false, true
	}
	switch {
	case hasBucket && hasWindow:
		return errf(path, "give capacity and rate, or limit and window, not both")
	case hasBucket:
		if l.Capacity <= 0 || l.Capacity > MaxCount {
			return errf(path+".capacity", "%d: want 1 … %d", l.Capacity, MaxCount)
		}
		if l.Rate == 0 {
			return errf(path+".rate", "missing: a bucket needs its refill rate (rate: 0 declares a one-off quota that never refills)")
		}
		if !(l.Rate > 0) || float64(l.Rate) > MaxCount {
			return errf(path+".rate", "%g/s: want a positive rate up to %d/s", float64(l.Rate), MaxCount)
		}
		if !normalized {
			l.Count = l.Capacity
			l.Window = Duration(time.Duration(float64(l.Capacity) / float64(l.Rate) * float64(time.Second)))
		}
	case hasWindow:
		if l.Count <= 0 || l.Count > MaxCount {
			return errf(path+".limit", "%d: want 1 … %d", l.Count, MaxCount)
		}
		if l.Window.D() < MinWindow || l.Window.D() > MaxWindow {
			return errf(path+".window", "%s: want %s … %s", l.Window, MinWindow, MaxWindow)
		}
		l.Capacity = l.Count
		l.Rate = Rate(float64(l.Count) / l.Window.D().Seconds())
	default:
		return errf(path, "a limit needs capacity and rate (e.g. capacity: 10, rate: 5/s) or limit and window (e.g. limit: 100, window: 1m)")
	}
	if l.Window.D() < MinWindow || l.Window.D() > MaxWindow {
		return errf(path, "window %s derived from capacity/rate is outside %s … %s", l.Window, MinWindow, MaxWindow)
	}
	if l.ErrorBound < 0 || l.ErrorBound > 1 {
		return errf(path+".error_bound", "%g: want a fraction in [0, 1]", l.ErrorBound)
	}
	if l.Algorithm == SlidingCounter && l.ErrorBound == 0 {
		// n ≈ n_prev·r + n_cur with integer counts can admit up to N plus the
		// share of the previous window it underweights; 1.0 (2N in a rolling
		// window) is the mathematical worst case, declare less if measured.
		l.ErrorBound = 1
	}
	if l.Scope == "" {
		l.Scope = ScopeCluster
	}
	if l.Scope != ScopeCluster && l.Scope != ScopeInstance {
		return errf(path+".scope", "%q: want cluster (one quota across instances) or instance (each instance its own)", l.Scope)
	}
	switch {
	case l.Anchor == "" && (l.Algorithm == FixedWindow || l.Algorithm == SlidingCounter):
		l.Anchor = AnchorEpoch
	case l.Anchor == "":
	case l.Algorithm != FixedWindow && l.Algorithm != SlidingCounter:
		return errf(path+".anchor", "only window algorithms (fixed-window, sliding-counter) have an anchor")
	case l.Anchor != AnchorEpoch && l.Anchor != AnchorFirst:
		return errf(path+".anchor", "%q: want epoch (windows aligned to Unix time) or first (a key's window opens at its first request)", l.Anchor)
	}
	if l.Counts != "" && l.Counts != CountsAdmitted && l.Counts != CountsAll {
		return errf(path+".counts", "%q: want admitted (refused requests use up nothing) or all (every request counts)", l.Counts)
	}
	if l.Name == "" {
		l.Name = l.defaultName()
	} else if err := CheckLimitName(l.Name); err != nil {
		return errf(path+".name", "%v", err)
	}
	return nil
}

func (l Limit) defaultName() string {
	if l.NeverRefills() {
		return fmt.Sprintf("%d-once", l.Count)
	}
	if l.Algorithm.Bucketed() {
		return fmt.Sprintf("%d@%s", l.Capacity, FormatRate(float64(l.Rate)))
	}
	return fmt.Sprintf("%d/%s", l.Count, l.Window)
}

func joinAlgorithms() string {
	s := make([]string, len(Algorithms))
	for i, a := range Algorithms {
		s[i] = string(a)
	}
	return strings.Join(s, ", ")
}

// K returns the capacity as a float.
func (l Limit) K() float64 { return float64(l.Capacity) }

// R returns the refill rate per second.
func (l Limit) R() float64 { return float64(l.Rate) }

// W returns the window.
func (l Limit) W() time.Duration { return l.Window.D() }

// Envelope returns the most requests a limit of this family may admit for one
// key in any interval of length d, starting from a full bucket / empty window:
// K + r·d for buckets; for windows the count of windows the interval can touch
// times N (sliding log: ⌈d/W⌉·N rolling; fixed window: aligned windows
// touched). Checks use it for figures; exact decisions are in checks.
func (l Limit) Envelope(d time.Duration) float64 {
	if d < 0 {
		d = 0
	}
	switch l.Algorithm {
	case TokenBucket, GCRA:
		return l.K() + l.R()*d.Seconds()
	case FixedWindow:
		return float64(l.Count) * (math.Floor(float64(d)/float64(l.W())) + 2)
	default:
		return float64(l.Count) * math.Max(1, math.Ceil(float64(d)/float64(l.W())))
	}
}

// Describe formats the limit for people: "token-bucket K=10 r=5/s (N=10/W=2s)".
func (l Limit) Describe() string {
	if l.NeverRefills() {
		return fmt.Sprintf("one-off quota N=%d, never refilled (judged as %s N=%d W=%s from a key's first request)", l.Count, l.Algorithm, l.Count, l.Window)
	}
	if l.Algorithm.Bucketed() {
		return fmt.Sprintf("%s K=%d r=%s (≡ %d per %s)", l.Algorithm, l.Capacity, FormatRate(l.R()), l.Count, l.Window)
	}
	return fmt.Sprintf("%s N=%d W=%s (≡ K=%d r=%s)", l.Algorithm, l.Count, l.Window, l.Capacity, FormatRate(l.R()))
}

// TierFor returns the tier of key: the longest matching KeyPrefix, else the
// default tier. ok is false when no tier applies, and for an exempt key
// (ExemptFor).
func (p *Policy) TierFor(key string) (t *Tier, ok bool) {
	best := -1
	for i := range p.Tiers {
		pre := p.Tiers[i].KeyPrefix
		if strings.HasPrefix(key, pre) && (best < 0 || len(pre) > len(p.Tiers[best].KeyPrefix)) {
			best = i
		}
	}
	if e := p.exemptPrefix(key); e != nil && (best < 0 || len(e.KeyPrefix) > len(p.Tiers[best].KeyPrefix)) {
		return nil, false
	}
	if best >= 0 {
		return &p.Tiers[best], true
	}
	return p.Tier(p.DefaultTier)
}

// ExemptFor returns the exempt class of key: one whose KeyPrefix key
// carries, longer than any matching tier's.
func (p *Policy) ExemptFor(key string) (*Exempt, bool) {
	e := p.exemptPrefix(key)
	if e == nil {
		return nil, false
	}
	for i := range p.Tiers {
		if pre := p.Tiers[i].KeyPrefix; strings.HasPrefix(key, pre) && len(pre) > len(e.KeyPrefix) {
			return nil, false
		}
	}
	return e, true
}

// exemptPrefix is the exempt class with the longest KeyPrefix key carries.
func (p *Policy) exemptPrefix(key string) *Exempt {
	var best *Exempt
	for i := range p.Exempt {
		e := &p.Exempt[i]
		if strings.HasPrefix(key, e.KeyPrefix) && (best == nil || len(e.KeyPrefix) > len(best.KeyPrefix)) {
			best = e
		}
	}
	return best
}

// ExemptNamed returns the exempt class called name.
func (p *Policy) ExemptNamed(name string) (*Exempt, bool) {
	e := p.exemptNamed(name)
	return e, e != nil
}

func (p *Policy) exemptNamed(name string) *Exempt {
	for i := range p.Exempt {
		if p.Exempt[i].Name == name {
			return &p.Exempt[i]
		}
	}
	return nil
}

// Tier returns the tier called name.
func (p *Policy) Tier(name string) (*Tier, bool) {
	for i := range p.Tiers {
		if p.Tiers[i].Name == name {
			return &p.Tiers[i], true
		}
	}
	return nil, false
}

// LimitKey is the store key for key under limit i of its tier: tenant +
// action + policy version, with the tenant in a hash tag so every limit of one
// key lives in one Redis Cluster slot.
func (p *Policy) LimitKey(tier *Tier, key string, i int) string {
	return fmt.Sprintf("rl:{%s:%s}:%s:%s:%d", tier.Name, key, p.Action, p.Version, i)
}

// Clone returns a deep copy of p.
func (p *Policy) Clone() *Policy {
	c := *p
	c.Tiers = make([]Tier, len(p.Tiers))
	for i, t := range p.Tiers {
		t.Limits = append([]Limit(nil), t.Limits...)
		c.Tiers[i] = t
	}
	if p.Global != nil {
		g := *p.Global
		c.Global = &g
	}
	c.Exempt = append([]Exempt(nil), p.Exempt...)
	if p.Cost != nil {
		cost := *p.Cost
		if p.Cost.Min != nil {
			m := *p.Cost.Min
			cost.Min = &m
		}
		c.Cost = &cost
	}
	c.cloneDelays()
	c.Identity.TrustedProxies = append([]string(nil), p.Identity.TrustedProxies...)
	c.Identity.PathVariants = append([]string(nil), p.Identity.PathVariants...)
	c.ChecksOff = append([]string(nil), p.ChecksOff...)
	c.Statuses.Admitted = append(StatusSet(nil), p.Statuses.Admitted...)
	c.Statuses.Rejected = append(StatusSet(nil), p.Statuses.Rejected...)
	c.Statuses.Closed = append(StatusSet(nil), p.Statuses.Closed...)
	c.RefundOn = append(StatusSet(nil), p.RefundOn...)
	return &c
}

// WithAlgorithm returns a copy of p in which every tier limit is of family a,
// keeping its (K, r) ≡ (N, W) parameters. A reference limiter declares the
// policy it was given in its own family this way.
func (p *Policy) WithAlgorithm(a Algorithm) *Policy {
	c := p.Clone()
	for i := range c.Tiers {
		for j := range c.Tiers[i].Limits {
			l := &c.Tiers[i].Limits[j]
			l.Algorithm = a
			if a == SlidingCounter && l.ErrorBound == 0 {
				l.ErrorBound = 1
			}
			switch {
			case a != FixedWindow && a != SlidingCounter:
				l.Anchor = ""
			case a == SlidingCounter || l.Anchor == "":
				l.Anchor = AnchorEpoch
			}
		}
	}
	return c
}

// TierNames returns the tier names sorted.
func (p *Policy) TierNames() []string {
	s := make([]string, len(p.Tiers))
	for i, t := range p.Tiers {
		s[i] = t.Name
	}
	sort.Strings(s)
	return s
}

// Conservative returns the rules a service applies while its rule source is
// unavailable: p with every tier held to the limits of the RulesFallback
// tier, under its own key version so fallback counts never mix with the
// real ones. The defaults live in code (here), not in the store that is down.
func (p *Policy) Conservative() *Policy {
	c := p.Clone()
	fb, ok := c.Tier(c.RulesFallback)
	if !ok {
		fb = &c.Tiers[0]
	}
	limits := append([]Limit(nil), fb.Limits...)
	for i := range c.Tiers {
		c.Tiers[i].Limits = append([]Limit(nil), limits...)
	}
	c.Version += "-fallback"
	return c
}

// Change is a limit change the policy declares: the limits that take the
// place of Tier's own while it is in force.
type Change struct {
	Name string `yaml:"name" json:"name"`
	// Tier is the tier whose limits change.
	Tier string `yaml:"tier" json:"tier"`
	// Limits replace the tier's, one for one, in its order, keeping each
	// limit's algorithm. A change moves every limit one way: a lowering
	// gives no larger count and no faster refill (what a key may take under
	// the tier's own limits then bounds it under the change too); a raise
	// gives no smaller count, no slower refill and, for a window, the same
	// window (the changed limits then bound a key across the change, and
	// the tier's own until it takes effect). A change that raises one part
	// and lowers another is refused: neither set of limits bounds the other.
	Limits []Limit `yaml:"limits" json:"limits"`
}

// ChangeRaises reports whether c raises its tier's limits (some part of
// some limit grows; normalize refused a change that also lowers one).
func (p *Policy) ChangeRaises(c *Change) bool {
	for i := range p.Tiers {
		t := &p.Tiers[i]
		if t.Name != c.Tier || len(t.Limits) != len(c.Limits) {
			continue
		}
		for j, was := range t.Limits {
			if now := c.Limits[j]; raises(was, now) {
				return true
			}
		}
	}
	return false
}

// raises: now grants more than was in count or refill.
func raises(was, now Limit) bool {
	return now.Count > was.Count || now.Capacity > was.Capacity || now.R() > was.R()*(1+1e-9)
}

// lowers: now grants less than was in count or refill.
func lowers(was, now Limit) bool {
	return now.Count < was.Count || now.Capacity < was.Capacity || now.R() < was.R()*(1-1e-9)
}

// ChangeNamed is the declared change called name.
func (p *Policy) ChangeNamed(name string) (*Change, bool) {
	for i := range p.Changes {
		if p.Changes[i].Name == name {
			return &p.Changes[i], true
		}
	}
	return nil, false
}

// WithChange is p with change c's limits in place of its tier's (a copy;
// p is not modified).
func (p *Policy) WithChange(c *Change) *Policy {
	q := *p
	q.Tiers = append([]Tier(nil), p.Tiers...)
	for i := range q.Tiers {
		if q.Tiers[i].Name == c.Tier {
			q.Tiers[i].Limits = append([]Limit(nil), c.Limits...)
		}
	}
	q.Changes = nil
	return &q
}

// DefaultPropagation is how long a declared limit change may take to be in
// force everywhere when the policy says nothing (tolerance.propagation).
const DefaultPropagation = time.Second

// Propagation is the declared propagation tolerance of a limit change.
func (p *Policy) Propagation() time.Duration {
	if d := p.Tolerance.Propagation.D(); d > 0 {
		return d
	}
	return DefaultPropagation
}

func (p *Policy) normalizeChanges(errf func(string, string, ...any) error, doc *yamlx.Doc) error {
	names := map[string]bool{}
	for i := range p.Changes {
		c := &p.Changes[i]
		path := fmt.Sprintf("changes.%d", i)
		if err := CheckName(c.Name); err != nil {
			return errf(path+".name", "change name %v", err)
		}
		if names[c.Name] {
			return errf(path+".name", "change %q is declared twice", c.Name)
		}
		names[c.Name] = true
		var tier *Tier
		for j := range p.Tiers {
			if p.Tiers[j].Name == c.Tier {
				tier = &p.Tiers[j]
			}
		}
		if tier == nil {
			return errf(path+".tier", "change %q names tier %q, which the policy does not declare", c.Name, c.Tier)
		}
		if len(c.Limits) != len(tier.Limits) {
			return errf(path+".limits", "change %q gives %d limit(s) for tier %q's %d: one for each, in its order", c.Name, len(c.Limits), c.Tier, len(tier.Limits))
		}
		raise, lower := false, false
		for j := range c.Limits {
			lp := fmt.Sprintf("%s.limits.%d", path, j)
			if err := c.Limits[j].normalize(lp, errf, doc); err != nil {
				return err
			}
			was, now := tier.Limits[j], c.Limits[j]
			if now.Algorithm != was.Algorithm {
				return errf(lp+".algorithm", "change %q makes tier %q's %s a %s: a change keeps the algorithm", c.Name, c.Tier, was.Algorithm, now.Algorithm)
			}
			if raises(was, now) && lowers(was, now) {
				return errf(lp, "change %q makes tier %q's limit %s %s, raising one part and lowering another: a change either raises (no smaller count, no slower refill) or lowers (no larger count, no faster refill)", c.Name, c.Tier, was.Describe(), now.Describe())
			}
			if raises(was, now) {
				raise = true
				if now.Algorithm != TokenBucket && now.Algorithm != GCRA && now.W() != was.W() {
					return errf(lp+".window", "change %q raises tier %q's %s from %s to %s with another window: a raise of a window limit keeps its window", c.Name, c.Tier, was.Algorithm, was.Describe(), now.Describe())
				}
			}
			if lowers(was, now) {
				lower = true
			}
		}
		if raise && lower {
			return errf(path+".limits", "change %q raises one of tier %q's limits and lowers another: a change either raises or lowers (declare two changes)", c.Name, c.Tier)
		}
	}
	return nil
}
