package service

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/rlverify/rlverify/limiters"
	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policy"
)

// BuildLimiters builds one limiter per tier of pol with entry. Limiters on
// a store that can fail (Redis) are wrapped with the policy's store timeout,
// circuit breaker and failure mode, reporting to m (which may be nil).
func BuildLimiters(pol *policy.Policy, entry catalog.Entry, env catalog.Env, m *Metrics) (map[string]limiters.Limiter, error) {
	out := map[string]limiters.Limiter{}
	for i := range pol.Tiers {
		t := &pol.Tiers[i]
		l, err := entry.New(t.Limits, env)
		if err != nil {
			return nil, fmt.Errorf("tier %s: %w", t.Name, err)
		}
		if entry.Store == catalog.Redis && !entry.Unguarded {
			alg := entry.Algorithm
			if !alg.Valid() {
				alg = policy.TokenBucket
			}
			r, err := limiters.NewResilient(l, alg, t.Limits, pol.Failure, m.observer())
			if err != nil {
				return nil, fmt.Errorf("tier %s: %w", t.Name, err)
			}
			r.Tier = t.Name
			l = r
		}
		out[t.Name] = l
	}
	return out, nil
}

// ServeLoopback serves h on 127.0.0.1 with an ephemeral port and returns its
// base URL and a function that shuts it down.
func ServeLoopback(h http.Handler) (string, func() error, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("listen on 127.0.0.1: %w", err)
	}
	srv := Server(h)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	stop := func() error {
		// Give in-flight requests a moment, then cut whatever is left
		// (connections a client opened but never used would otherwise hold
		// a graceful shutdown for seconds).
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
		}
		if serr := <-done; !errClosed(serr) {
			return serr
		}
		return nil
	}
	return "http://" + ln.Addr().String(), stop, nil
}

// BuildGlobal builds the policy's aggregate guard with entry's algorithm
// and store (nil when the policy declares none). With the memory store each
// instance guards alone; with Redis the guard is shared.
func BuildGlobal(pol *policy.Policy, entry catalog.Entry, env catalog.Env, m *Metrics) (limiters.Limiter, error) {
	if pol.Global == nil {
		return nil, nil
	}
	g := &policy.Policy{Tiers: []policy.Tier{{Name: "global", Limits: []policy.Limit{*pol.Global}}}, Failure: pol.Failure}
	lims, err := BuildLimiters(g, entry, env, m)
	if err != nil {
		return nil, err
	}
	return lims["global"], nil
}
