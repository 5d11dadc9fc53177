package envs

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/service"
)

// RegionSpec configures a multi-region embedded stack.
type RegionSpec struct {
	// Regions is the number of regions (≥ 2 to mean anything); each gets
	// Spec.Instances instances.
	Regions int
	Mode    string
	// Sync is the reconciliation interval (replicated mode).
	Sync time.Duration
	// Latency is the one-way delay between regions.
	Latency time.Duration
}

// Describe names the setting for reports.
func (r RegionSpec) Describe() string {
	switch r.Mode {
	case service.RegionStrict:
		return fmt.Sprintf("%d regions, strict global store, %s between regions", r.Regions, r.Latency)
	case service.RegionIndependent:
		return fmt.Sprintf("%d regions, independent quotas, no reconciliation", r.Regions)
	}
	return fmt.Sprintf("%d regions, replicated buckets reconciled every %s, %s between regions", r.Regions, r.Sync, r.Latency)
}

// Validate fills the defaults (replicated mode, 100ms sync) and fails on
// settings out of range.
func (r *RegionSpec) Validate() error {
	if r.Mode == "" {
		r.Mode = service.RegionReplicated
	}
	if err := service.CheckRegionMode(r.Mode); err != nil {
		return err
	}
	if r.Regions < 2 || r.Regions > 8 {
		return fmt.Errorf("%d regions: want 2 … 8", r.Regions)
	}
	if r.Sync <= 0 {
		r.Sync = 100 * time.Millisecond
	}
	if r.Latency < 0 || r.Latency > 5*time.Second || r.Sync > time.Minute {
		return fmt.Errorf("region latency %s / sync %s out of range", r.Latency, r.Sync)
	}
	return nil
}

// startRegions builds a multi-region stack: instances of region g are
// Instances[g·n … g·n+n-1].
func (e Embedded) startRegions(ctx context.Context, spec Spec, entry catalog.Entry, st *Stack) error {
	rs := *spec.Regions
	if err := rs.Validate(); err != nil {
		return fmt.Errorf("embedded: %w", err)
	}
	if entry.Name != "token-bucket" {
		return fmt.Errorf("embedded: regions run the reference token-bucket limiter (got %s)", entry.Name)
	}
	n := max(spec.Instances, 1)
	timeout := storeTimeout(spec) + 4*rs.Latency
	pol := spec.Policy
	sink := service.NewSink(e.Now)
	st.Sink = sink
	st.StoreDesc = rs.Describe()
	st.Notes = append(st.Notes, "regions: "+rs.Describe())

	// One store per region, or one global store reached through latency.
	var global string
	if rs.Mode == service.RegionStrict {
		addr, desc, err := startRedis(ctx, "", st)
		if err != nil {
			return fmt.Errorf("embedded: %w", err)
		}
		global = addr
		st.StoreDesc += " (" + desc + ")"
	}
	regional := make([]Replica, rs.Regions)
	for g := 0; g < rs.Regions; g++ {
		var h storeHandle
		var err error
		if rs.Mode == service.RegionStrict {
			h, err = connectRedis(ctx, global, timeout, st)
			if err == nil && g > 0 {
				h.proxy.SetLatency(rs.Latency)
			}
		} else {
			var addr string
			addr, _, err = startRedis(ctx, "", st)
			if err == nil {
				h, err = connectRedis(ctx, addr, timeout, st)
			}
		}
		if err != nil {
			return fmt.Errorf("embedded: region %d: %w", g, err)
		}
		lims, replicas, err := service.RegionLimiters(pol, h.client, rs.Mode)
		if err != nil {
			return fmt.Errorf("embedded: region %d: %w", g, err)
		}
		regional[g] = service.RegionReplicas(replicas)
		for i := 0; i < n; i++ {
			svc := &service.Service{Policy: pol, Limiters: lims, Downstream: sink, Now: e.Now, Metrics: service.NewMetrics(),
				Name: fmt.Sprintf("r%d-i%d", g, i)}
			url, stop, err := service.ServeLoopback(svc)
			if err != nil {
				return fmt.Errorf("embedded: region %d instance %d: %w", g, i, err)
			}
			st.OnClose(stop)
			st.Instances = append(st.Instances, url)
		}
	}
	if rs.Mode == service.RegionReplicated {
		stop := Reconcile(regional, rs, nil)
		st.OnClose(func() error { stop(); return nil })
	}
	return nil
}

// Replica is one region's view for the reconciliation loop: what its
// instances admitted since the last drain, per tier and key, and a way to
// charge its store with what other regions admitted.
type Replica interface {
	Drain(ctx context.Context) (map[string]map[string]int64, error)
	Debit(ctx context.Context, tier, key string, n int64) error
}

// Reconcile ships each region's consumption to every other region every
// rs.Sync, applying it rs.Latency later. Errors (a drain or debit that
// fails) go to logf when set: the loop goes on, and the overrun they cause
// is what the regions check measures. It returns a function that stops the
// loop and waits for deliveries in flight.
func Reconcile(regions []Replica, rs RegionSpec, logf func(string, ...any)) func() {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(rs.Sync)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			for from, src := range regions {
				ctx, cancel := context.WithTimeout(context.Background(), rs.Sync+time.Second)
				tiers, err := src.Drain(ctx)
				cancel()
				if err != nil {
					logf("regions: drain region %d: %v", from, err)
				}
				if len(tiers) == 0 {
					continue
				}
				for to, dst := range regions {
					if to == from {
						continue
					}
					wg.Add(1)
					time.AfterFunc(rs.Latency, func() {
						defer wg.Done()
						ctx, cancel := context.WithTimeout(context.Background(), time.Second)
						defer cancel()
						for tier, deltas := range tiers {
							for key, n := range deltas {
								if err := dst.Debit(ctx, tier, key, n); err != nil {
									logf("regions: debit region %d: %v", to, err)
								}
							}
						}
					})
				}
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}
