package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v3"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/envs/gateway"
	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policy"
)

// honestPolicyFile is where a gateway run writes the policy the gateway
// really enforces.
const honestPolicyFile = "honest-policy.yaml"

// gatewaySetup prepares the run of a gateway limiter (nginx, HAProxy,
// gubernator: catalog entries with Gateway set): the environment that
// starts it, configured from the declared policy in the entry's family (or
// --limiter-policy),
// and the policy the run is judged against (that one, or with --honest the
// gateway's honest policy). It writes the honest policy next to the history
// and notes what the gateway does not keep. ok is false for every other
// limiter.
func gatewaySetup(f *attackFlags, pol *policy.Policy, o *rlverify.AttackOptions) (ok bool, err error) {
	entry, lerr := catalog.Lookup(f.limiter, "")
	if lerr != nil || entry.Gateway == nil {
		if f.honest {
			return false, usageErr("--honest applies to gateway limiters (nginx/…, haproxy/…, gubernator/…), not %s", f.limiter)
		}
		return false, nil
	}
	if f.env != "embedded" {
		return true, usageErr("--limiter %s runs as its own %s; --env %s does not apply", entry.Name, gatewayForm(entry.Gateway), f.env)
	}
	if f.store != "" || f.redisURL != "" || f.regions > 1 {
		return true, usageErr("--limiter %s keeps its state in its own %s: --store, --redis and --regions do not apply", entry.Name, gatewayForm(entry.Gateway))
	}
	declared := pol.WithAlgorithm(entry.Algorithm)
	configured := declared
	if f.limiterPolicy != "" {
		lp, err := loadPolicy(f.limiterPolicy)
		if err != nil {
			return true, err
		}
		o.Notes = append(o.Notes, fmt.Sprintf("the reference limiter enforces %s, not the declared %s", lp.Source, declared.Source))
		configured = lp.WithAlgorithm(entry.Algorithm)
	}
	honest, deviations, err := gateway.Honest(*entry.Gateway, configured)
	if err != nil {
		return true, usageWrap(err)
	}
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return true, runErr(fmt.Errorf("--out: %w", err))
	}
	file := filepath.Join(f.out, honestPolicyFile)
	text, err := yaml.Marshal(honest)
	if err != nil {
		return true, runErr(fmt.Errorf("honest policy: %w", err))
	}
	header := fmt.Sprintf("# What %s really enforces when configured from policy %s (see docs/compare.md).\n", entry.Name, pol.Name)
	if err := os.WriteFile(file, append([]byte(header), text...), 0o644); err != nil {
		return true, runErr(fmt.Errorf("honest policy: %w", err))
	}
	judged := declared
	if f.honest {
		judged = honest
		o.Notes = append(o.Notes, fmt.Sprintf("judged against %s's honest policy (%s), not the declared one", entry.Name, file))
	} else if len(deviations) > 0 {
		o.Notes = append(o.Notes, fmt.Sprintf("the policy %s really enforces is in %s: rlverify check --history %s --policy %s", entry.Name, file, filepath.Join(f.out, "history.jsonl"), file))
	}
	o.Env, o.RecordedEnv = rlverify.EnvGateway, entry.Gateway.Kind
	o.Environment = gateway.Environment{Gateway: *entry.Gateway, KeepConfigs: f.out}
	o.LimiterPolicy, o.JudgedPolicy = configured, judged
	o.Limiter, o.Store = entry.Name, entry.Store
	return true, nil
}

func gatewayForm(g *catalog.Gateway) string {
	if g.Program != "" {
		return "child process"
	}
	return "in-process cluster"
}

// unavailable reports an implementation that cannot run on this machine (a
// gateway whose program is not installed, no Docker): compare skips it.
func unavailable(err error) bool { return errors.Is(err, envs.ErrUnavailable) }
