package envs

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rlverify/rlverify/faults"
	"github.com/rlverify/rlverify/internal/faultproxy"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/service"
)

// localFaults injects faults into an embedded or local stack: store faults
// through the proxy in front of Redis, clock skew through the instances'
// clocks.
type localFaults struct {
	proxy  *faultproxy.Proxy
	rules  *service.RuleSource
	clocks []*service.SkewClock
	// pol and services take a declared limit change (limit-change).
	pol      *policy.Policy
	services []*service.Service
}

// changeLimits applies the policy's change name to every instance, or
// (name "") restores the declared limits of every changed tier.
func (f *localFaults) changeLimits(name string) error {
	if name != "" {
		if _, ok := f.pol.ChangeNamed(name); !ok {
			var names []string
			for _, c := range f.pol.Changes {
				names = append(names, c.Name)
			}
			return fmt.Errorf("limit-change: the policy declares no change %q (it declares: %s)", name, strings.Join(names, ", "))
		}
	}
	for i, s := range f.services {
		if err := s.ApplyChange(name); err != nil {
			return fmt.Errorf("limit-change: instance %d: %w", i, err)
		}
	}
	return nil
}

// Supports implements FaultInjector.
func (f *localFaults) Supports(kind string) bool {
	switch kind {
	case FaultStoreDown, FaultStoreSlow:
		return f.proxy != nil
	case FaultClockSkew:
		return len(f.clocks) > 0
	case FaultRulesDown:
		return f.rules != nil
	case faults.LimitChange:
		return f.pol != nil && len(f.pol.Changes) > 0 && len(f.services) > 0
	}
	return false
}

// Inject implements FaultInjector.
func (f *localFaults) Inject(_ context.Context, kind, param string) error {
	if !f.Supports(kind) {
		if kind == FaultRulesDown {
			return fmt.Errorf("%s: this stack has no rule source to break", kind)
		}
		if kind == faults.LimitChange {
			return fmt.Errorf("%s: the policy declares no changes (changes:) to apply", kind)
		}
		return fmt.Errorf("%s faults need the redis store (Store: redis)", kind)
	}
	switch kind {
	case FaultRulesDown:
		f.rules.SetDown(true)
	case FaultStoreDown:
		switch param {
		case "":
			f.proxy.SetDown(true)
		case StoreDownReset:
			f.proxy.SetReset(true)
		case StoreDownPartition:
			// A proxy cannot drop SYNs: it holds every connection open
			// and passes nothing, which the client sees the same way.
			f.proxy.SetStall(true)
		default:
			return fmt.Errorf("store-down: param %q: want none, %q (TCP resets) or %q", param, StoreDownReset, StoreDownPartition)
		}
	case FaultStoreSlow:
		if param == StoreSlowStall {
			f.proxy.SetStall(true)
			return nil
		}
		d, err := policy.ParseDuration(param)
		if err != nil || d <= 0 {
			return fmt.Errorf("store-slow: param %q: want a latency such as 200ms, or %q", param, StoreSlowStall)
		}
		f.proxy.SetLatency(d)
	case faults.LimitChange:
		return f.changeLimits(strings.TrimSpace(param))
	case FaultClockSkew:
		skews, err := ParseSkews(param, len(f.clocks))
		if err != nil {
			return err
		}
		for i, c := range f.clocks {
			c.Shift(skews[i])
		}
	}
	return nil
}

// Clear implements FaultInjector.
func (f *localFaults) Clear(_ context.Context, kind string) error {
	switch kind {
	case FaultRulesDown:
		if f.rules != nil {
			f.rules.SetDown(false)
		}
	case FaultStoreDown:
		if f.proxy != nil {
			f.proxy.SetDown(false)
			f.proxy.SetReset(false)
			f.proxy.SetStall(false)
		}
	case FaultStoreSlow:
		if f.proxy != nil {
			f.proxy.SetLatency(0)
			f.proxy.SetStall(false)
		}
	case FaultClockSkew:
		for _, c := range f.clocks {
			c.Reset()
		}
	case faults.LimitChange:
		if f.pol != nil && len(f.services) > 0 {
			return f.changeLimits("")
		}
	}
	return nil
}

// ParseSkews reads a clock-skew parameter for n instances: "D" (e.g. 2s or
// +2s) gives even instances +D and odd ones −D, so instances disagree by
// 2D; "+2s@1" or "1=+2s" (comma-separated for several) set single
// instances, the rest keep 0.
func ParseSkews(param string, n int) ([]time.Duration, error) {
	out := make([]time.Duration, n)
	param = strings.TrimSpace(param)
	if param == "" {
		return nil, fmt.Errorf("clock-skew: param needs a skew such as 2s, +2s@1 or 0=+2s,1=-2s")
	}
	if strings.Contains(param, "@") {
		var parts []string
		for _, p := range strings.Split(param, ",") {
			d, inst, ok := strings.Cut(strings.TrimSpace(p), "@")
			if !ok {
				return nil, fmt.Errorf("clock-skew: %q: mix of D@i and other forms", param)
			}
			parts = append(parts, inst+"="+d)
		}
		param = strings.Join(parts, ",")
	}
	if !strings.Contains(param, "=") {
		d, err := policy.ParseDuration(strings.TrimPrefix(param, "+"))
		if err != nil {
			return nil, fmt.Errorf("clock-skew: %q: %w", param, err)
		}
		for i := range out {
			if i%2 == 0 {
				out[i] = d
			} else {
				out[i] = -d
			}
		}
		return out, nil
	}
	for _, part := range strings.Split(param, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		var i int
		if _, err := fmt.Sscanf(k, "%d", &i); err != nil || i < 0 || i >= n {
			return nil, fmt.Errorf("clock-skew: %q: instance %q is not 0 … %d", param, k, n-1)
		}
		neg := strings.HasPrefix(v, "-")
		d, err := policy.ParseDuration(strings.TrimLeft(v, "+-"))
		if err != nil {
			return nil, fmt.Errorf("clock-skew: %q: %w", param, err)
		}
		if neg {
			d = -d
		}
		out[i] = d
	}
	return out, nil
}
