package envs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/service"
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
	entry, err := spec.CatalogEntry(spec.Store)
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
	sink := service.NewSink(e.Now)
	st.Sink = sink
	rules, err := service.BuildRules(spec.Policy, entry, catalog.Env{Redis: store.client})
	if err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	faults := &localFaults{proxy: store.proxy, rules: rules, pol: spec.Policy}
	for i := 0; i < n; i++ {
		in, err := service.NewInstance(spec.Policy, entry, service.InstanceOptions{
			Index: i, Now: e.Now, Skew: spec.Skew(i), Env: catalog.Env{Redis: store.client}, Downstream: sink, Rules: rules,
		})
		if err != nil {
			return nil, fmt.Errorf("embedded: %w", err)
		}
		faults.clocks = append(faults.clocks, in.Clock)
		faults.services = append(faults.services, in.Service)
		url, stop, err := service.ServeLoopback(in.Service)
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

// Skew is instance i's configured clock offset (0 beyond Skews).
func (spec Spec) Skew(i int) time.Duration {
	if i < len(spec.Skews) {
		return spec.Skews[i]
	}
	return 0
}
