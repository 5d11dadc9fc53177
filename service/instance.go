package service

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlverify/rlverify/limiters"
	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policy"
)

// InstanceOptions configures one reference limiter instance.
type InstanceOptions struct {
	// Index is the instance's position in its stack.
	Index int
	// Name identifies it in responses (X-RL-Instance).
	Name string
	// Now is the base clock (time.Now when nil); Skew its configured offset.
	Now  func() time.Time
	Skew time.Duration
	// Env.Redis is the store client for redis entries.
	Env catalog.Env
	// Downstream receives admitted requests (may be nil).
	Downstream Forwarder
	// Rules is the rule source the instance falls back from (may be nil:
	// the rules cannot then be taken away).
	Rules *RuleSource
	// Logf receives the store circuit breaker's transitions (may be nil).
	Logf func(format string, args ...any)
}

// Instance is one reference service with the clock a clock-skew fault
// moves.
type Instance struct {
	Service *Service
	Clock   *SkewClock
}

// NewInstance builds the reference service for entry under pol: limiters
// per tier (guarded by the policy's failure mode on Redis), the global guard
// when the policy declares one, and an instance clock starting at o.Skew.
// Every environment builds its instances here, so each runs the same
// service.
func NewInstance(pol *policy.Policy, entry catalog.Entry, o InstanceOptions) (*Instance, error) {
	clk := NewSkewClock(o.Now, o.Skew)
	env := o.Env
	env.Instance, env.Now = o.Index, clk.Now
	// The clock already carries the skew: faulty/instance-clock must not
	// add it twice.
	env.Skew = 0
	metrics := NewMetrics()
	metrics.Logf = o.Logf
	lims, err := BuildLimiters(pol, entry, env, metrics)
	if err != nil {
		return nil, fmt.Errorf("instance %d: %w", o.Index, err)
	}
	global, err := BuildGlobal(pol, entry, env, metrics)
	if err != nil {
		return nil, fmt.Errorf("instance %d: global guard: %w", o.Index, err)
	}
	name := o.Name
	if name == "" {
		name = fmt.Sprintf("i%d", o.Index)
	}
	return &Instance{
		Service: &Service{
			Policy:          pol,
			Limiters:        lims,
			Global:          global,
			Downstream:      o.Downstream,
			Now:             clk.Steady,
			Wall:            clk.Now,
			TrustXFF:        entry.TrustXFF,
			ForwardRejected: entry.ForwardRejected,
			Rules:           o.Rules,
			Metrics:         metrics,
			Name:            name,
		},
		Clock: clk,
	}, nil
}

// BuildRules prepares the conservative defaults (policy.Conservative) the
// instances of a stack fall back to while their rule source is down. The
// limiters use env's store: under the defaults a key is still held to one
// shared quota.
func BuildRules(pol *policy.Policy, entry catalog.Entry, env catalog.Env) (*RuleSource, error) {
	fb := pol.Conservative()
	lims, err := BuildLimiters(fb, entry, env, nil)
	if err != nil {
		return nil, fmt.Errorf("conservative rules: %w", err)
	}
	return &RuleSource{Fallback: fb, Limiters: lims, RejectWhenDown: entry.RulesFailClosed}, nil
}

// RegionLimiters builds one region's limiters per tier for the reference
// token bucket: replicas that record what they admit (replicated and
// independent modes, returned in replicas too) or plain Redis buckets on
// one global store (strict mode).
func RegionLimiters(pol *policy.Policy, client redis.Scripter, mode string) (map[string]limiters.Limiter, map[string]*limiters.Regional, error) {
	lims := map[string]limiters.Limiter{}
	replicas := map[string]*limiters.Regional{}
	for i := range pol.Tiers {
		t := &pol.Tiers[i]
		if mode == RegionStrict {
			l, err := limiters.NewRedis(policy.TokenBucket, client, t.Limits)
			if err != nil {
				return nil, nil, fmt.Errorf("tier %s: %w", t.Name, err)
			}
			lims[t.Name] = l
			continue
		}
		rg, err := limiters.NewRegional(client, t.Limits)
		if err != nil {
			return nil, nil, fmt.Errorf("tier %s: %w", t.Name, err)
		}
		lims[t.Name], replicas[t.Name] = rg, rg
	}
	return lims, replicas, nil
}
