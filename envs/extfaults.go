package envs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/internal/childproc"
	"github.com/rlverify/rlverify/internal/faultproxy"
	"github.com/rlverify/rlverify/policy"
)

// Faults on a service rlverify did not start. Three ways, combinable:
//   - StoreProxy: fault proxies run in this process (LISTEN=UPSTREAM);
//     the user points the service's store address at LISTEN;
//   - ToxiproxyAPI: an existing Toxiproxy server driven over its HTTP API;
//   - Hooks: commands run at a fault's start and end (docker stop redis).

// ProxySpec is one store proxy: rlverify listens on Listen and forwards to
// Upstream.
type ProxySpec struct{ Listen, Upstream string }

// ParseProxySpec reads LISTEN=UPSTREAM (host:port each); the error names
// the spec, not where it came from.
func ParseProxySpec(s string) (ProxySpec, error) {
	l, u, ok := strings.Cut(s, "=")
	if !ok || l == "" || u == "" {
		return ProxySpec{}, fmt.Errorf("%q: want LISTEN=UPSTREAM, e.g. 127.0.0.1:16379=127.0.0.1:6379", s)
	}
	for _, a := range []string{l, u} {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return ProxySpec{}, fmt.Errorf("%q: %q is not host:port", s, a)
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
					return fmt.Errorf("%s=%s: the upstream is the proxy's own listen address: it would forward to itself; give your store's address as UPSTREAM", s.Listen, s.Upstream)
				}
				return fmt.Errorf("%s=%s: the upstream is the listen address of store proxy %s=%s: the proxies would forward to each other; give your store's address as UPSTREAM", s.Listen, s.Upstream, other.Listen, other.Upstream)
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

// storeFault is what a store fault does to a proxy: closed (down: new
// connections closed at once, open ones cut), reset (the same with TCP
// resets), stall (nothing gets through, every call runs into its timeout)
// or latency (every chunk delayed).
type storeFault struct {
	down, reset, stall bool
	latency            time.Duration
}

// storeFaultFor reads a store fault's kind and param.
func storeFaultFor(kind, param string) (storeFault, error) {
	switch kind {
	case FaultStoreDown:
		switch param {
		case "":
			return storeFault{down: true}, nil
		case StoreDownReset:
			return storeFault{reset: true}, nil
		case StoreDownPartition:
			return storeFault{stall: true}, nil
		}
	case FaultStoreSlow:
		if param == StoreSlowStall {
			return storeFault{stall: true}, nil
		}
		d, perr := policy.ParseDuration(param)
		if perr != nil || d <= 0 {
			return storeFault{}, fmt.Errorf("store-slow: param %q is not a latency", param)
		}
		return storeFault{latency: d}, nil
	}
	return storeFault{}, fmt.Errorf("%s cannot be done by a store proxy", kind)
}

// toxic is the Toxiproxy toxic for f; down (no toxic) means the proxy is
// disabled.
func (f storeFault) toxic() (name, typ string, attrs map[string]any) {
	switch {
	case f.reset:
		return toxicReset, "reset_peer", map[string]any{"timeout": 0}
	case f.stall:
		return toxicStall, "timeout", map[string]any{"timeout": 0}
	case f.latency > 0:
		return toxicLatency, "latency", map[string]any{"latency": f.latency.Milliseconds()}
	}
	return "", "", nil
}

// StoreProxy runs store proxies in this process: internal/faultproxy, the
// same proxy the embedded and local environments break their store with.
// Safe for concurrent use; build it with StartStoreProxy and Close it.
type StoreProxy struct {
	mu      sync.Mutex
	proxies []*faultproxy.Proxy
	// on is the fault in effect per kind, to undo on Clear.
	on map[string]storeFault
}

// StartStoreProxy listens on every spec's Listen address.
func StartStoreProxy(specs []ProxySpec) (*StoreProxy, error) {
	if err := CheckProxySpecs(specs); err != nil {
		return nil, fmt.Errorf("store proxy %w", err)
	}
	sp := &StoreProxy{on: map[string]storeFault{}}
	for _, s := range specs {
		p, err := faultproxy.Listen(s.Listen, s.Upstream)
		if err != nil {
			sp.Close()
			return nil, fmt.Errorf("store proxy %s=%s: cannot listen on %s: %w", s.Listen, s.Upstream, s.Listen, err)
		}
		sp.proxies = append(sp.proxies, p)
	}
	return sp, nil
}

// Unserved waits up to within, or until ctx ends, for a client to connect
// through every proxy to its upstream, and returns the listen addresses of
// the proxies none has reached yet. A service pointed at a proxy has had no
// store until the proxy started; a store client whose dials failed backs off
// (go-redis: one retry a second once its pool counts as broken), so the run
// must not begin before it is back, or its first requests fail by the
// service's failure mode with no fault injected. Once every proxy has
// served, it waits for the connections to settle (no new one for
// storeProxyQuiet): a pool that opens its idle connections on reconnecting
// has them before the first burst.
func (sp *StoreProxy) Unserved(ctx context.Context, within time.Duration) []string {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var last int64
	var quietSince time.Time
	for {
		var waiting []string
		var served int64
		for _, p := range sp.proxies {
			n := p.Served()
			if n == 0 {
				waiting = append(waiting, p.Addr())
			}
			served += n
		}
		if len(waiting) == 0 {
			if served != last {
				last, quietSince = served, time.Now()
			} else if time.Since(quietSince) >= storeProxyQuiet {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return waiting
		case <-deadline.C:
			return waiting
		case <-tick.C:
		}
	}
}

// storeProxyQuiet is how long no new store connection must come through
// the proxies before the run starts.
const storeProxyQuiet = 100 * time.Millisecond

// Supports implements FaultInjector.
func (sp *StoreProxy) Supports(kind string) bool {
	return kind == FaultStoreDown || kind == FaultStoreSlow
}

// Inject implements FaultInjector.
func (sp *StoreProxy) Inject(_ context.Context, kind, param string) error {
	f, err := storeFaultFor(kind, param)
	if err != nil {
		return err
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.on[kind] = f
	sp.apply(f, true)
	return nil
}

// apply sets (on) or mends f on every proxy.
func (sp *StoreProxy) apply(f storeFault, on bool) {
	for _, p := range sp.proxies {
		switch {
		case f.down:
			p.SetDown(on)
		case f.reset:
			p.SetReset(on)
		case f.stall:
			p.SetStall(on)
		case f.latency > 0 && on:
			p.SetLatency(f.latency)
		case f.latency > 0:
			p.SetLatency(0)
		}
	}
}

// Clear implements FaultInjector.
func (sp *StoreProxy) Clear(_ context.Context, kind string) error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if f, ok := sp.on[kind]; ok {
		sp.apply(f, false)
		delete(sp.on, kind)
	}
	return nil
}

// Close stops every proxy.
func (sp *StoreProxy) Close() error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	var errs []error
	for _, p := range sp.proxies {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}

// ToxiproxyAPI drives proxies of an existing Toxiproxy server over its
// HTTP API (GET /proxies, POST /proxies/NAME, POST and DELETE
// /proxies/NAME/toxics): four calls, so a few lines of net/http rather
// than Toxiproxy's client and its dependency tree.
type ToxiproxyAPI struct {
	url     string
	client  *http.Client
	proxies []string
	mu      sync.Mutex
	added   map[string]string
	down    bool
}

// ConnectToxiproxy checks that the server at url answers and has every
// named proxy.
func ConnectToxiproxy(url string, names []string) (*ToxiproxyAPI, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("toxiproxy %s: name the proxies to break", url)
	}
	t := &ToxiproxyAPI{url: strings.TrimRight(url, "/"), client: &http.Client{Timeout: 10 * time.Second}, added: map[string]string{}}
	var all map[string]json.RawMessage
	if err := t.call(http.MethodGet, "/proxies", nil, &all); err != nil {
		return nil, fmt.Errorf("toxiproxy %s is unreachable: %w", url, err)
	}
	for _, n := range names {
		if _, ok := all[n]; !ok {
			have := make([]string, 0, len(all))
			for k := range all {
				have = append(have, k)
			}
			sort.Strings(have)
			return nil, fmt.Errorf("toxiproxy %s has no proxy %q (it has: %s)", url, n, strings.Join(have, ", "))
		}
		t.proxies = append(t.proxies, n)
	}
	return t, nil
}

// call sends body (JSON, when not nil) to the API and decodes the answer
// into out (when not nil); a status other than 2xx is an error with the
// server's message.
func (t *ToxiproxyAPI) call(method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, t.url+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// Supports implements FaultInjector.
func (t *ToxiproxyAPI) Supports(kind string) bool {
	return kind == FaultStoreDown || kind == FaultStoreSlow
}

// Inject implements FaultInjector.
func (t *ToxiproxyAPI) Inject(_ context.Context, kind, param string) error {
	f, err := storeFaultFor(kind, param)
	if err != nil {
		return err
	}
	name, typ, attrs := f.toxic()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.proxies {
		if f.down {
			if err := t.call(http.MethodPost, "/proxies/"+url.PathEscape(p), map[string]any{"enabled": false}, nil); err != nil {
				return fmt.Errorf("toxiproxy proxy %s: disable: %w", p, err)
			}
			continue
		}
		for _, stream := range []string{"downstream", "upstream"} {
			toxic := map[string]any{"name": name + "_" + stream, "type": typ, "stream": stream, "toxicity": 1, "attributes": attrs}
			if err := t.call(http.MethodPost, "/proxies/"+url.PathEscape(p)+"/toxics", toxic, nil); err != nil {
				return fmt.Errorf("toxiproxy proxy %s: add %s toxic: %w", p, typ, err)
			}
		}
	}
	if f.down {
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
			if err := t.call(http.MethodPost, "/proxies/"+url.PathEscape(p), map[string]any{"enabled": true}, nil); err != nil {
				return fmt.Errorf("toxiproxy proxy %s: enable: %w", p, err)
			}
		}
		if name, ok := t.added[kind]; ok {
			for _, stream := range []string{"downstream", "upstream"} {
				if err := t.call(http.MethodDelete, "/proxies/"+url.PathEscape(p)+"/toxics/"+url.PathEscape(name+"_"+stream), nil, nil); err != nil {
					return fmt.Errorf("toxiproxy proxy %s: remove toxic: %w", p, err)
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
		return Hook{}, fmt.Errorf("%q: want KIND=COMMAND, e.g. store-down='docker stop redis'", s)
	}
	switch kind {
	case FaultStoreDown, FaultStoreSlow, FaultClockSkew, FaultRulesDown:
	default:
		return Hook{}, fmt.Errorf("%q: unknown fault %q (want store-down, store-slow, clock-skew or rules-down)", s, kind)
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
		return fmt.Errorf("no %s command for %s", action, kind)
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
