package rlverify

import (
	"fmt"
	"strings"

	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policy"
)

// envKind is one environment as the library prepares it: the rules of the
// options that apply to it (validate, after the rules every environment
// shares) and what it makes of a run (prepare: the limiter it starts, the
// policy the run is judged against, the envs.Environment Run starts).
// envKinds holds one per Env* name, so a new environment is a type of
// envs/ (the one that starts it), a value here and a row of the command's
// table of environments.
type envKind interface {
	validate(o AttackOptions) error
	prepare(p *Prepared, pol *policy.Policy) error
}

var envKinds = map[string]envKind{
	EnvEmbedded: embeddedEnv{}, EnvLocal: localEnv{}, EnvDocker: dockerEnv{},
	EnvExternal: externalEnv{}, EnvGateway: gatewayEnv{},
}

// kindOf is env's kind, or the error naming the environments there are.
func kindOf(env string) (envKind, error) {
	if k, ok := envKinds[env]; ok {
		return k, nil
	}
	return nil, fieldErr("Env", "%q: want embedded, local, docker, external or gateway", env)
}

// regions is the regions of a run of more than one, else nil.
func (p *Prepared) regions() *envs.RegionSpec {
	if p.o.Regions <= 1 {
		return nil
	}
	return &envs.RegionSpec{Regions: p.o.Regions, Mode: p.o.RegionMode, Sync: p.o.RegionSync, Latency: p.o.RegionLatency}
}

// embeddedEnv: the reference limiter in this process, its store in memory or
// in Redis (RedisURL, else a redis-server child).
type embeddedEnv struct{}

func (embeddedEnv) validate(AttackOptions) error { return nil }

func (embeddedEnv) prepare(p *Prepared, pol *policy.Policy) error {
	o := p.o
	store := o.Store
	if store == "" && (o.Plan.NeedsRedis() || o.Regions > 1) {
		store = catalog.Redis
	}
	p.spec.Regions = p.regions()
	entry, err := catalog.Lookup(o.Limiter, store)
	if err != nil && o.Store == "" && o.Regions <= 1 {
		// The plan wants shared state but this limiter keeps its state
		// in memory only: run it as deployed, each instance on its own.
		if e2, err2 := catalog.Lookup(o.Limiter, catalog.Memory); err2 == nil {
			entry, err = e2, nil
			p.run.Notes = append(p.run.Notes, fmt.Sprintf("%s has no shared store: each instance keeps its own state in memory", entry.Name))
		}
	}
	if err != nil {
		return optionWrap(err)
	}
	if o.RedisURL != "" && entry.Store != catalog.Redis {
		// It would be silently unused: the user believes the run
		// exercised their Redis.
		return fieldErr("RedisURL", "%s does not apply: %s keeps its state in memory in this run (store %s); give Store redis to use that Redis", o.RedisURL, entry.Name, entry.Store)
	}
	p.reference(entry, pol, entry.Store)
	p.Env = envs.Embedded{}
	return nil
}

// localEnv: the reference service as child processes of this one, over
// redis-server children (a Redis Cluster with RedisCluster).
type localEnv struct{}

func (localEnv) validate(o AttackOptions) error {
	if o.Regions > 1 {
		return fieldErr("Regions", "%d: regions run on the embedded and docker environments", o.Regions)
	}
	if o.RedisURL != "" {
		return fieldErr("Env", "local starts its own redis-server processes: RedisURL %s does not apply (use Env embedded, Store redis and RedisURL)", o.RedisURL)
	}
	return nil
}

func (localEnv) prepare(p *Prepared, pol *policy.Policy) error {
	if err := p.redisReference(pol); err != nil {
		return err
	}
	p.Env = envs.Local{Cluster: p.o.RedisCluster}
	return nil
}

// redisReference is the reference limiter over Redis, as the local and
// docker environments run it.
func (p *Prepared) redisReference(pol *policy.Policy) error {
	entry, err := catalog.Lookup(p.o.Limiter, catalog.Redis)
	if err != nil {
		return optionWrap(err)
	}
	p.reference(entry, pol, catalog.Redis)
	p.spec.RedisCluster = p.o.RedisCluster
	p.spec.Regions = p.regions()
	return nil
}

// dockerEnv: the reference service in containers, started by the caller's
// Environment (envs/docker).
type dockerEnv struct{}

func (dockerEnv) validate(o AttackOptions) error {
	if o.RedisURL != "" || o.RedisCluster > 0 {
		return fieldErr("RedisURL", "and RedisCluster do not apply: the docker environment starts its own Redis container")
	}
	if o.Environment == nil {
		return fieldErr("Environment", "is required by the docker environment (envs/docker: docker.Docker{})")
	}
	return nil
}

func (dockerEnv) prepare(p *Prepared, pol *policy.Policy) error {
	if err := p.redisReference(pol); err != nil {
		return err
	}
	p.Env = p.o.Environment
	return nil
}

// gatewayEnv: a gateway limiter (nginx, HAProxy, gubernator) with its own
// policy, limiter and store, as the caller's Environment (envs/gateway)
// configures it.
type gatewayEnv struct{}

func (gatewayEnv) validate(o AttackOptions) error {
	if o.Environment == nil {
		return fieldErr("Environment", "is required by the gateway environment (envs/gateway)")
	}
	return nil
}

func (gatewayEnv) prepare(p *Prepared, pol *policy.Policy) error {
	o := p.o
	p.spec.Policy, p.spec.Limiter, p.spec.Store = o.LimiterPolicy, o.Limiter, o.Store
	if p.spec.Policy == nil {
		p.spec.Policy = pol
	}
	if o.JudgedPolicy != nil {
		p.declared = o.JudgedPolicy
	}
	p.run.Limiter, p.run.Target = o.Limiter, o.Limiter
	p.Env = o.Environment
	return nil
}

// externalEnv: a service rlverify did not start (Targets, or Handler served
// on loopback), judged against the policy its owner declares.
type externalEnv struct{}

func (externalEnv) validate(o AttackOptions) error {
	if o.RedisURL != "" {
		return fieldErr("RedisURL", "%s does not apply to Env external: your service uses its own store (to break it, see StoreProxies)", o.RedisURL)
	}
	if o.LimiterPolicy != nil {
		return fieldErr("LimiterPolicy", "applies to the limiters rlverify starts, not to your own service")
	}
	if o.Handler == nil {
		if len(o.Targets) == 0 {
			return fieldErr("Targets", "is empty: the external environment needs at least one target URL")
		}
		if err := CheckTargets(o.Targets, o.AllowRemote); err != nil {
			return err
		}
		grpc, err := serviceTargets(o.Targets)
		if err != nil {
			return err
		}
		if grpc && (o.Request.Method != "" || o.Request.Path != "" || len(o.Request.Headers) > 0 || o.Request.Body != "") {
			return fieldErr("Request", "method, path, headers and body do not apply to a rate-limit service (grpc://): each call carries the policy's domain and descriptor")
		}
		if grpc && o.Policy != nil && o.Policy.Service == nil {
			return fieldErr("Policy", "%s declares no ratelimit_service: a grpc:// target is an Envoy rate-limit service, and its calls need the domain and the descriptor entries (e.g. ratelimit_service: {domain: api, descriptors: [{key: tenant, value: \"{key}\"}]})", o.Policy.Source)
		}
	}
	x, _ := o.Environment.(envs.External)
	if err := x.Validate(o.AllowRemote); err != nil {
		return optionWrap(err)
	}
	if err := x.CheckFaults(o.Plan.Name, o.Plan.InjectedFaults()); err != nil {
		return optionWrap(err)
	}
	return requireDeclaredPolicy(o)
}

func (externalEnv) prepare(p *Prepared, pol *policy.Policy) error {
	o := p.o
	if o.Handler == nil {
		p.run.Target = strings.Join(o.Targets, " ")
	}
	p.spec.Policy, p.spec.Targets = pol, o.Targets
	p.defPath = "" // the target URL's own path, else /
	p.Env = o.Environment
	if p.Env == nil {
		p.Env = envs.External{}
	}
	return nil
}
