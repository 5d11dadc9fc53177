package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/envs"
)

// externalFlags say how rlverify reaches around a user's service: faults on
// its store (a store proxy, their Toxiproxy, commands) and what reached its
// downstream (a sink, a JSON counter, a Prometheus metric).
type externalFlags struct {
	storeProxies []string
	toxiproxy    string
	toxiProxies  []string
	onInject     []string
	onClear      []string
	hookTimeout  time.Duration

	sinkURL    string
	jsonURL    string
	jsonTotal  string
	jsonByKey  string
	promURL    string
	promMetric string
	promLabel  string
}

func addExternalFlags(fl *pflag.FlagSet, f *externalFlags) {
	fl.StringArrayVar(&f.storeProxies, "store-proxy", nil, "external env: run a store proxy (Toxiproxy) LISTEN=UPSTREAM and point your service's store at LISTEN; fault phases act on it (repeatable)")
	fl.StringVar(&f.toxiproxy, "toxiproxy", "", "external env: URL of your Toxiproxy server's API; fault phases act on the --toxiproxy-proxy proxies")
	fl.StringArrayVar(&f.toxiProxies, "toxiproxy-proxy", nil, "name of a proxy of --toxiproxy to break (repeatable)")
	fl.StringArrayVar(&f.onInject, "on-inject", nil, "external env: KIND=COMMAND run (sh -c) when a fault of KIND starts, e.g. store-down='docker stop redis' (repeatable)")
	fl.StringArrayVar(&f.onClear, "on-clear", nil, "external env: KIND=COMMAND run when a fault of KIND ends, e.g. store-down='docker start redis' (repeatable)")
	fl.DurationVar(&f.hookTimeout, "hook-timeout", 30*time.Second, "longest a --on-inject or --on-clear command may run")
	fl.StringVar(&f.sinkURL, "sink", "", "external env: URL of the rlverify sink your service forwards admitted requests to")
	fl.StringVar(&f.jsonURL, "downstream-json", "", "external env: URL of a JSON endpoint counting what reached your downstream (with --downstream-total and/or --downstream-by-key)")
	fl.StringVar(&f.jsonTotal, "downstream-total", "", "dotted path of the total count in --downstream-json, e.g. forwarded.total")
	fl.StringVar(&f.jsonByKey, "downstream-by-key", "", "dotted path of the object of key: count in --downstream-json, e.g. forwarded.by_key")
	fl.StringVar(&f.promURL, "downstream-prometheus", "", "external env: URL of a Prometheus text endpoint with a counter of what reached your downstream")
	fl.StringVar(&f.promMetric, "downstream-metric", "", "metric name in --downstream-prometheus")
	fl.StringVar(&f.promLabel, "downstream-label", "api_key", "label of --downstream-metric that carries the key")
}

// any reports whether some external-only flag is set.
func (f *externalFlags) any() bool {
	return len(f.storeProxies) > 0 || f.toxiproxy != "" || len(f.onInject) > 0 || len(f.onClear) > 0 ||
		f.sinkURL != "" || f.jsonURL != "" || f.promURL != ""
}

// environment reads the external environment from the flags; the
// library checks it (envs.External.Validate: loopback consent, Toxiproxy
// proxies).
func (f *externalFlags) environment() (envs.External, error) {
	var x envs.External
	for _, s := range f.storeProxies {
		p, err := envs.ParseProxySpec(s)
		if err != nil {
			return x, fmt.Errorf("--store-proxy %w", err)
		}
		x.StoreProxies = append(x.StoreProxies, p)
	}
	x.Toxiproxy, x.ToxiproxyProxies = f.toxiproxy, f.toxiProxies
	for _, s := range f.onInject {
		h, err := envs.ParseHook("inject", s)
		if err != nil {
			return x, fmt.Errorf("--on-inject %w", err)
		}
		x.Hooks = append(x.Hooks, h)
	}
	injects := map[string]bool{}
	for _, h := range x.Hooks {
		injects[h.Kind] = true
	}
	for _, s := range f.onClear {
		h, err := envs.ParseHook("clear", s)
		if err != nil {
			return x, fmt.Errorf("--on-clear %w", err)
		}
		if !injects[h.Kind] {
			return x, fmt.Errorf("--on-clear %s has no --on-inject %s=… to undo", h.Kind, h.Kind)
		}
		x.Hooks = append(x.Hooks, h)
	}
	if f.hookTimeout <= 0 {
		return x, fmt.Errorf("--hook-timeout %s: want a positive duration", f.hookTimeout)
	}
	x.HookTimeout = f.hookTimeout
	sources := 0
	if f.sinkURL != "" {
		x.Downstream = &envs.RemoteSink{URL: f.sinkURL}
		sources++
	}
	if f.jsonURL != "" {
		if f.jsonTotal == "" && f.jsonByKey == "" {
			return x, fmt.Errorf("--downstream-json %s: give --downstream-by-key PATH (per key) and/or --downstream-total PATH", f.jsonURL)
		}
		x.Downstream = &envs.JSONCounter{URL: f.jsonURL, TotalPath: f.jsonTotal, ByKeyPath: f.jsonByKey}
		sources++
	} else if f.jsonTotal != "" || f.jsonByKey != "" {
		return x, fmt.Errorf("--downstream-total and --downstream-by-key need --downstream-json URL")
	}
	if f.promURL != "" {
		if f.promMetric == "" || f.promLabel == "" {
			return x, fmt.Errorf("--downstream-prometheus %s: give --downstream-metric NAME (and --downstream-label, default api_key)", f.promURL)
		}
		x.Downstream = &envs.PromCounter{URL: f.promURL, Metric: f.promMetric, Label: f.promLabel}
		sources++
	} else if f.promMetric != "" {
		return x, fmt.Errorf("--downstream-metric needs --downstream-prometheus URL")
	}
	if sources > 1 {
		return x, fmt.Errorf("give one downstream source: --sink, --downstream-json or --downstream-prometheus")
	}
	return x, nil
}

// checkExternalFaults says, before anything starts, how to inject each
// fault a plan needs on a service rlverify did not start.
func checkExternalFaults(plan *attacks.Plan, x envs.External) error {
	proxy := len(x.StoreProxies) > 0 || x.Toxiproxy != ""
	for i := range plan.Phases {
		ph := &plan.Phases[i]
		if ph.Kind != attacks.KindFault || ph.Action != "inject" || x.CanInject(ph.Fault) {
			continue
		}
		switch ph.Fault {
		case envs.FaultStoreDown, envs.FaultStoreSlow:
			if !proxy {
				return fmt.Errorf("plan %s injects %s into your service's store: run a store proxy (--store-proxy LISTEN=UPSTREAM, and point your service's store at LISTEN), drive your Toxiproxy (--toxiproxy URL --toxiproxy-proxy NAME) or give commands (--on-inject %s='…' --on-clear %s='…')", plan.Name, ph.Fault, ph.Fault, ph.Fault)
			}
		default:
			return fmt.Errorf("plan %s injects %s, which rlverify can do to your service only through commands: --on-inject %s='…' --on-clear %s='…'", plan.Name, ph.Fault, ph.Fault, ph.Fault)
		}
	}
	return nil
}
