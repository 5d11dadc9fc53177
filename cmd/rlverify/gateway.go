package main

import (
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
	text, err := yaml.Marshal(honest)
	if err != nil {
		return true, runErr(fmt.Errorf("honest policy: %w", err))
	}
	header := fmt.Sprintf("# What %s really enforces when configured from policy %s (see docs/compare.md).\n", entry.Name, pol.Name)
	// The run's folder is chosen after the options: placeGateway writes
	// the honest policy and the generated configurations into it.
	f.gw = &gatewayRun{name: entry.Name, honest: append([]byte(header), text...), deviations: len(deviations) > 0}
	judged := declared
	if f.honest {
		judged = honest
	}
	o.Env, o.RecordedEnv = rlverify.EnvGateway, entry.Gateway.Kind
	o.Environment = gateway.Environment{Gateway: *entry.Gateway}
	o.LimiterPolicy, o.JudgedPolicy = configured, judged
	o.Limiter, o.Store = entry.Name, entry.Store
	return true, nil
}

// gatewayRun is what a gateway run writes beside its history.
type gatewayRun struct {
	name       string
	honest     []byte // the honest policy, as YAML with a header
	deviations bool   // the honest policy differs from the declared one
}

// placeGateway writes the honest policy into the run's folder dir, has the
// generated configurations kept there (in *env) and says where they are
// (in *notes): an attack's prepared run, or an audit plan's options.
func (f *attackFlags) placeGateway(dir string, env *envs.Environment, notes *[]string) error {
	g := f.gw
	file := filepath.Join(dir, honestPolicyFile)
	if err := os.WriteFile(file, g.honest, 0o644); err != nil {
		return runErr(fmt.Errorf("honest policy: %w", err))
	}
	if e, ok := (*env).(gateway.Environment); ok {
		e.KeepConfigs = dir
		*env = e
	}
	switch {
	case f.honest:
		*notes = append(*notes, fmt.Sprintf("judged against %s's honest policy (%s), not the declared one", g.name, file))
	case g.deviations:
		*notes = append(*notes, fmt.Sprintf("the policy %s really enforces is in %s: rlverify check --history %s --policy %s", g.name, file, f.historyFile(dir), file))
	}
	return nil
}

func gatewayForm(g *catalog.Gateway) string {
	if g.Program != "" {
		return "child process"
	}
	return "in-process cluster"
}
