package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlverify/rlverify/internal/faultproxy"
	"github.com/rlverify/rlverify/limiters"
	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policy"
)

// StandaloneOptions configures one instance run as its own process
// (`rlverify serve`), as the docker environment's containers do.
type StandaloneOptions struct {
	// Policy is the declared policy (already in the entry's family).
	Policy *policy.Policy
	Entry  catalog.Entry
	// RedisAddr is the store for redis entries (HOST:PORT).
	RedisAddr string
	// RedisLatency delays every exchange with Redis by this much each way
	// (an in-process proxy): a store in another region.
	RedisLatency time.Duration
	// ClockOffset is the instance clock's configured skew.
	ClockOffset time.Duration
	// RegionMode, when set, runs the reference token bucket as one
	// instance of a region (RegionReplicated, RegionStrict,
	// RegionIndependent); replicated replicas are drained through the
	// control endpoint.
	RegionMode string
	// Control serves the control endpoint (clock-skew, rules-down, drain);
	// ControlToken, when set, is required with every control request.
	Control      bool
	ControlToken string
	Downstream   Forwarder
	Name         string
	// Logf receives operational lines (store circuit transitions).
	Logf func(format string, args ...any)
}

// NewStandalone builds the handler of one standalone instance and a
// function that releases its store connections.
func NewStandalone(o StandaloneOptions) (http.Handler, func() error, error) {
	if o.Policy == nil {
		return nil, nil, errors.New("standalone: no policy")
	}
	var closers []func() error
	closeAll := func() error {
		var errs []error
		for i := len(closers) - 1; i >= 0; i-- {
			errs = append(errs, closers[i]())
		}
		return errors.Join(errs...)
	}
	ok := false
	defer func() {
		if !ok {
			_ = closeAll()
		}
	}()
	env := catalog.Env{}
	if o.Entry.Store == catalog.Redis {
		if o.RedisAddr == "" {
			return nil, nil, errors.New("standalone: the redis store needs a Redis address")
		}
		addr, timeout := o.RedisAddr, o.Policy.Failure.StoreTimeout.D()
		if o.RedisLatency > 0 {
			p, err := faultproxy.New(addr)
			if err != nil {
				return nil, nil, fmt.Errorf("standalone: latency proxy to %s: %w", addr, err)
			}
			p.SetLatency(o.RedisLatency)
			closers = append(closers, p.Close)
			// Each call crosses the distance twice; leave room for both
			// ways and the dial.
			addr, timeout = p.Addr(), timeout+4*o.RedisLatency
		}
		ro := limiters.RedisOptions(addr, timeout)
		ro.Dialer = (&limiters.RememberingDialer{Timeout: ro.DialTimeout}).DialContext
		// Warmed once instead of kept warm: see limiters.WarmPool.
		warm := ro.MinIdleConns
		ro.MinIdleConns = 0
		client := redis.NewClient(ro)
		closers = append(closers, client.Close)
		wctx, cancel := context.WithTimeout(context.Background(), time.Second)
		limiters.WarmPool(wctx, client, warm)
		cancel()
		env.Redis = client
	} else if o.RedisLatency > 0 || o.RegionMode != "" {
		return nil, nil, fmt.Errorf("standalone: %s keeps its state in memory: regions and Redis latency need a redis limiter", o.Entry.Name)
	}
	ctl := &Control{Token: o.ControlToken}
	var h http.Handler
	if o.RegionMode != "" {
		if err := CheckRegionMode(o.RegionMode); err != nil {
			return nil, nil, fmt.Errorf("standalone: %w", err)
		}
		if o.Entry.Name != "token-bucket" {
			return nil, nil, fmt.Errorf("standalone: regions run the reference token-bucket limiter (got %s)", o.Entry.Name)
		}
		lims, replicas, err := RegionLimiters(o.Policy, env.Redis, o.RegionMode)
		if err != nil {
			return nil, nil, fmt.Errorf("standalone: %w", err)
		}
		if o.RegionMode == RegionReplicated {
			ctl.Replicas = replicas
		}
		clk := NewSkewClock(nil, o.ClockOffset)
		h = &Service{Policy: o.Policy, Limiters: lims, Downstream: o.Downstream, Now: clk.Steady, Wall: clk.Now, Metrics: NewMetrics(), Name: o.Name}
	} else {
		rules, err := BuildRules(o.Policy, o.Entry, env)
		if err != nil {
			return nil, nil, fmt.Errorf("standalone: %w", err)
		}
		in, err := NewInstance(o.Policy, o.Entry, InstanceOptions{
			Name: o.Name, Skew: o.ClockOffset, Env: env, Downstream: o.Downstream, Rules: rules, Logf: o.Logf,
		})
		if err != nil {
			return nil, nil, fmt.Errorf("standalone: %w", err)
		}
		ctl.Clock, ctl.Rules, ctl.Limits = in.Clock, rules, in.Service
		h = in.Service
	}
	if o.Control {
		ctl.Next = h
		h = ctl
	}
	ok = true
	return h, closeAll, nil
}
