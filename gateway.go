package rlverify

import (
	"fmt"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v3"

	"github.com/rlverify/rlverify/envs/gateway"
	"github.com/rlverify/rlverify/limiters/catalog"
)

// HonestPolicyFile is the file, in the run's folder (AttackOptions.Dir), of
// the policy a gateway limiter really enforces.
const HonestPolicyFile = "honest-policy.yaml"

// gatewayEntry is the catalog entry of a gateway limiter (nginx, HAProxy,
// gubernator, envoyproxy/ratelimit: entries with Gateway set), or nil for
// any other.
func gatewayEntry(limiter string) *catalog.Entry {
	e, err := catalog.Lookup(limiter, "")
	if err != nil || e.Gateway == nil {
		return nil
	}
	return &e
}

// checkGateway is the rule of a gateway limiter: it runs as its own
// process or cluster, so only the embedded environment starts it, and it
// keeps its state itself. Honest applies to gateways only.
func (o AttackOptions) checkGateway(env string) error {
	entry := gatewayEntry(o.Limiter)
	if entry == nil || env == EnvExternal || env == EnvGateway {
		if o.Honest && env != EnvGateway {
			return fieldErr("Honest", "applies to gateway limiters (nginx/…, haproxy/…, gubernator/…), not %s", o.limiter())
		}
		return nil
	}
	if env != EnvEmbedded {
		return fieldErr("Env", "%s does not apply: limiter %s runs as its own %s", env, entry.Name, gatewayForm(entry.Gateway))
	}
	if o.Store != "" || o.RedisURL != "" || o.Regions > 1 {
		return fieldErr("Limiter", "%s keeps its state in its own %s: Store, RedisURL and Regions do not apply", entry.Name, gatewayForm(entry.Gateway))
	}
	return nil
}

func (o AttackOptions) limiter() string {
	if o.Limiter == "" {
		return DefaultLimiter
	}
	return o.Limiter
}

func gatewayForm(g *catalog.Gateway) string {
	if g.Program != "" {
		return "child process"
	}
	return "in-process cluster"
}

// gatewayRun is what a gateway run writes into its folder.
type gatewayRun struct {
	name       string
	honest     []byte // the honest policy, as YAML with a header
	deviations bool   // the honest policy differs from the declared one
}

// asGateway turns o, whose limiter is entry (a gateway), into the gateway
// environment's options: configured from the declared policy in the entry's
// family (or LimiterPolicy), judged against that one or, with Honest, the
// gateway's honest policy, which Run writes into the run's folder.
func (p *Prepared) asGateway(entry *catalog.Entry) error {
	o := &p.o
	declared := p.declared.WithAlgorithm(entry.Algorithm)
	configured := declared
	if o.LimiterPolicy != nil {
		p.run.Notes = append(p.run.Notes, fmt.Sprintf("the reference limiter enforces %s, not the declared %s", o.LimiterPolicy.Source, declared.Source))
		configured = o.LimiterPolicy.WithAlgorithm(entry.Algorithm)
	}
	honest, deviations, err := gateway.Honest(*entry.Gateway, configured)
	if err != nil {
		return optionWrap(err)
	}
	text, err := yaml.Marshal(honest)
	if err != nil {
		return fmt.Errorf("honest policy: %w", err)
	}
	header := fmt.Sprintf("# What %s really enforces when configured from policy %s (see docs/compare.md).\n", entry.Name, declared.Name)
	p.gw = &gatewayRun{name: entry.Name, honest: append([]byte(header), text...), deviations: len(deviations) > 0}
	judged := declared
	if honest.Service != nil {
		// A rate-limit service is called with the descriptors its
		// generated configuration answers, whatever the declared
		// policy's own ratelimit_service says.
		judged = declared.Clone()
		judged.Service = honest.Service
		configured = configured.Clone()
		configured.Service = honest.Service
	}
	if o.Honest {
		judged = honest
	}
	o.Env, o.RecordedEnv = EnvGateway, entry.Gateway.Kind
	o.Environment = gateway.Environment{Gateway: *entry.Gateway}
	o.LimiterPolicy, o.JudgedPolicy = configured, judged
	o.Limiter, o.Store = entry.Name, entry.Store
	return nil
}

// placeGateway writes the honest policy into the run's folder, has the
// generated configurations kept there and says where they are.
func (p *Prepared) placeGateway(histFile string) error {
	g, dir := p.gw, p.Dir
	if dir == "" && p.HistoryFile != "" {
		dir = filepath.Dir(p.HistoryFile)
	}
	if g == nil || dir == "" {
		return nil
	}
	file := filepath.Join(dir, HonestPolicyFile)
	if err := os.WriteFile(file, g.honest, 0o644); err != nil {
		return fmt.Errorf("honest policy: %w", err)
	}
	if e, ok := p.Env.(gateway.Environment); ok {
		e.KeepConfigs = dir
		p.Env = e
	}
	switch {
	case p.o.Honest:
		p.Notes = append(p.Notes, fmt.Sprintf("judged against %s's honest policy (%s), not the declared one", g.name, file))
	case g.deviations:
		p.Notes = append(p.Notes, fmt.Sprintf("the policy %s really enforces is in %s: rlverify check judges the history %s against it", g.name, file, histFile))
	}
	return nil
}
