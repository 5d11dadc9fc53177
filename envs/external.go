package envs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// StoreProxySettle bounds the wait, after the store proxies start, for the
// service's store client to connect through them (StoreProxy.Unserved).
const StoreProxySettle = 2 * time.Second

// External is the user's own running instances. Nothing of theirs is
// started: Start checks that every instance accepts connections, starts the
// store proxies rlverify runs for them, connects to their Toxiproxy, and
// wires their fault hooks and downstream source.
type External struct {
	// Downstream reads what reached their downstream (a sink, a JSON
	// counter, a Prometheus metric); nil when not observed.
	Downstream SinkReader
	// StoreProxies are fault proxies (internal/faultproxy) to run in this
	// process: the user points their service's store address at each
	// Listen.
	StoreProxies []ProxySpec
	// Running, when set, are StoreProxies already started by the caller
	// for several attacks (an audit keeps them up between its plans, so the
	// service never sees its store vanish between two plans): Start uses
	// them and leaves them running.
	Running *StoreProxy
	// Toxiproxy is the API URL of an existing Toxiproxy server, and
	// ToxiproxyProxies the proxies of it to break.
	Toxiproxy        string
	ToxiproxyProxies []string
	// Hooks are commands run at faults' starts and ends, within
	// HookTimeout.
	Hooks       []Hook
	HookTimeout time.Duration
}

// Name implements Environment.
func (External) Name() string { return "external" }

// CanInject reports whether x can inject kind: a store fault through a
// store proxy or Toxiproxy, any kind through an inject hook.
func (x External) CanInject(kind string) bool {
	for _, h := range x.Hooks {
		if h.Action == "inject" && h.Kind == kind {
			return true
		}
	}
	return (kind == FaultStoreDown || kind == FaultStoreSlow) && (len(x.StoreProxies) > 0 || x.Toxiproxy != "")
}

// Start implements Environment.
func (x External) Start(ctx context.Context, spec Spec) (*Stack, error) {
	if len(spec.Targets) == 0 {
		return nil, errors.New("external: no target given")
	}
	st := &Stack{Env: "external", StoreDesc: "the target's own"}
	ok := false
	defer func() {
		if !ok {
			_ = st.Close()
		}
	}()
	for _, raw := range spec.Targets {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("external: target %q is not a URL", raw)
		}
		host := u.Host
		if u.Port() == "" {
			if u.Scheme == "https" {
				host = net.JoinHostPort(u.Hostname(), "443")
			} else {
				host = net.JoinHostPort(u.Hostname(), "80")
			}
		}
		d := net.Dialer{Timeout: 3 * time.Second}
		conn, err := d.DialContext(ctx, "tcp", host)
		if err != nil {
			return nil, fmt.Errorf("external: target %s is unreachable: %w", raw, Unreachable(err))
		}
		conn.Close()
		st.Instances = append(st.Instances, trimSlash(raw))
	}
	var router Router
	if len(x.Hooks) > 0 {
		hooks := NewHooks(x.Hooks, x.HookTimeout)
		hooks.Log = spec.Log
		router = append(router, hooks)
		for _, h := range x.Hooks {
			st.Notes = append(st.Notes, fmt.Sprintf("fault hook: on %s %s run %q", h.Action, h.Kind, h.Command))
		}
	}
	if len(x.StoreProxies) > 0 {
		sp := x.Running
		if sp == nil {
			var err error
			if sp, err = StartStoreProxy(x.StoreProxies); err != nil {
				return nil, err
			}
			st.OnClose(sp.Close)
		}
		router = append(router, sp)
		for _, p := range x.StoreProxies {
			st.Notes = append(st.Notes, fmt.Sprintf("store proxy on %s in front of %s: store faults act on it", p.Listen, p.Upstream))
		}
		start := time.Now()
		if idle := sp.Unserved(ctx, StoreProxySettle); len(idle) > 0 {
			st.Notes = append(st.Notes, fmt.Sprintf("no store connection came through the store proxy on %s within %s: the service may connect on demand, or its store client may still be backing off (its first requests then fail by its failure mode)", strings.Join(idle, ", "), StoreProxySettle))
		} else if d := time.Since(start); d >= 10*time.Millisecond {
			st.Notes = append(st.Notes, fmt.Sprintf("waited %s for the service's store connection through the store proxy before the first request", d.Round(time.Millisecond)))
		}
	}
	if x.Toxiproxy != "" {
		tp, err := ConnectToxiproxy(x.Toxiproxy, x.ToxiproxyProxies)
		if err != nil {
			return nil, err
		}
		router = append(router, tp)
		st.Notes = append(st.Notes, fmt.Sprintf("store faults through Toxiproxy %s, proxies %v", x.Toxiproxy, x.ToxiproxyProxies))
	}
	if len(router) > 0 {
		st.Faults = router
	}
	if x.Downstream != nil {
		st.Sink = x.Downstream
		st.Notes = append(st.Notes, "downstream arrivals read from "+x.Downstream.Describe())
	}
	ok = true
	return st, nil
}

func trimSlash(s string) string {
	for len(s) > 0 && s[len(s)-1] == '/' {
		s = s[:len(s)-1]
	}
	return s
}
