package envs

import (
	"fmt"
	"time"
)

// ExternalSettings are the external environment as text, as a user writes
// it (the command's flags map onto these fields one to one): Environment
// reads and checks them into an External. Errors are *FieldError naming
// the External field at fault.
type ExternalSettings struct {
	// StoreProxies are LISTEN=UPSTREAM specs (ParseProxySpec).
	StoreProxies []string
	// Toxiproxy is a Toxiproxy API URL, ToxiproxyProxies its proxies.
	Toxiproxy        string
	ToxiproxyProxies []string
	// OnInject and OnClear are KIND=COMMAND hooks (ParseHook); a clear
	// needs the inject it undoes. HookTimeout bounds each command.
	OnInject, OnClear []string
	HookTimeout       time.Duration
	// One downstream source at most: the URL of an rlverify sink, a JSON
	// counter (with the dotted paths of its total and/or its per-key
	// object) or a Prometheus metric (with the label carrying the key).
	Sink                  string
	JSONURL               string
	JSONTotal, JSONByKey  string
	PromURL               string
	PromMetric, PromLabel string
}

// Any reports whether some setting is given: they apply only to a service
// rlverify did not start.
func (s ExternalSettings) Any() bool {
	return len(s.StoreProxies) > 0 || s.Toxiproxy != "" || len(s.OnInject) > 0 || len(s.OnClear) > 0 ||
		s.Sink != "" || s.JSONURL != "" || s.PromURL != ""
}

// Environment reads s into an External (errors name the field of s, and
// ToxiproxyURL for Toxiproxy); External.Validate then checks what
// it may touch (loopback consent).
func (s ExternalSettings) Environment() (External, error) {
	var x External
	for _, p := range s.StoreProxies {
		spec, err := ParseProxySpec(p)
		if err != nil {
			return x, &FieldError{"StoreProxies", err}
		}
		x.StoreProxies = append(x.StoreProxies, spec)
	}
	x.Toxiproxy, x.ToxiproxyProxies = s.Toxiproxy, s.ToxiproxyProxies
	injects := map[string]bool{}
	for _, h := range s.OnInject {
		hook, err := ParseHook("inject", h)
		if err != nil {
			return x, &FieldError{"OnInject", err}
		}
		injects[hook.Kind] = true
		x.Hooks = append(x.Hooks, hook)
	}
	for _, h := range s.OnClear {
		hook, err := ParseHook("clear", h)
		if err != nil {
			return x, &FieldError{"OnClear", err}
		}
		if !injects[hook.Kind] {
			return x, &FieldError{"OnClear", fmt.Errorf("%s has no OnInject %s=… to undo", hook.Kind, hook.Kind)}
		}
		x.Hooks = append(x.Hooks, hook)
	}
	if s.HookTimeout <= 0 {
		return x, &FieldError{"HookTimeout", fmt.Errorf("%s: want a positive duration", s.HookTimeout)}
	}
	x.HookTimeout = s.HookTimeout
	sources := 0
	if s.Sink != "" {
		x.Downstream = &RemoteSink{URL: s.Sink}
		sources++
	}
	switch {
	case s.JSONURL != "" && s.JSONTotal == "" && s.JSONByKey == "":
		return x, &FieldError{"JSONURL", fmt.Errorf("%s: give JSONByKey PATH (per key) and/or JSONTotal PATH", s.JSONURL)}
	case s.JSONURL != "":
		x.Downstream = &JSONCounter{URL: s.JSONURL, TotalPath: s.JSONTotal, ByKeyPath: s.JSONByKey}
		sources++
	case s.JSONTotal != "" || s.JSONByKey != "":
		return x, &FieldError{"JSONTotal", fmt.Errorf("and JSONByKey need JSONURL URL")}
	}
	switch {
	case s.PromURL != "" && (s.PromMetric == "" || s.PromLabel == ""):
		return x, &FieldError{"PromURL", fmt.Errorf("%s: give PromMetric NAME (and PromLabel)", s.PromURL)}
	case s.PromURL != "":
		x.Downstream = &PromCounter{URL: s.PromURL, Metric: s.PromMetric, Label: s.PromLabel}
		sources++
	case s.PromMetric != "":
		return x, &FieldError{"PromMetric", fmt.Errorf("needs PromURL URL")}
	}
	if sources > 1 {
		return x, &FieldError{"Downstream", fmt.Errorf("give one source: Sink, JSONURL or PromURL")}
	}
	return x, nil
}

// CheckFaults says, before anything starts, how to inject each fault kind
// of kinds (the plan's injected faults) that x cannot; plan names the plan.
func (x External) CheckFaults(plan string, kinds []string) error {
	proxy := len(x.StoreProxies) > 0 || x.Toxiproxy != ""
	for _, k := range kinds {
		if x.CanInject(k) {
			continue
		}
		if (k == FaultStoreDown || k == FaultStoreSlow) && !proxy {
			return &FieldError{"StoreProxies", fmt.Errorf("is empty: plan %s injects %s into your service's store: run a store proxy (StoreProxies LISTEN=UPSTREAM, and point your service's store at LISTEN), drive your Toxiproxy (ToxiproxyURL URL, ToxiproxyProxies NAME) or give commands (OnInject %s='…' OnClear %s='…')", plan, k, k, k)}
		}
		if k != FaultStoreDown && k != FaultStoreSlow {
			return &FieldError{"OnInject", fmt.Errorf("has no %s: plan %s injects %s, which rlverify can do to your service only through commands: OnInject %s='…' OnClear %s='…'", k, plan, k, k, k)}
		}
	}
	return nil
}
