// Package gateway starts the rate limiters people deploy in front of their
// services, so rlverify can attack them like any other target: nginx
// limit_req and HAProxy stick tables as child processes on loopback with a
// configuration generated from the declared policy, and gubernator as an
// in-process cluster of three peers with one HTTP front per peer. Each sits
// in front of the downstream sink, keyed by the policy's identity.
// envoyproxy/ratelimit, Envoy's rate-limit service, runs as child processes
// sharing one redis-server and is called over gRPC (grpc:// instances, the
// envoyrls transport) rather than in front of a sink.
//
// Each gateway also says what the declared policy becomes in its hands: the
// honest policy (Honest), the promise it really keeps, and the deviations,
// the declared promises it cannot keep, so a report can tell a gateway doing
// what its documentation says apart from one that is broken.
//
// gateway imports envs, service, limiters, policy and the gubernator module; only
// the CLI imports it.
package gateway

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policy"
)

// ErrUnavailable wraps the error of a gateway whose program is not
// installed (it is envs.ErrUnavailable).
var ErrUnavailable = envs.ErrUnavailable

// Environment starts one gateway as a envs.Environment. The zero value is
// not usable: Gateway must be set.
type Environment struct {
	// Gateway is the catalog's description of what to start.
	Gateway catalog.Gateway
	// KeepConfigs, when set, is a directory that receives a copy of every
	// generated configuration (nginx-0.conf, haproxy-0.cfg, …) for the
	// report's reader; the running copies live in temporary directories
	// removed when the stack closes.
	KeepConfigs string
}

// Name implements envs.Environment.
func (e Environment) Name() string { return e.Gateway.Kind }

// Start implements envs.Environment: spec.Instances gateways (nginx,
// HAProxy: that many processes, each with its own state, as separate
// deployments have) or HTTP fronts over a three-peer cluster (gubernator:
// at least three, front i asking peer i mod 3), all forwarding admitted
// requests to one sink.
func (e Environment) Start(ctx context.Context, spec envs.Spec) (*envs.Stack, error) {
	if spec.Policy == nil {
		return nil, fmt.Errorf("gateway %s: no policy", e.Gateway.Kind)
	}
	n := spec.Instances
	if n <= 0 {
		n = 1
	}
	if n > envs.MaxInstances {
		return nil, fmt.Errorf("gateway %s: %d instances; at most %d", e.Gateway.Kind, n, envs.MaxInstances)
	}
	switch e.Gateway.Kind {
	case catalog.NGINX:
		return startNginx(ctx, e, spec.Policy, n)
	case catalog.HAProxy:
		return startHAProxy(ctx, e, spec.Policy, n)
	case catalog.Gubernator:
		return startGubernator(ctx, e, spec.Policy, n)
	case catalog.EnvoyRateLimit:
		return startEnvoy(ctx, e, spec.Policy, n)
	}
	return nil, fmt.Errorf("gateway: unknown kind %q (want nginx, haproxy, gubernator or envoy-ratelimit)", e.Gateway.Kind)
}

// keep writes a copy of a generated configuration into KeepConfigs.
func (e Environment) keep(name, text string) error {
	if e.KeepConfigs == "" {
		return nil
	}
	if err := os.MkdirAll(e.KeepConfigs, 0o755); err != nil {
		return fmt.Errorf("gateway: keep configuration: %w", err)
	}
	if err := os.WriteFile(filepath.Join(e.KeepConfigs, name), []byte(text), 0o644); err != nil {
		return fmt.Errorf("gateway: keep configuration: %w", err)
	}
	return nil
}

// Honest returns what the declared policy becomes when gateway g enforces
// it with the configuration this package generates: the honest policy (the
// promise g really keeps, so the same history judged against it passes
// wherever g behaves as documented) and the deviations from the declared
// one. It fails when the policy cannot be expressed at all.
func Honest(g catalog.Gateway, declared *policy.Policy) (*policy.Policy, []Deviation, error) {
	var t *translation
	var err error
	switch g.Kind {
	case catalog.NGINX:
		t, err = translateNginx(declared)
	case catalog.HAProxy:
		t, err = translateHAProxy(declared)
	case catalog.Gubernator:
		t, err = translateGubernator(declared, g.Mode)
	case catalog.EnvoyRateLimit:
		t, err = translateEnvoy(declared)
	default:
		return nil, nil, fmt.Errorf("gateway: unknown kind %q", g.Kind)
	}
	if err != nil {
		return nil, nil, err
	}
	honestDelays(t, g, declared)
	if err := t.finish(); err != nil {
		return nil, nil, err
	}
	return t.honest, t.deviations, nil
}

// Deviation is a declared promise a gateway does not keep, and what it does
// instead (with the part of its documentation that says so).
type Deviation struct {
	// Promise is what the declared policy says ("every 429 carries
	// Retry-After").
	Promise string `json:"promise"`
	// Reality is what the gateway does instead.
	Reality string `json:"reality"`
}

func (d Deviation) String() string { return d.Promise + ": " + d.Reality }

// translation is the declared policy as one gateway expresses it.
type translation struct {
	// policyName is the declared policy's name.
	policyName string
	// honest is the policy the gateway really enforces.
	honest *policy.Policy
	// deviations lists the declared promises it breaks.
	deviations []Deviation
	// limits are the tier limits (and the global guard) it enforces, in
	// configuration order.
	limits []tierLimit
	// tiers are the tiers by descending key-prefix length (longest match
	// first).
	tiers []*policy.Tier
	// rejected is the status of a refusal.
	rejected int
}

func (t *translation) deviate(promise, reality string) {
	t.deviations = append(t.deviations, Deviation{Promise: promise, Reality: reality})
}

// tierLimit is one limit the gateway enforces: a tier's limit or the global
// guard (Tier "").
type tierLimit struct {
	Tier  string
	Index int
	Limit policy.Limit
	// ID names its zone or table in the configuration.
	ID string
}

// newTranslation starts the translation of declared: the honest policy
// begins as a copy of it, and the limits and tiers are laid out.
func newTranslation(declared *policy.Policy, gw string) (*translation, error) {
	t := &translation{policyName: declared.Name, honest: declared.Clone(), rejected: rejectedStatus(declared)}
	t.honest.Name = declared.Name + "-as-" + gw
	// Whether the gateway delays is its mode's (honestDelays), not the
	// declared policy's.
	t.honest.Delay = nil
	for i := range t.honest.Tiers {
		t.honest.Tiers[i].Delay = nil
	}
	t.honest.Source = ""
	ids := map[string]bool{}
	if err := writable(declared, gw); err != nil {
		return nil, err
	}
	for i := range declared.Tiers {
		tier := &declared.Tiers[i]
		t.tiers = append(t.tiers, tier)
		for j, l := range tier.Limits {
			id := identifier(tier.Name) + fmt.Sprintf("_%d", j)
			if ids[id] {
				id = fmt.Sprintf("t%d_%d", i, j)
			}
			ids[id] = true
			t.limits = append(t.limits, tierLimit{Tier: tier.Name, Index: j, Limit: l, ID: id})
		}
	}
	if declared.Global != nil {
		t.limits = append(t.limits, tierLimit{Index: 0, Limit: *declared.Global, ID: "global"})
	}
	sort.SliceStable(t.tiers, func(i, j int) bool { return len(t.tiers[i].KeyPrefix) > len(t.tiers[j].KeyPrefix) })
	return t, nil
}

// honestLimit returns the honest policy's copy of limit tl.
func (t *translation) honestLimit(tl tierLimit) *policy.Limit {
	if tl.Tier == "" {
		return t.honest.Global
	}
	tier, _ := t.honest.Tier(tl.Tier)
	return &tier.Limits[tl.Index]
}

// finish validates the honest policy (filling in both views of every
// limit from the one the translation set).
func (t *translation) finish() error {
	if err := t.honest.Validate(); err != nil {
		return fmt.Errorf("gateway: honest policy: %w", err)
	}
	return nil
}

// noHeaders records that the gateway sends no rate-limit headers of its
// own: Retry-After and the RateLimit / X-RateLimit families are not sent.
// A refusal without advice fails retry-after whatever a policy says, so the
// honest policy turns that check off (checks_off: a promise the gateway
// knowingly does not keep).
func (t *translation) noHeaders(gw, how string) {
	h := t.honest.Headers
	if !slices.Contains(t.honest.ChecksOff, "retry-after") {
		t.deviate("every 429 carries a usable Retry-After", gw+" sends none ("+how+")")
		t.honest.ChecksOff = append(t.honest.ChecksOff, "retry-after")
	}
	if h.RateLimit.Declared() || h.XRateLimit {
		t.deviate("responses carry RateLimit / X-RateLimit headers", gw+" sends none")
	}
	t.honest.Headers = policy.Headers{}
}

// perInstance records that every instance keeps its own state.
func (t *translation) perInstance(gw, why string) {
	changed := false
	for _, tl := range t.limits {
		l := t.honestLimit(tl)
		if !l.PerInstance() {
			changed = true
		}
		l.Scope = policy.ScopeInstance
	}
	if changed {
		t.deviate("one quota per key across all instances (scope: cluster)", gw+" keeps its state in each instance ("+why+"): N instances admit N quotas")
	}
}

// rejectedStatus is the status a gateway answers a refusal with: 429 when
// the policy declares it a refusal, else the first declared one.
func rejectedStatus(p *policy.Policy) int {
	if p.Statuses.Rejected.Has(429) || len(p.Statuses.Rejected) == 0 {
		return 429
	}
	return p.Statuses.Rejected[0].Lo
}

// writable refuses a policy whose names or key prefixes a configuration
// could not hold as data. Load already refuses them (policy.CheckName); a
// policy built in code may not have been loaded, and the configuration's
// master process may run as root.
func writable(p *policy.Policy, gw string) error {
	if err := policy.CheckName(p.Name); err != nil {
		return fmt.Errorf("gateway %s: policy name %w", gw, err)
	}
	if p.DefaultTier != "" {
		if err := policy.CheckName(p.DefaultTier); err != nil {
			return fmt.Errorf("gateway %s: default_tier %w", gw, err)
		}
	}
	limit := func(where string, l policy.Limit) error {
		if err := policy.CheckLimitName(l.Name); err != nil {
			return fmt.Errorf("gateway %s: %s: %w", gw, where, err)
		}
		return nil
	}
	for _, t := range p.Tiers {
		if err := policy.CheckName(t.Name); err != nil {
			return fmt.Errorf("gateway %s: tier name %w", gw, err)
		}
		if err := policy.CheckKeyPrefix(t.KeyPrefix); err != nil {
			return fmt.Errorf("gateway %s: tier %s: key prefix %q cannot be written into a configuration: %w", gw, t.Name, t.KeyPrefix, err)
		}
		for _, l := range t.Limits {
			if err := limit("tier "+t.Name, l); err != nil {
				return err
			}
		}
	}
	if p.Global != nil {
		return limit("global", *p.Global)
	}
	return nil
}

// comment makes s safe inside a one-line # comment of any configuration:
// a line break or other control character would end the comment and let
// the rest be read as directives.
func comment(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == 0x85 || r == 0x2028 || r == 0x2029 {
			return '?'
		}
		return r
	}, s)
}

var nonIdent = regexp.MustCompile(`[^A-Za-z0-9]+`)

// identifier turns a tier name into a configuration identifier.
func identifier(s string) string {
	id := strings.Trim(nonIdent.ReplaceAllString(s, "_"), "_")
	if id == "" || (id[0] >= '0' && id[0] <= '9') {
		id = "t_" + id
	}
	return id
}
