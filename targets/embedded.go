package targets

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/rlverify/rlverify/limiters"
	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policy"
)

// Embedded runs reference limiter instances as HTTP servers inside this
// process, on 127.0.0.1 with ephemeral ports. With the memory store every
// instance keeps its own state, as separate processes would (so several
// instances of an in-memory limiter admit several quotas); the redis store
// is shared.
type Embedded struct {
	// Now is the base clock of every instance (time.Now when nil).
	Now func() time.Time
}

// Name implements Environment.
func (Embedded) Name() string { return "embedded" }

// Start implements Environment.
func (e Embedded) Start(ctx context.Context, spec Spec) (*Stack, error) {
	if spec.Policy == nil {
		return nil, errors.New("embedded: no policy")
	}
	n := spec.Instances
	if n <= 0 {
		n = 1
	}
	if n > MaxInstances {
		return nil, fmt.Errorf("embedded: %d instances; at most %d", n, MaxInstances)
	}
	entry, err := catalog.Lookup(spec.Limiter, spec.Store)
	if err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	st := &Stack{Env: "embedded", StoreDesc: entry.Store}
	ok := false
	defer func() {
		if !ok {
			_ = st.Close()
		}
	}()
	if spec.Regions != nil {
		if err := e.startRegions(ctx, spec, entry, st); err != nil {
			return nil, err
		}
		ok = true
		return st, nil
	}
	store, err := e.startStore(ctx, spec, entry, st)
	if err != nil {
		return nil, err
	}
	sink := NewSink(e.Now)
	st.Sink = sink
	rules, err := BuildRules(spec.Policy, entry, catalog.Env{Redis: store.client})
	if err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	faults := &localFaults{proxy: store.proxy, rules: rules}
	for i := 0; i < n; i++ {
		in, err := NewInstance(spec.Policy, entry, InstanceOptions{
			Index: i, Now: e.Now, Skew: skew(spec, i), Env: catalog.Env{Redis: store.client}, Downstream: sink, Rules: rules,
		})
		if err != nil {
			return nil, fmt.Errorf("embedded: %w", err)
		}
		faults.clocks = append(faults.clocks, in.Clock)
		url, stop, err := ServeLoopback(in.Service)
		if err != nil {
			return nil, fmt.Errorf("embedded: instance %d: %w", i, err)
		}
		st.OnClose(stop)
		st.Instances = append(st.Instances, url)
	}
	st.Faults = faults
	ok = true
	return st, nil
}

// MaxInstances bounds the instances one environment starts.
const MaxInstances = 64

func skew(spec Spec, i int) time.Duration {
	if i < len(spec.Skews) {
		return spec.Skews[i]
	}
	return 0
}

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
