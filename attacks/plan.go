// Package attacks turns attack plans (YAML) into requests against a target
// and streams every request into a history. It holds the plan language, its
// validation, the built-in plans, the scheduler (barrier-released bursts,
// window-edge aiming, idle refills, open-model rate phases through vegeta's
// attacker) and the engine.
//
// attacks imports targets, history, policy and thresholds; never checks or
// reports.
package attacks

import (
	"embed"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/rlverify/rlverify/faults"
	"github.com/rlverify/rlverify/internal/suggest"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/policy/yamlx"
	"github.com/rlverify/rlverify/thresholds"
)

// Plan is a named sequence of phases.
type Plan struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// Proves says what a pass of this plan shows.
	Proves string `yaml:"proves"`
	// Needs lists capabilities the plan requires: "redis" (shared store),
	// "faults" (a fault injector), "instances>=N".
	Needs []string `yaml:"needs,omitempty"`
	// Instances is how many service instances the plan wants by default.
	Instances int `yaml:"instances,omitempty"`
	// Regions, when ≥ 2, runs the embedded reference limiter in that many
	// regions (each with Instances instances and its own store) unless the
	// command line says otherwise.
	Regions int `yaml:"regions,omitempty"`
	// Limiter and Policy name what the plan is meant for (optional).
	Limiter string `yaml:"limiter,omitempty"`
	Policy  string `yaml:"policy,omitempty"`
	// Checks limits which checks judge the run (empty: all that apply).
	Checks []string `yaml:"checks,omitempty"`
	Seed   int64    `yaml:"seed,omitempty"`
	// Thresholds fail the run like a check when the history misses them
	// ("latency.p99<50ms", "phase.drain.errors<1%"; see thresholds.Syntax).
	Thresholds []string `yaml:"thresholds,omitempty"`
	// Request shapes every request of the plan (method, path, headers,
	// body); a phase's own request overrides it field by field.
	Request Request `yaml:"request,omitempty"`
	Phases  []Phase `yaml:"phases"`

	// Source is the file or "builtin:NAME".
	Source string `yaml:"-"`

	// bodyAnywhere lets "@FILE" bodies leave the plan's folder.
	bodyAnywhere bool
}

// A LoadOption changes how Load and Parse read a plan.
type LoadOption func(*Plan)

// BodyFilesAnywhere lets the plan's body: "@FILE" read any file the user
// can read, not only files inside the plan's folder (rlverify attack
// --body-files-anywhere). Only for plans you trust: a body is sent to the
// target.
func BodyFilesAnywhere() LoadOption { return func(p *Plan) { p.bodyAnywhere = true } }

// bodyFiles says where the plan's "@FILE" bodies may be read from.
func (p *Plan) bodyFiles() bodyFiles { return bodyFiles{dir: p.dir(), anywhere: p.bodyAnywhere} }

// Phase is one step. Which fields apply depends on Kind; Validate rejects
// fields that a kind does not use.
type Phase struct {
	Name string `yaml:"name,omitempty"`
	Kind string `yaml:"kind"`
	// Key is the logical API key (its prefix selects the tier). The engine
	// appends a per-run suffix so runs never share state.
	Key string `yaml:"key,omitempty"`
	// Requests is the number of requests of the phase (burst, boundary per
	// side, retry clients, spread, bypass per variant).
	Requests int `yaml:"requests,omitempty"`
	// Concurrency bounds requests in flight (rate, spread).
	Concurrency int `yaml:"concurrency,omitempty"`
	// Instances picks the instance of each request: round-robin (default),
	// random, or pinned (always Instance).
	Instances string `yaml:"instances,omitempty"`
	Instance  int    `yaml:"instance,omitempty"`
	// Duration of idle and rate phases.
	Duration policy.Duration `yaml:"duration,omitempty"`
	// Until "full" makes idle last until every bucket used is full again.
	Until string `yaml:"until,omitempty"`
	// Rate and RateTo (ramp) for rate phases.
	Rate   policy.Rate `yaml:"rate,omitempty"`
	RateTo policy.Rate `yaml:"rate_to,omitempty"`
	// Before and After place boundary bursts around the window edge.
	Before policy.Duration `yaml:"before,omitempty"`
	After  policy.Duration `yaml:"after,omitempty"`
	// Align is "epoch" (default), "headers" (discover the edge from the
	// target's reset headers) or "first" (one request opens the key's
	// window; the edge is W after it: windows anchored at a key's first
	// request).
	Align string `yaml:"align,omitempty"`
	// Tenants of a tenants phase.
	Tenants []Tenant `yaml:"tenants,omitempty"`
	// Retries bounds the retries per client of a retry phase; Jitter adds
	// up to this much random delay to each advised wait.
	Retries int             `yaml:"retries,omitempty"`
	Jitter  policy.Duration `yaml:"jitter,omitempty"`
	// At is when a probe fires: "retry-after" (exactly when the last
	// rejection of Key advised), "retry-after+D" (D after that: past the
	// timing tolerance, where a refusal is decisive) or a duration after
	// the phase starts.
	At string `yaml:"at,omitempty"`
	// Variants of a bypass phase: xff, case, space, path.
	Variants []string `yaml:"variants,omitempty"`
	// Fault steps: Action inject or clear, Fault kind, Param (latency or skew).
	Action string `yaml:"action,omitempty"`
	Fault  string `yaml:"fault,omitempty"`
	Param  string `yaml:"param,omitempty"`
	// Request shapes this phase's requests over the plan's request.
	Request *Request `yaml:"request,omitempty"`
	// RateX is the rate as a multiple of the key's tier rate (rate and
	// tenants phases; instead of rate), so one plan overloads any policy.
	RateX float64 `yaml:"rate_x,omitempty"`
	// Tokens and Margin of a calibrate phase: how many token due times to
	// probe (default 3), and how far before and after each (a fraction of
	// the due time, default 0.05).
	Tokens int     `yaml:"tokens,omitempty"`
	Margin float64 `yaml:"margin,omitempty"`
	// Tiers "all" makes a calibrate phase calibrate every tier the policy
	// declares, each with a key of its own, one phase each (NAME-TIER).
	Tiers string `yaml:"tiers,omitempty"`
	// Costs, for a policy that declares weighted requests (cost), give
	// each request's cost in turn, cycling: a whole number of tokens, K
	// (the smallest limit count of the key's tier), or K+n / K-n.
	Costs []string `yaml:"costs,omitempty"`
}

// Tenant is one key of a tenants phase with its share of the requests.
type Tenant struct {
	Key    string  `yaml:"key"`
	Weight float64 `yaml:"weight"`
	// Long pads the generated key to the policy's identity.max_length (128
	// when none is declared) with zeros after the run tag, so long keys that
	// differ only at their end are tried.
	Long bool `yaml:"long,omitempty"`
	// Length pads the generated key the same way to exactly this many
	// bytes (at most MaxTenantKeyLength), to probe past a store's key
	// limit when the policy declares no maximum (129, 256, 1024: a store
	// that cuts keys merges tenants only past its limit). A tenant longer
	// than a declared identity.max_length is not sent (the phase says so):
	// the bypass plan's "long" variant covers that case.
	Length int `yaml:"length,omitempty"`
}

// MaxTenantKeyLength bounds Tenant.Length (a request header of 4 KiB is
// within every common server's limit).
const MaxTenantKeyLength = 4096

// Phase kinds.
const (
	KindBurst    = "burst"
	KindBoundary = "boundary"
	KindIdle     = "idle"
	KindRate     = "rate"
	KindRetry    = "retry"
	KindTenants  = "tenants"
	KindSpread   = "spread"
	KindProbe    = "probe"
	KindBypass   = "bypass"
	KindFault    = "fault"
	// KindCalibrate measures the limiter's real capacity and refill: from a
	// full bucket a burst of K+1, then probes just before and just after each
	// of the next tokens' due times.
	KindCalibrate = "calibrate"
)

// Limits that keep every plan bounded.
const (
	MaxPhases         = 1000
	MaxPhaseRequests  = 1_000_000
	MaxPhaseDuration  = 2 * time.Hour
	MaxRate           = 200_000
	MaxConcurrency    = 10_000
	MaxBurstRequests  = 10_000
	DefaultEdgeOffset = 20 * time.Millisecond
)

//go:embed plans/*.yaml
var builtinFS embed.FS

// BuiltinNames are the built-in plans' names, in Builtins' order.
func BuiltinNames() []string {
	var out []string
	for _, p := range Builtins() {
		out = append(out, p.Name)
	}
	return out
}

// Builtins returns the built-in plans sorted by name.
func Builtins() []*Plan {
	entries, err := fs.ReadDir(builtinFS, "plans")
	if err != nil {
		panic(err)
	}
	var out []*Plan
	for _, e := range entries {
		p, err := loadBuiltin(e.Name())
		if err != nil {
			panic(fmt.Sprintf("attacks: built-in plan %s is invalid: %v", e.Name(), err))
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func loadBuiltin(file string) (*Plan, error) {
	data, err := builtinFS.ReadFile(path.Join("plans", file))
	if err != nil {
		return nil, err
	}
	return Parse("builtin:"+strings.TrimSuffix(file, ".yaml"), data)
}

// BuiltinYAML returns the source of the built-in plan name.
func BuiltinYAML(name string) ([]byte, bool) {
	data, err := builtinFS.ReadFile(path.Join("plans", name+".yaml"))
	return data, err == nil
}

// Load returns the built-in plan called nameOrFile, or the plan in that
// file when no built-in has the name (or it contains a path separator or
// ends in .yaml/.yml).
func Load(nameOrFile string, opts ...LoadOption) (*Plan, error) {
	looksLikeFile := strings.ContainsAny(nameOrFile, `/\`) || strings.HasSuffix(nameOrFile, ".yaml") || strings.HasSuffix(nameOrFile, ".yml")
	if !looksLikeFile {
		if _, ok := BuiltinYAML(nameOrFile); ok {
			return loadBuiltin(nameOrFile + ".yaml")
		}
		if _, err := os.Stat(nameOrFile); err != nil {
			var names []string
			for _, p := range Builtins() {
				names = append(names, p.Name)
			}
			return nil, fmt.Errorf("no built-in plan %q%s and no such file (built-ins: %s)", nameOrFile, suggest.DidYouMean(nameOrFile, names), strings.Join(names, ", "))
		}
	}
	data, err := yamlx.ReadFile(nameOrFile)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	return Parse(nameOrFile, data, opts...)
}

// Parse decodes and validates a plan; file names it in errors.
func Parse(file string, data []byte, opts ...LoadOption) (*Plan, error) {
	var p Plan
	doc, err := yamlx.Decode(file, data, &p)
	if err != nil {
		return nil, err
	}
	p.Source = file
	for _, o := range opts {
		o(&p)
	}
	if err := p.validate(doc); err != nil {
		return nil, err
	}
	return &p, nil
}

// Validate checks a plan built in code.
func (p *Plan) Validate() error { return p.validate(&yamlx.Doc{File: p.Source}) }

func (p *Plan) validate(doc *yamlx.Doc) error {
	if p.Name == "" {
		return doc.Errorf("name", "a plan needs a name")
	}
	if err := printableName(p.Name); err != nil {
		return doc.Errorf("name", "%v", err)
	}
	if len(p.Phases) == 0 {
		return doc.Errorf("phases", "a plan needs at least one phase")
	}
	if len(p.Phases) > MaxPhases {
		return doc.Errorf("phases", "%d phases; at most %d", len(p.Phases), MaxPhases)
	}
	if p.Regions < 0 || p.Regions == 1 || p.Regions > 8 {
		return doc.Errorf("regions", "%d: want 2 … 8 (or leave it out)", p.Regions)
	}
	if p.Instances < 0 || p.Instances > 64 {
		return doc.Errorf("instances", "%d: want 1 … 64", p.Instances)
	}
	for i, n := range p.Needs {
		at := fmt.Sprintf("needs.%d", i)
		switch {
		case n == "redis" || n == "faults":
		case strings.HasPrefix(n, "instances>="):
			k, err := strconv.Atoi(strings.TrimPrefix(n, "instances>="))
			if err != nil || k < 1 || k > 64 {
				return doc.Errorf(at, "%q: want instances>=N with N in 1 … 64", n)
			}
			if p.Instances != 0 && p.Instances < k {
				return doc.Errorf("instances", "%d, but the plan needs %s", p.Instances, n)
			}
		default:
			return doc.Errorf(at, "unknown need %q (want redis, faults, instances>=N)", n)
		}
	}
	if _, field, err := p.Request.compile(p.bodyFiles()); err != nil {
		return doc.Errorf("request."+field, "%v", err)
	}
	names := map[string]bool{}
	for i := range p.Phases {
		ph := &p.Phases[i]
		at := fmt.Sprintf("phases.%d", i)
		if ph.Name == "" {
			ph.Name = fmt.Sprintf("%d-%s", i+1, ph.Kind)
		}
		if names[ph.Name] {
			return doc.Errorf(at+".name", "phase name %q is used twice", ph.Name)
		}
		if err := printableName(ph.Name); err != nil {
			return doc.Errorf(at+".name", "%v", err)
		}
		names[ph.Name] = true
		if err := ph.validate(doc, at); err != nil {
			return err
		}
		if ph.Request != nil {
			if _, field, err := p.Request.merge(*ph.Request).compile(p.bodyFiles()); err != nil {
				return doc.Errorf(at+".request."+field, "%v", err)
			}
		}
		if ph.Kind == KindFault {
			if !p.needs("faults") {
				return doc.Errorf(at+".fault", "a plan with fault phases must declare it: needs: [faults]")
			}
			if (ph.Fault == faults.StoreDown || ph.Fault == faults.StoreSlow) && !p.needs("redis") {
				return doc.Errorf(at+".fault", "%s acts on the shared store: the plan must also declare needs: [redis]", ph.Fault)
			}
		}
		if ph.Instances == "pinned" || (ph.Kind == KindFault && ph.Instance != 0) {
			if n := p.minInstances(); ph.Instance >= n {
				return doc.Errorf(at+".instance", "%d, but the plan asks for %d instance(s) (instances are numbered from 0; raise instances: or needs: instances>=N)", ph.Instance, n)
			}
		}
	}
	return p.validThresholds(doc, names)
}

// MinInstances is the least number of instances the plan runs with: its
// instances, or the N of a needs: instances>=N.
func (p *Plan) MinInstances() int { return p.minInstances() }

// minInstances is the least number of instances the plan will run with.
func (p *Plan) minInstances() int {
	n := max(p.Instances, 1)
	for _, x := range p.Needs {
		if k, err := strconv.Atoi(strings.TrimPrefix(x, "instances>=")); err == nil && strings.HasPrefix(x, "instances>=") {
			n = max(n, k)
		}
	}
	return n
}

// used lists, per kind, the fields it may set (besides name and kind).
var used = map[string][]string{
	KindBurst:     {"key", "requests", "instances", "instance", "request", "costs"},
	KindBoundary:  {"key", "requests", "instances", "instance", "before", "after", "align", "request"},
	KindIdle:      {"duration", "until", "key"},
	KindRate:      {"key", "rate", "rate_to", "rate_x", "duration", "concurrency", "instances", "instance", "requests", "request", "costs"},
	KindRetry:     {"key", "requests", "retries", "jitter", "instances", "instance", "duration", "request"},
	KindTenants:   {"tenants", "rate", "rate_x", "duration", "concurrency", "instances", "instance", "requests", "request", "costs"},
	KindSpread:    {"key", "requests", "instances", "instance", "concurrency", "request", "costs"},
	KindProbe:     {"key", "at", "instances", "instance", "request"},
	KindBypass:    {"key", "requests", "variants", "instances", "instance", "request"},
	KindFault:     {"action", "fault", "param", "instance"},
	KindCalibrate: {"key", "tokens", "margin", "tiers", "instances", "instance", "request"},
}

func (ph *Phase) set() map[string]bool {
	return map[string]bool{
		"key": ph.Key != "", "requests": ph.Requests != 0, "concurrency": ph.Concurrency != 0,
		"instances": ph.Instances != "", "instance": ph.Instance != 0, "duration": ph.Duration != 0,
		"until": ph.Until != "", "rate": ph.Rate != 0, "rate_to": ph.RateTo != 0,
		"before": ph.Before != 0, "after": ph.After != 0, "align": ph.Align != "",
		"tenants": len(ph.Tenants) > 0, "retries": ph.Retries != 0, "jitter": ph.Jitter != 0,
		"at": ph.At != "", "variants": len(ph.Variants) > 0, "action": ph.Action != "",
		"fault": ph.Fault != "", "param": ph.Param != "", "request": ph.Request != nil,
		"rate_x": ph.RateX != 0, "tokens": ph.Tokens != 0, "margin": ph.Margin != 0,
		"tiers": ph.Tiers != "", "costs": len(ph.Costs) > 0,
	}
}

func (ph *Phase) validate(doc *yamlx.Doc, at string) error {
	allowed, ok := used[ph.Kind]
	if !ok {
		kinds := make([]string, 0, len(used))
		for k := range used {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		return doc.Errorf(at+".kind", "unknown phase kind %q%s (want one of %s)", ph.Kind, suggest.DidYouMean(ph.Kind, kinds), strings.Join(kinds, ", "))
	}
	allow := map[string]bool{}
	for _, f := range allowed {
		allow[f] = true
	}
	for f, isSet := range ph.set() {
		if isSet && !allow[f] {
			return doc.Errorf(at+"."+f, "field %q does not apply to a %s phase (it takes: %s)", f, ph.Kind, strings.Join(allowed, ", "))
		}
	}
	needKey := ph.Kind != KindIdle && ph.Kind != KindFault && ph.Kind != KindTenants
	if needKey && ph.Key == "" {
		return doc.Errorf(at+".key", "a %s phase needs a key (e.g. key: free-a)", ph.Kind)
	}
	if ph.Requests < 0 || ph.Requests > MaxPhaseRequests {
		return doc.Errorf(at+".requests", "%d: want 1 … %d", ph.Requests, MaxPhaseRequests)
	}
	if ph.Concurrency < 0 || ph.Concurrency > MaxConcurrency {
		return doc.Errorf(at+".concurrency", "%d: want 1 … %d", ph.Concurrency, MaxConcurrency)
	}
	if ph.Duration < 0 || ph.Duration.D() > MaxPhaseDuration {
		return doc.Errorf(at+".duration", "%s: want 0 … %s", ph.Duration, MaxPhaseDuration)
	}
	if ph.Rate < 0 || ph.Rate > MaxRate || ph.RateTo < 0 || ph.RateTo > MaxRate {
		return doc.Errorf(at+".rate", "want a rate in (0, %d/s]", MaxRate)
	}
	switch ph.Instances {
	case "", "round-robin", "random", "pinned":
	default:
		return doc.Errorf(at+".instances", "%q: want round-robin, random or pinned", ph.Instances)
	}
	if ph.Instance < 0 {
		return doc.Errorf(at+".instance", "must not be negative")
	}
	if err := validateCosts(ph.Costs); err != nil {
		return doc.Errorf(at+".costs", "%v", err)
	}
	switch ph.Kind {
	case KindBurst:
		if ph.Requests > MaxBurstRequests {
			return doc.Errorf(at+".requests", "%d: a burst holds at most %d requests", ph.Requests, MaxBurstRequests)
		}
	case KindBoundary:
		if ph.Requests > MaxBurstRequests {
			return doc.Errorf(at+".requests", "%d: a burst holds at most %d requests", ph.Requests, MaxBurstRequests)
		}
		if ph.Before < 0 || ph.After < 0 {
			return doc.Errorf(at+".before", "before and after must not be negative")
		}
		switch ph.Align {
		case "", "epoch", "headers", "first":
		default:
			return doc.Errorf(at+".align", "%q: want epoch, headers or first", ph.Align)
		}
	case KindIdle:
		if (ph.Duration == 0) == (ph.Until == "") {
			return doc.Errorf(at, "an idle phase needs either duration or until: full")
		}
		if ph.Until != "" && ph.Until != "full" {
			return doc.Errorf(at+".until", "%q: the only value is full", ph.Until)
		}
	case KindRate:
		if err := ph.validRateX(doc, at); err != nil {
			return err
		}
		if ph.Rate == 0 && ph.RateX == 0 {
			return doc.Errorf(at+".rate", "a rate phase needs rate (e.g. rate: 100/s) or rate_x (a multiple of the key's tier rate)")
		}
		if ph.Duration == 0 && ph.Requests == 0 {
			return doc.Errorf(at+".duration", "a rate phase needs duration or requests")
		}
	case KindTenants:
		if len(ph.Tenants) == 0 {
			return doc.Errorf(at+".tenants", "a tenants phase needs tenants")
		}
		for j, t := range ph.Tenants {
			if t.Key == "" || !(t.Weight > 0) || t.Weight > 1e6 {
				return doc.Errorf(fmt.Sprintf("%s.tenants.%d", at, j), "each tenant needs a key and a positive weight")
			}
			if t.Length < 0 || t.Length > MaxTenantKeyLength || (t.Length > 0 && t.Long) {
				return doc.Errorf(fmt.Sprintf("%s.tenants.%d.length", at, j), "%d: want 1 … %d bytes, and not beside long", t.Length, MaxTenantKeyLength)
			}
		}
		if err := ph.validRateX(doc, at); err != nil {
			return err
		}
		if ph.Rate == 0 && ph.RateX == 0 {
			return doc.Errorf(at+".rate", "a tenants phase needs rate (the total over all tenants) or rate_x (a multiple of the first tenant's tier rate)")
		}
		if ph.Duration == 0 && ph.Requests == 0 {
			return doc.Errorf(at+".duration", "a tenants phase needs duration or requests")
		}
	case KindRetry:
		if ph.Requests == 0 {
			return doc.Errorf(at+".requests", "a retry phase needs requests: N (the number of clients)")
		}
		if ph.Requests > MaxConcurrency {
			return doc.Errorf(at+".requests", "%d clients: a retry phase runs at most %d", ph.Requests, MaxConcurrency)
		}
		if ph.Retries < 0 || ph.Retries > 100 {
			return doc.Errorf(at+".retries", "%d: want 0 … 100 (0 means the default, %d)", ph.Retries, DefaultRetries)
		}
		if ph.Jitter < 0 || ph.Jitter.D() > MaxJitter {
			return doc.Errorf(at+".jitter", "%s: want 0 … %s", ph.Jitter, MaxJitter)
		}
	case KindSpread:
		if ph.Requests == 0 {
			return doc.Errorf(at+".requests", "a spread phase needs requests: N")
		}
		if ph.Concurrency == 0 && ph.Requests > MaxBurstRequests {
			return doc.Errorf(at+".requests", "%d: without concurrency a spread is one burst, which holds at most %d requests", ph.Requests, MaxBurstRequests)
		}
	case KindCalibrate:
		if ph.Tokens < 0 || ph.Tokens > 20 {
			return doc.Errorf(at+".tokens", "%d: want 1 … 20 (0 means the default, %d)", ph.Tokens, DefaultCalibrateTokens)
		}
		if ph.Margin < 0 || ph.Margin >= 0.5 || math.IsNaN(ph.Margin) {
			return doc.Errorf(at+".margin", "%g: want a fraction in (0, 0.5) (0 means the default, %g)", ph.Margin, DefaultCalibrateMargin)
		}
		if ph.Tiers != "" && ph.Tiers != "all" {
			return doc.Errorf(at+".tiers", "%q: the only value is all", ph.Tiers)
		}
	case KindProbe:
		if ph.At == "" {
			ph.At = "retry-after"
		}
		if _, _, err := ProbeAt(ph.At); err != nil {
			return doc.Errorf(at+".at", "%q: want retry-after, retry-after+DURATION (up to 10s) or a duration in 0 … %s", ph.At, MaxPhaseDuration)
		}
	case KindBypass:
		if ph.Requests > MaxBurstRequests {
			return doc.Errorf(at+".requests", "%d: each variant is one burst, which holds at most %d requests", ph.Requests, MaxBurstRequests)
		}
		seen := map[string]bool{}
		for j, v := range ph.Variants {
			if !slices.Contains(BypassVariants, v) {
				return doc.Errorf(fmt.Sprintf("%s.variants.%d", at, j), "%q: want one of %s (leave variants out for every one the policy's identity allows)", v, strings.Join(BypassVariants, ", "))
			}
			if seen[v] {
				return doc.Errorf(fmt.Sprintf("%s.variants.%d", at, j), "%q is listed twice", v)
			}
			seen[v] = true
		}
	case KindFault:
		if ph.Action != "inject" && ph.Action != "clear" {
			return doc.Errorf(at+".action", "%q: want inject or clear", ph.Action)
		}
		switch ph.Fault {
		case faults.StoreDown, faults.StoreSlow, faults.ClockSkew, faults.RulesDown, faults.LimitChange:
		default:
			return doc.Errorf(at+".fault", "%q: want store-down, store-slow, clock-skew, rules-down or limit-change", ph.Fault)
		}
		if ph.Action == "clear" && (ph.Param != "" || ph.Instance != 0) {
			return doc.Errorf(at+".param", "clear takes no param or instance: it ends the %s fault wherever it was injected", ph.Fault)
		}
		if ph.Action == "inject" {
			switch ph.Fault {
			case "store-slow":
				if ph.Param == "stall" {
					break
				}
				d, err := policy.ParseDuration(ph.Param)
				if err != nil || d <= 0 || d > time.Minute || strings.HasPrefix(strings.TrimSpace(ph.Param), "+") {
					return doc.Errorf(at+".param", "store-slow needs param: a latency in (0, 1m], such as 200ms, or stall (nothing gets through)")
				}
			case faults.StoreDown:
				if ph.Param != "" && ph.Param != "reset" && ph.Param != "partition" {
					return doc.Errorf(at+".param", "store-down takes no param, reset (TCP resets instead of closed connections) or partition (the store alive but unreachable)")
				}
			case "clock-skew":
				d, err := time.ParseDuration(strings.TrimSpace(ph.Param))
				if err != nil || d == 0 || d > time.Hour || d < -time.Hour {
					return doc.Errorf(at+".param", "clock-skew needs param: a non-zero signed duration within ±1h, such as \"+2s\" or \"-2s\"")
				}
			case "rules-down":
				if ph.Param != "" {
					return doc.Errorf(at+".param", "%s takes no param", ph.Fault)
				}
			case faults.LimitChange:
				if policy.CheckName(strings.TrimSpace(ph.Param)) != nil {
					return doc.Errorf(at+".param", "limit-change needs param: the name of a change the policy declares (changes:)")
				}
			}
			if ph.Instance != 0 && ph.Fault != "clock-skew" {
				return doc.Errorf(at+".instance", "only a clock-skew fault is injected on one instance")
			}
		}
	}
	return nil
}

// dir is the folder "@FILE" bodies are relative to ("" for built-ins).
func (p *Plan) dir() string {
	if strings.HasPrefix(p.Source, "builtin:") || p.Source == "" {
		return ""
	}
	return filepath.Dir(p.Source)
}

// PhaseRequest is the request shape of phase ph: the plan's request with
// the phase's own over it.
func (p *Plan) PhaseRequest(ph *Phase) Request {
	if ph.Request == nil {
		return p.Request
	}
	return p.Request.merge(*ph.Request)
}

func (ph *Phase) validRateX(doc *yamlx.Doc, at string) error {
	if ph.RateX != 0 && ph.Rate != 0 {
		return doc.Errorf(at+".rate_x", "give rate or rate_x, not both")
	}
	if ph.RateX < 0 || ph.RateX > 1000 || math.IsNaN(ph.RateX) {
		return doc.Errorf(at+".rate_x", "%g: want a multiple in (0, 1000]", ph.RateX)
	}
	if ph.RateTo != 0 && ph.RateX != 0 {
		return doc.Errorf(at+".rate_to", "a ramp (rate_to) needs rate, not rate_x")
	}
	return nil
}

// NeedsRedis reports whether the plan requires a shared store.
func (p *Plan) NeedsRedis() bool { return p.needs("redis") }

// StepsClock reports whether the plan steps an instance's clock (a
// clock-skew fault phase).
func (p *Plan) StepsClock() bool {
	for i := range p.Phases {
		if p.Phases[i].Kind == KindFault && p.Phases[i].Fault == faults.ClockSkew {
			return true
		}
	}
	return false
}

// NeedsFaults reports whether the plan injects faults.
func (p *Plan) NeedsFaults() bool { return p.needs("faults") }

// InjectedFaults are the fault kinds the plan's phases inject, in order,
// each once.
func (p *Plan) InjectedFaults() []string {
	var out []string
	for i := range p.Phases {
		ph := &p.Phases[i]
		if ph.Kind == KindFault && ph.Action == "inject" && !slices.Contains(out, ph.Fault) {
			out = append(out, ph.Fault)
		}
	}
	return out
}

func (p *Plan) needs(n string) bool {
	for _, x := range p.Needs {
		if x == n {
			return true
		}
	}
	return false
}

// validThresholds checks every threshold's syntax and that a phase it
// names is one of the plan's (names).
func (p *Plan) validThresholds(doc *yamlx.Doc, names map[string]bool) error {
	for i, s := range p.Thresholds {
		t, err := thresholds.Parse(s)
		if err != nil {
			return doc.Errorf(fmt.Sprintf("thresholds.%d", i), "%v", err)
		}
		if t.Phase != "" && !names[t.Phase] {
			return doc.Errorf(fmt.Sprintf("thresholds.%d", i), "threshold %s: no phase %q in the plan", t.Expr, t.Phase)
		}
	}
	return nil
}

// PlanThresholds returns the plan's thresholds, parsed, each naming the
// plan as its source.
func (p *Plan) PlanThresholds() []thresholds.Threshold {
	var out []thresholds.Threshold
	for _, s := range p.Thresholds {
		t, err := thresholds.Parse(s)
		if err != nil {
			continue // validate refused it already
		}
		t.Source = "plan " + p.Source
		out = append(out, t)
	}
	return out
}

// printableName refuses a name holding control characters (a newline, an
// ANSI escape): names are printed on terminals, in progress lines and in
// reports, where such a name could fake a line or recolour the screen.
func printableName(name string) error {
	for _, r := range name {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return fmt.Errorf("name %q holds a control character (%U): names are printed on terminals and in reports", name, r)
		}
	}
	return nil
}

// maxProbeLate bounds D in a probe's at: retry-after+D.
const maxProbeLate = 10 * time.Second

// ProbeAt reads a probe's at: retry-after (advice true, d the extra wait
// after the advice) or a duration after the phase starts.
func ProbeAt(at string) (advice bool, d time.Duration, err error) {
	if at == "" || at == "retry-after" {
		return true, 0, nil
	}
	if rest, ok := strings.CutPrefix(at, "retry-after+"); ok {
		v, err := policy.ParseDuration(rest)
		if err != nil || v < 0 || v > maxProbeLate {
			return false, 0, fmt.Errorf("probe at %q: want retry-after+D with D in 0 … %s", at, maxProbeLate)
		}
		return true, v, nil
	}
	v, err := policy.ParseDuration(at)
	if err != nil || v < 0 || v > MaxPhaseDuration {
		return false, 0, fmt.Errorf("probe at %q: want a duration in 0 … %s", at, MaxPhaseDuration)
	}
	return false, v, nil
}
