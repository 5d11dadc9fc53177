package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/envs/redisproc"
	"github.com/rlverify/rlverify/policy"
)

// envoyproxy/ratelimit (https://github.com/envoyproxy/ratelimit), Envoy's
// reference rate-limit service: a gRPC ShouldRateLimit server keeping
// fixed-window counters in Redis.
//
// Mapping, per tier (one limit (N, W)):
//
//	domain: rlverify
//	descriptors:
//	  - key: tier
//	    value: TIER
//	    descriptors:
//	      - key: key            # no value: one counter per distinct key
//	        rate_limit: {unit: U, requests_per_unit: n}
//
// and every call carries the descriptor [tier={tier}, key={key}] (the
// policy's ratelimit_service, set by the gateway). A rate_limit is n per
// unit U, one of second, minute, hour or day: a counter per key in a
// window aligned to the Unix epoch (the Redis key ends in now/U·U), every
// call counted (INCRBY before the comparison; in a fixed window a refused
// call changes no later admission). A declared window W that is not a unit
// is rounded: U is the largest unit ≤ W (second when W < 1s) and n =
// ⌊N·U/W⌋, so the long-run rate never exceeds N/W; when that leaves n = 0
// the next unit up is taken. The honest policy is then the fixed window
// (n, U), epoch-aligned. The answer carries current_limit,
// limit_remaining and duration_until_reset (whole seconds), which the
// grpc:// transport makes X-RateLimit-Limit, -Remaining and -Reset; Envoy's
// filter sends no Retry-After. All instances share one Redis: one quota per
// key across the instances. A request descriptor matches one rule, so a
// tier has one limit and there is no global guard.

// EnvoyDomain is the domain of the generated configuration.
const EnvoyDomain = "rlverify"

// envoyUnits are envoyproxy/ratelimit's units, shortest first.
var envoyUnits = []struct {
	name string
	d    time.Duration
}{{"second", time.Second}, {"minute", time.Minute}, {"hour", time.Hour}, {"day", 24 * time.Hour}}

// EnvoyService is the ratelimit_service the generated configuration
// answers: the calls rlverify makes to the gateway's instances.
func EnvoyService() *policy.RateLimitService {
	return &policy.RateLimitService{Domain: EnvoyDomain, Descriptors: []policy.DescriptorEntry{
		{Key: "tier", Value: "{tier}"}, {Key: "key", Value: "{key}"},
	}}
}

// envoyRule is one tier's rate_limit.
type envoyRule struct {
	Tier string
	Unit string
	N    int64
}

// envoyPlan is the declared policy as envoyproxy/ratelimit expresses it.
type envoyPlan struct {
	*translation
	rules []envoyRule
}

func translateEnvoy(declared *policy.Policy) (*translation, error) {
	p, err := planEnvoy(declared)
	if err != nil {
		return nil, err
	}
	return p.translation, nil
}

// envoyUnit returns the unit and count that express n per w (see the
// mapping above).
func envoyUnit(n int64, w time.Duration) (string, int64, error) {
	if n < 1 || w <= 0 {
		return "", 0, fmt.Errorf("limit %d per %s cannot be expressed", n, w)
	}
	i := 0
	for i+1 < len(envoyUnits) && envoyUnits[i+1].d <= w {
		i++
	}
	for ; i < len(envoyUnits); i++ {
		u := envoyUnits[i].d
		// ⌊n·u/w⌋ without overflow for the durations a policy holds.
		c := int64(float64(n) * float64(u) / float64(w))
		if float64(c+1)*float64(w) <= float64(n)*float64(u) {
			c++ // float rounding fell short of an exact quotient
		}
		if c >= 1 {
			return envoyUnits[i].name, c, nil
		}
	}
	return "", 0, fmt.Errorf("%d per %s is below envoyproxy/ratelimit's slowest, 1 per day", n, w)
}

func planEnvoy(declared *policy.Policy) (*envoyPlan, error) {
	t, err := newTranslation(declared, "envoy-ratelimit")
	if err != nil {
		return nil, err
	}
	for _, tier := range declared.Tiers {
		if len(tier.Limits) != 1 {
			return nil, fmt.Errorf("gateway envoy-ratelimit: tier %s declares %d limits: a call's descriptor matches one rule, so envoyproxy/ratelimit applies one limit per tier here", tier.Name, len(tier.Limits))
		}
	}
	if declared.Global != nil {
		return nil, fmt.Errorf("gateway envoy-ratelimit: the global limit %s: a call carries one descriptor, which matches one rule (its tier's); a guard over every key needs a second descriptor, which ratelimit_service does not send", declared.Global.Name)
	}
	p := &envoyPlan{translation: t}
	for _, tl := range t.limits {
		unit, n, err := envoyUnit(tl.Limit.Count, tl.Limit.W())
		if err != nil {
			return nil, fmt.Errorf("gateway envoy-ratelimit: limit %s: %w", tl.Limit.Name, err)
		}
		p.rules = append(p.rules, envoyRule{Tier: tl.Tier, Unit: unit, N: n})
		h := t.honestLimit(tl)
		var ud time.Duration
		for _, u := range envoyUnits {
			if u.name == unit {
				ud = u.d
			}
		}
		if ud != tl.Limit.W() || n != tl.Limit.Count {
			t.deviate(fmt.Sprintf("limit %s admits %d per %s", tl.Limit.Name, tl.Limit.Count, tl.Limit.Window),
				fmt.Sprintf("envoyproxy/ratelimit's windows are one second, minute, hour or day: requests_per_unit %d per %s keeps the rate at or below the declared one", n, unit))
		}
		if tl.Limit.Algorithm != policy.FixedWindow || tl.Limit.AnchoredAtFirst() {
			t.deviate(fmt.Sprintf("limit %s is a %s", tl.Limit.Name, tl.Limit.Algorithm),
				"envoyproxy/ratelimit counts per key in fixed windows aligned to the Unix epoch: up to 2N across a window boundary")
		}
		setFixed(h, n, ud)
	}
	hd := declared.Headers
	if hd.RetryAfter {
		t.deviate("every 429 carries a usable Retry-After", "Envoy's rate-limit filter sends none (the service's duration_until_reset becomes X-RateLimit-Reset)")
	}
	if hd.RateLimit.Declared() {
		t.deviate("responses carry RateLimit headers", "the service's statuses become X-RateLimit-Limit, -Remaining and -Reset (Envoy's enable_x_ratelimit_headers), no RateLimit header")
	}
	if !slices.Contains(t.honest.ChecksOff, "retry-after") {
		t.honest.ChecksOff = append(t.honest.ChecksOff, "retry-after")
	}
	t.honest.Headers = policy.Headers{XRateLimit: true, XReset: "relative"}
	id, hid := &declared.Identity, &t.honest.Identity
	if id.CaseFolded() {
		t.deviate("keys differing only in letter case are one key", "a descriptor value is matched and counted as its bytes")
	}
	hid.CaseSensitive = ptr(true)
	if id.Trimmed() {
		t.deviate("white space around a key is ignored", "the descriptor value is the key as sent, spaces included")
	}
	hid.Trim = ptr(false)
	if id.MaxLength > 0 {
		t.deviate(fmt.Sprintf("keys longer than %d characters are %s", id.MaxLength, map[bool]string{true: "cut", false: "refused"}[id.TooLong == policy.TooLongCut]),
			"envoyproxy/ratelimit counts a descriptor value of any length")
		hid.MaxLength, hid.TooLong = 0, ""
	}
	if len(id.TrustedProxies) > 0 {
		t.deviate("X-Forwarded-For from trusted proxies is part of the identity", "the descriptor carries the identity alone")
		hid.TrustedProxies = nil
	}
	for _, tl := range t.limits {
		h := t.honestLimit(tl)
		if h.PerInstance() {
			t.deviate("each instance enforces its own quota (scope: instance)", "every instance counts in the one Redis: one quota per key across them")
		}
		h.Scope = policy.ScopeCluster
	}
	if !declared.Failure.Undeclared && declared.Failure.Mode != "" {
		t.deviate(fmt.Sprintf("while the store is down, failure mode %s", declared.Failure.Mode),
			"envoyproxy/ratelimit answers every call with a gRPC error (UNKNOWN) while its Redis is down: whether Envoy then lets the request through is its filter's failure_mode_deny")
	}
	t.honest.Service = EnvoyService()
	if err := t.finish(); err != nil {
		return nil, err
	}
	return p, nil
}

// setFixed makes l a fixed window (n, w) aligned to the epoch in the
// honest policy.
func setFixed(l *policy.Limit, n int64, w time.Duration) {
	l.Algorithm, l.Count, l.Window, l.Anchor = policy.FixedWindow, n, policy.Duration(w), policy.AnchorEpoch
	l.Capacity, l.Rate, l.Name, l.ErrorBound = 0, 0, "", 0
}

// envoyConfig is envoyproxy/ratelimit's configuration file.
type envoyConfig struct {
	Domain      string            `yaml:"domain"`
	Descriptors []envoyDescriptor `yaml:"descriptors"`
}

type envoyDescriptor struct {
	Key         string            `yaml:"key"`
	Value       string            `yaml:"value,omitempty"`
	RateLimit   *envoyRateLimit   `yaml:"rate_limit,omitempty"`
	Descriptors []envoyDescriptor `yaml:"descriptors,omitempty"`
}

type envoyRateLimit struct {
	Unit            string `yaml:"unit"`
	RequestsPerUnit int64  `yaml:"requests_per_unit"`
}

// renderEnvoy writes the configuration of p. The policy's names are
// values of a YAML marshaller, never text spliced into the file.
func renderEnvoy(p *envoyPlan) (string, error) {
	c := envoyConfig{Domain: EnvoyDomain}
	for _, r := range p.rules {
		c.Descriptors = append(c.Descriptors, envoyDescriptor{Key: "tier", Value: r.Tier, Descriptors: []envoyDescriptor{
			{Key: "key", RateLimit: &envoyRateLimit{Unit: r.Unit, RequestsPerUnit: r.N}},
		}})
	}
	b, err := yaml.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("gateway envoy-ratelimit: configuration: %w", err)
	}
	return fmt.Sprintf("# Generated by rlverify from policy %s: fixed windows per unit, one counter per key and tier.\n", comment(p.policyName)) + string(b), nil
}

// EnvoyProgramEnv names the variable that points at envoyproxy/ratelimit's
// binary (also read by the tests).
const EnvoyProgramEnv = "RLVERIFY_ENVOY_RATELIMIT"

// envoyBuild is the command that builds the binary.
const envoyBuild = "bash scripts/envoy-ratelimit.sh"

// findEnvoy returns envoyproxy/ratelimit's binary: $RLVERIFY_ENVOY_RATELIMIT,
// else envoy-ratelimit on PATH, else $GOPATH/bin/envoy-ratelimit (where
// scripts/envoy-ratelimit.sh builds it; GOPATH defaults to ~/go).
func findEnvoy() (string, error) {
	notBuilt := func(err error) error {
		return fmt.Errorf("envoyproxy/ratelimit is not built (%s puts it in $(go env GOPATH)/bin/envoy-ratelimit): %w", envoyBuild, errors.Join(ErrUnavailable, err))
	}
	if p := os.Getenv(EnvoyProgramEnv); p != "" {
		st, err := os.Stat(p)
		if err == nil && st.Mode()&0o111 == 0 {
			err = fmt.Errorf("%s is not executable", p)
		}
		if err != nil {
			return "", notBuilt(fmt.Errorf("$%s: %w", EnvoyProgramEnv, err))
		}
		return p, nil
	}
	if p, err := exec.LookPath("envoy-ratelimit"); err == nil {
		return p, nil
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		if home, err := os.UserHomeDir(); err == nil {
			gopath = filepath.Join(home, "go")
		}
	}
	var tried []string
	for _, dir := range filepath.SplitList(gopath) {
		cand := filepath.Join(dir, "bin", "envoy-ratelimit")
		if st, err := os.Stat(cand); err == nil && st.Mode()&0o111 != 0 {
			return cand, nil
		}
		tried = append(tried, cand)
	}
	return "", notBuilt(fmt.Errorf("not on PATH, not at %s", strings.Join(tried, ", ")))
}

// envoyStartTimeout bounds one instance's start-up: it loads its
// configuration and connects to Redis before it listens.
func envoyStartTimeout() time.Duration { return max(StartTimeout, 15*time.Second) }

func startEnvoy(ctx context.Context, e Environment, pol *policy.Policy, n int) (*envs.Stack, error) {
	prog, err := findEnvoy()
	if err != nil {
		return nil, fmt.Errorf("gateway envoy-ratelimit: %w", err)
	}
	if err := redisproc.Available(); err != nil {
		return nil, fmt.Errorf("gateway envoy-ratelimit: its store: %w", errors.Join(ErrUnavailable, err))
	}
	p, err := planEnvoy(pol)
	if err != nil {
		return nil, err
	}
	text, err := renderEnvoy(p)
	if err != nil {
		return nil, err
	}
	st := &envs.Stack{Env: "envoy-ratelimit"}
	ok := false
	defer func() {
		if !ok {
			_ = st.Close()
		}
	}()
	rs, err := redisproc.Start()
	if err != nil {
		return nil, fmt.Errorf("gateway envoy-ratelimit: start redis-server: %w", err)
	}
	st.OnClose(func() error { rs.Stop(); return nil })
	// The instances reach Redis through a store proxy, so a plan can break
	// the store (store-down, store-slow) as in the other environments.
	port, err := redisproc.FreePort()
	if err != nil {
		return nil, fmt.Errorf("gateway envoy-ratelimit: %w", err)
	}
	proxyAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	sp, err := envs.StartStoreProxy([]envs.ProxySpec{{Listen: proxyAddr, Upstream: rs.Addr}})
	if err != nil {
		return nil, fmt.Errorf("gateway envoy-ratelimit: %w", err)
	}
	st.OnClose(sp.Close)
	st.Faults = sp
	dir, err := tempDir("envoy-ratelimit")
	if err != nil {
		return nil, err
	}
	st.OnClose(func() error { return os.RemoveAll(dir) })
	confDir := filepath.Join(dir, "rl", "config")
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		return nil, fmt.Errorf("gateway envoy-ratelimit: %w", err)
	}
	if err := os.WriteFile(filepath.Join(confDir, "config.yaml"), []byte(text), 0o644); err != nil {
		return nil, fmt.Errorf("gateway envoy-ratelimit: %w", err)
	}
	if err := e.keep("envoy-ratelimit.yaml", text); err != nil {
		return nil, err
	}
	timeout := pol.Failure.StoreTimeout.D()
	if timeout <= 0 {
		timeout = time.Second
	}
	base := []string{
		"RUNTIME_ROOT=" + dir, "RUNTIME_SUBDIRECTORY=rl", "RUNTIME_WATCH_ROOT=false",
		"USE_STATSD=false", "LOG_LEVEL=warn",
		"REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + proxyAddr, "REDIS_TIMEOUT=" + timeout.String(),
	}
	for i := 0; i < n; i++ {
		var last error
		for attempt := 0; attempt < startAttempts; attempt++ {
			var ports [3]int
			for j := range ports {
				if ports[j], err = redisproc.FreePort(); err != nil {
					return nil, fmt.Errorf("gateway envoy-ratelimit: %w", err)
				}
			}
			grpcAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))
			env := append(envoyEnviron(), base...)
			env = append(env,
				"HOST=127.0.0.1", "PORT="+strconv.Itoa(ports[0]),
				"GRPC_HOST=127.0.0.1", "GRPC_PORT="+strconv.Itoa(ports[1]),
				"DEBUG_HOST=127.0.0.1", "DEBUG_PORT="+strconv.Itoa(ports[2]))
			c, err := startChildEnv(ctx, fmt.Sprintf("envoy-ratelimit instance %d", i), prog, nil, env, grpcAddr, envoyStartTimeout())
			if err != nil {
				last = err
				if ctx.Err() != nil {
					return nil, err
				}
				continue
			}
			st.OnClose(c.stop)
			st.Instances = append(st.Instances, "grpc://"+grpcAddr)
			last = nil
			break
		}
		if last != nil {
			return nil, last
		}
	}
	st.StoreDesc = fmt.Sprintf("redis-server %s (child process) shared by every envoyproxy/ratelimit instance, through a store proxy", rs.Addr)
	st.Notes = append(st.Notes, fmt.Sprintf("envoyproxy/ratelimit (%s): %d instance(s) sharing one Redis, called over gRPC with domain %s and descriptor [tier, key]", prog, n, EnvoyDomain))
	if e.KeepConfigs != "" {
		st.Notes = append(st.Notes, fmt.Sprintf("generated configuration: envoy-ratelimit.yaml (in %s)", e.KeepConfigs))
	}
	st.Notes = append(st.Notes, deviationNotes("envoy-ratelimit", p.deviations)...)
	ok = true
	return st, nil
}

// envoyEnviron is this process's environment without the service's own
// settings, so a variable of the caller's never changes the instance.
func envoyEnviron() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "REDIS_"), strings.HasPrefix(name, "RUNTIME_"), strings.HasPrefix(name, "LOCAL_CACHE"),
			strings.HasSuffix(name, "_HOST"), strings.HasSuffix(name, "_PORT"), strings.HasPrefix(name, "USE_"),
			name == "PORT", name == "HOST", name == "LOG_LEVEL", name == "LOG_FORMAT":
			continue
		}
		out = append(out, kv)
	}
	return out
}
