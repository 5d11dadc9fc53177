package envs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	tpclient "github.com/Shopify/toxiproxy/v2/client"
	"github.com/rs/zerolog"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/internal/childproc"
	"github.com/rlverify/rlverify/internal/faultproxy"
	"github.com/rlverify/rlverify/policy"
)

// Faults on a service rlverify did not start. Three ways, combinable:
//   - StoreProxy: Toxiproxy proxies run in this process (LISTEN=UPSTREAM);
//     the user points the service's store address at LISTEN;
//   - ToxiproxyAPI: an existing Toxiproxy server driven over its HTTP API;
//   - Hooks: commands run at a fault's start and end (docker stop redis).

// ProxySpec is one store proxy: rlverify listens on Listen and forwards to
// Upstream.
type ProxySpec struct{ Listen, Upstream string }

// ParseProxySpec reads LISTEN=UPSTREAM (host:port each).
func ParseProxySpec(s string) (ProxySpec, error) {
	l, u, ok := strings.Cut(s, "=")
	if !ok || l == "" || u == "" {
		return ProxySpec{}, fmt.Errorf("--store-proxy %q: want LISTEN=UPSTREAM, e.g. 127.0.0.1:16379=127.0.0.1:6379", s)
	}
	for _, a := range []string{l, u} {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return ProxySpec{}, fmt.Errorf("--store-proxy %q: %q is not host:port", s, a)
		}
	}
	return ProxySpec{Listen: l, Upstream: u}, nil
}

// CheckProxySpecs refuses store proxies whose upstream is a store proxy's
// own listen address, itself or another's (names resolved, 0.0.0.0 taken
// as every local address): each connection would be forwarded back into
// rlverify, for ever, at full CPU (`--store-proxy A=A` did that).
func CheckProxySpecs(specs []ProxySpec) error {
	for _, s := range specs {
		for _, other := range specs {
			if faultproxy.SameEndpoint(other.Listen, s.Upstream) {
				if other == s {
					return fmt.Errorf("--store-proxy %s=%s: the upstream is the proxy's own listen address: it would forward to itself; give your store's address as UPSTREAM", s.Listen, s.Upstream)
				}
				return fmt.Errorf("--store-proxy %s=%s: the upstream is the listen address of --store-proxy %s=%s: the proxies would forward to each other; give your store's address as UPSTREAM", s.Listen, s.Upstream, other.Listen, other.Upstream)
			}
		}
	}
	return nil
}

// Names of the toxics rlverify adds, so it removes only its own.
const (
	toxicLatency = "rlverify_latency"
	toxicStall   = "rlverify_stall"
	toxicReset   = "rlverify_reset"
)

// toxicFor is the Toxiproxy toxic for a store fault; down (no toxic) means
// the proxy is disabled: new connections refused, open ones closed.
func toxicFor(kind, param string) (name, typ string, attrs map[string]any, down bool, err error) {
	switch kind {
	case FaultStoreDown:
		switch param {
		case "":
			return "", "", nil, true, nil
		case StoreDownReset:
			return toxicReset, "reset_peer", map[string]any{"timeout": 0}, false, nil
		case StoreDownPartition:
			return toxicStall, "timeout", map[string]any{"timeout": 0}, false, nil
		}
	case FaultStoreSlow:
		if param == StoreSlowStall {
			return toxicStall, "timeout", map[string]any{"timeout": 0}, false, nil
		}
		d, perr := policy.ParseDuration(param)
		if perr != nil || d <= 0 {
			return "", "", nil, false, fmt.Errorf("store-slow: param %q is not a latency", param)
		}
		return toxicLatency, "latency", map[string]any{"latency": d.Milliseconds()}, false, nil
	}
	return "", "", nil, false, fmt.Errorf("%s cannot be done by a store proxy", kind)
}

// StoreProxy runs Toxiproxy proxies in this process. Safe for concurrent
// use; build it with StartStoreProxy and Close it.
type StoreProxy struct {
	mu      sync.Mutex
	proxies []*toxiproxy.Proxy
	// added names the toxics added per fault kind, to remove on Clear.
	added map[string]string
	down  bool
}

// StartStoreProxy listens on every spec's Listen address.
func StartStoreProxy(specs []ProxySpec) (*StoreProxy, error) {
	if err := CheckProxySpecs(specs); err != nil {
		return nil, err
	}
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	sp := &StoreProxy{added: map[string]string{}}
	for i, s := range specs {
		p := toxiproxy.NewProxy(server, fmt.Sprintf("rlverify-store-%d", i), s.Listen, s.Upstream)
		if err := p.Start(); err != nil {
			sp.Close()
			return nil, fmt.Errorf("store proxy %s=%s: cannot listen on %s: %w", s.Listen, s.Upstream, s.Listen, err)
		}
		sp.proxies = append(sp.proxies, p)
	}
	return sp, nil
}

// Supports implements FaultInjector.
func (sp *StoreProxy) Supports(kind string) bool {
	return kind == FaultStoreDown || kind == FaultStoreSlow
}

// Inject implements FaultInjector.
func (sp *StoreProxy) Inject(_ context.Context, kind, param string) error {
	name, typ, attrs, down, err := toxicFor(kind, param)
	if err != nil {
		return err
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if down {
		for _, p := range sp.proxies {
			p.Stop()
		}
		sp.down = true
		return nil
	}
	for _, p := range sp.proxies {
		for _, stream := range []string{"downstream", "upstream"} {
			body := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, name+"_"+stream, typ, stream, jsonAttrs(attrs))
			if _, err := p.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
				return fmt.Errorf("store proxy %s: add %s toxic: %w", p.Listen, typ, err)
			}
		}
	}
	sp.added[kind] = name
	return nil
}

// Clear implements FaultInjector.
func (sp *StoreProxy) Clear(ctx context.Context, kind string) error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if kind == FaultStoreDown && sp.down {
		for _, p := range sp.proxies {
			if err := p.Start(); err != nil {
				return fmt.Errorf("store proxy %s: listen again: %w", p.Listen, err)
			}
		}
		sp.down = false
	}
	name, ok := sp.added[kind]
	if !ok {
		return nil
	}
	for _, p := range sp.proxies {
		for _, stream := range []string{"downstream", "upstream"} {
			if err := p.Toxics.RemoveToxic(ctx, name+"_"+stream); err != nil && !errors.Is(err, toxiproxy.ErrToxicNotFound) {
				return fmt.Errorf("store proxy %s: remove toxic: %w", p.Listen, err)
			}
		}
	}
	delete(sp.added, kind)
	return nil
}

// Close stops every proxy.
func (sp *StoreProxy) Close() error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for _, p := range sp.proxies {
		p.Stop()
	}
	return nil
}

func jsonAttrs(m map[string]any) string {
	var b strings.Builder
	b.WriteByte('{')
	first := true
	for k, v := range m {
		if !first {
			b.WriteByte(',')
		}
		first = false
		fmt.Fprintf(&b, "%q:%v", k, v)
	}
	b.WriteByte('}')
	return b.String()
}

// ToxiproxyAPI drives proxies of an existing Toxiproxy server.
type ToxiproxyAPI struct {
	client  *tpclient.Client
	proxies []*tpclient.Proxy
	mu      sync.Mutex
	added   map[string]string
	down    bool
}

// ConnectToxiproxy checks that the server at url answers and has every
// named proxy.
func ConnectToxiproxy(url string, names []string) (*ToxiproxyAPI, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("--toxiproxy %s: name the proxies to break with --toxiproxy-proxy NAME", url)
	}
	c := tpclient.NewClient(url)
	all, err := c.Proxies()
	if err != nil {
		return nil, fmt.Errorf("toxiproxy %s is unreachable: %w", url, err)
	}
	t := &ToxiproxyAPI{client: c, added: map[string]string{}}
	for _, n := range names {
		p, ok := all[n]
		if !ok {
			have := make([]string, 0, len(all))
			for k := range all {
				have = append(have, k)
			}
			return nil, fmt.Errorf("toxiproxy %s has no proxy %q (it has: %s)", url, n, strings.Join(have, ", "))
		}
		t.proxies = append(t.proxies, p)
	}
	return t, nil
}

// Supports implements FaultInjector.
func (t *ToxiproxyAPI) Supports(kind string) bool {
	return kind == FaultStoreDown || kind == FaultStoreSlow
}

// Inject implements FaultInjector.
func (t *ToxiproxyAPI) Inject(_ context.Context, kind, param string) error {
	name, typ, attrs, down, err := toxicFor(kind, param)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.proxies {
		if down {
			if err := p.Disable(); err != nil {
				return fmt.Errorf("toxiproxy proxy %s: disable: %w", p.Name, err)
			}
			continue
		}
		for _, stream := range []string{"downstream", "upstream"} {
			if _, err := p.AddToxic(name+"_"+stream, typ, stream, 1, tpclient.Attributes(attrs)); err != nil {
				return fmt.Errorf("toxiproxy proxy %s: add %s toxic: %w", p.Name, typ, err)
			}
		}
	}
	if down {
		t.down = true
	} else {
		t.added[kind] = name
	}
	return nil
}

// Clear implements FaultInjector.
func (t *ToxiproxyAPI) Clear(_ context.Context, kind string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.proxies {
		if kind == FaultStoreDown && t.down {
			if err := p.Enable(); err != nil {
				return fmt.Errorf("toxiproxy proxy %s: enable: %w", p.Name, err)
			}
		}
		if name, ok := t.added[kind]; ok {
			for _, stream := range []string{"downstream", "upstream"} {
				if err := p.RemoveToxic(name + "_" + stream); err != nil {
					return fmt.Errorf("toxiproxy proxy %s: remove toxic: %w", p.Name, err)
				}
			}
		}
	}
	if kind == FaultStoreDown {
		t.down = false
	}
	delete(t.added, kind)
	return nil
}

// Hook is a command run when a fault starts or ends.
type Hook struct {
	Kind, Action, Command string
}

// ParseHook reads KIND=COMMAND for action (inject or clear).
func ParseHook(action, s string) (Hook, error) {
	kind, cmd, ok := strings.Cut(s, "=")
	kind = strings.TrimSpace(kind)
	if !ok || strings.TrimSpace(cmd) == "" {
		return Hook{}, fmt.Errorf("--on-%s %q: want KIND=COMMAND, e.g. store-down='docker stop redis'", action, s)
	}
	switch kind {
	case FaultStoreDown, FaultStoreSlow, FaultClockSkew, FaultRulesDown:
	default:
		return Hook{}, fmt.Errorf("--on-%s %q: unknown fault %q (want store-down, store-slow, clock-skew or rules-down)", action, s, kind)
	}
	return Hook{Kind: kind, Action: action, Command: cmd}, nil
}

// MaxHookOutput bounds the output of a hook kept in the history.
const MaxHookOutput = 4 << 10

// Hooks injects faults by running the user's commands (with sh -c) at a
// fault's start and end, each within Timeout. A command that fails or runs
// out of time fails the fault, with its output.
type Hooks struct {
	OnInject, OnClear map[string]string
	Timeout           time.Duration
	// Env is added to every command's environment: RLVERIFY_FAULT,
	// RLVERIFY_FAULT_PARAM and RLVERIFY_FAULT_ACTION are always set.
	Env []string
	// Log, when set, is told of what a command left behind.
	Log func(format string, a ...any)

	mu   sync.Mutex
	last map[string]history.FaultHook
}

// NewHooks builds a hook injector.
func NewHooks(hooks []Hook, timeout time.Duration) *Hooks {
	h := &Hooks{OnInject: map[string]string{}, OnClear: map[string]string{}, Timeout: timeout, last: map[string]history.FaultHook{}}
	for _, k := range hooks {
		if k.Action == "inject" {
			h.OnInject[k.Kind] = k.Command
		} else {
			h.OnClear[k.Kind] = k.Command
		}
	}
	if h.Timeout <= 0 {
		h.Timeout = 30 * time.Second
	}
	return h
}

// Supports implements FaultInjector: a kind with an inject command.
func (h *Hooks) Supports(kind string) bool { _, ok := h.OnInject[kind]; return ok }

// Inject implements FaultInjector.
func (h *Hooks) Inject(ctx context.Context, kind, param string) error {
	return h.run(ctx, "inject", kind, param, h.OnInject[kind])
}

// Clear implements FaultInjector; a kind without a clear command has
// nothing to run.
func (h *Hooks) Clear(ctx context.Context, kind string) error {
	cmd, ok := h.OnClear[kind]
	if !ok {
		return nil
	}
	return h.run(ctx, "clear", kind, "", cmd)
}

// LastHook returns the record of the last command run for kind and action.
func (h *Hooks) LastHook(kind, action string) (history.FaultHook, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.last[kind+"/"+action]
	return r, ok
}

// ErrHook marks a fault command that failed or ran out of time: the run
// stops, and (docs/environments.md) exits 3 whatever was judged, since the
// service may be left in the fault.
var ErrHook = errors.New("fault command failed")

// hookWaitDelay is how long a hook's output is read after its shell has
// exited, while a process it started in the background still holds it.
const hookWaitDelay = 200 * time.Millisecond

func (h *Hooks) run(ctx context.Context, action, kind, param, command string) error {
	if command == "" {
		return fmt.Errorf("no --on-%s command for %s", action, kind)
	}
	cctx, cancel := context.WithTimeout(ctx, h.Timeout)
	defer cancel()
	// Its own process group, killed whole at the timeout or when the run
	// stops; a process it leaves in the background on success is its own.
	c := childproc.CommandContext(cctx, hookWaitDelay, "sh", "-c", command)
	c.Env = append(append(c.Environ(), h.Env...), "RLVERIFY_FAULT="+kind, "RLVERIFY_FAULT_PARAM="+param, "RLVERIFY_FAULT_ACTION="+action)
	out := &childproc.Output{Max: MaxHookOutput}
	c.Stdout, c.Stderr = out, out
	start := time.Now()
	left, err := childproc.Run(c)
	rec := history.FaultHook{Action: action, Command: command, Took: int64(time.Since(start)), Output: out.String()}
	if c.ProcessState != nil {
		rec.Exit = c.ProcessState.ExitCode()
	}
	h.mu.Lock()
	h.last[kind+"/"+action] = rec
	h.mu.Unlock()
	// The output is capped while it is read: Output says where it was
	// truncated and how much was not kept.
	shown := strings.TrimSpace(rec.Output)
	switch {
	case cctx.Err() == context.DeadlineExceeded:
		return fmt.Errorf("%w: %s hook for %s did not finish within %s: %q (output: %s); its process group was killed", ErrHook, action, kind, h.Timeout, command, shown)
	case ctx.Err() != nil:
		return fmt.Errorf("%s hook for %s stopped with the run (its process group was killed): %w", action, kind, ctx.Err())
	case err != nil:
		return fmt.Errorf("%w: %s hook for %s failed (%v): %q (output: %s)", ErrHook, action, kind, err, command, shown)
	case left && h.Log != nil:
		h.Log("%s hook for %s left a process running in the background (its output is not kept): %q", action, kind, command)
	}
	return nil
}

// Router sends each fault kind to the first injector that supports it:
// hooks first (the user's explicit commands), then proxies.
type Router []FaultInjector

// Supports implements FaultInjector.
func (r Router) Supports(kind string) bool { return r.pick(kind) != nil }

func (r Router) pick(kind string) FaultInjector {
	for _, f := range r {
		if f != nil && f.Supports(kind) {
			return f
		}
	}
	return nil
}

// Inject implements FaultInjector.
func (r Router) Inject(ctx context.Context, kind, param string) error {
	f := r.pick(kind)
	if f == nil {
		return fmt.Errorf("no fault injector for %s", kind)
	}
	return f.Inject(ctx, kind, param)
}

// Clear implements FaultInjector.
func (r Router) Clear(ctx context.Context, kind string) error {
	f := r.pick(kind)
	if f == nil {
		return nil
	}
	return f.Clear(ctx, kind)
}

// LastHook reports the hook run for kind and action, when a Hooks injector
// handled it.
func (r Router) LastHook(kind, action string) (history.FaultHook, bool) {
	if h, ok := r.pick(kind).(*Hooks); ok {
		return h.LastHook(kind, action)
	}
	return history.FaultHook{}, false
}
