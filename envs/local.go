package envs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlverify/rlverify/envs/redisproc"
	"github.com/rlverify/rlverify/internal/faultproxy"
	"github.com/rlverify/rlverify/limiters"
	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/service"
)

// Local runs reference limiter instances as HTTP servers in this process (as
// Embedded does) whose state lives in real redis-server child processes that
// the harness starts and stops: one node, or a Redis Cluster of Cluster
// nodes. Each instance has its own Redis client, so instances share nothing
// but the store, as separate processes would.
//
// Every node sits behind its own faultproxy.Proxy. The store-down and store-slow
// faults act on every proxy at once. Cluster clients learn node addresses from
// CLUSTER SLOTS and MOVED replies, which carry the nodes' real ports; the
// client's dialer maps each real node address to that node's proxy, so every
// connection, including redirects, goes through a proxy.
//
// The zero value runs a single node. Local is safe to use from several
// goroutines; each Start is independent.
type Local struct {
	// Cluster > 0 starts a Redis Cluster of that many masters (at least 3);
	// 0 uses Spec.RedisCluster, and a single node when that is 0 too.
	Cluster int
	// Now is the base clock of every instance (time.Now when nil).
	Now func() time.Time
}

// Name implements Environment.
func (Local) Name() string { return "local" }

// Start implements Environment. The limiter must keep its state in Redis
// (Spec.Store "redis" or empty); Spec.RedisURL is not used: Local always
// starts its own servers.
func (l Local) Start(ctx context.Context, spec Spec) (*Stack, error) {
	if spec.Policy == nil {
		return nil, errors.New("local: no policy")
	}
	if err := redisproc.Available(); err != nil {
		return nil, fmt.Errorf("local: %w: %w", ErrUnavailable, err)
	}
	n := spec.Instances
	if n <= 0 {
		n = 1
	}
	if n > MaxInstances {
		return nil, fmt.Errorf("local: %d instances; at most %d", n, MaxInstances)
	}
	store := spec.Store
	if store == "" {
		store = catalog.Redis
	}
	if store != catalog.Redis {
		return nil, fmt.Errorf("local: store %q: the local environment keeps state in redis-server processes (Store: redis, or the embedded environment for memory)", store)
	}
	entry, err := spec.CatalogEntry(store)
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	nodes := l.Cluster
	if nodes == 0 {
		nodes = spec.RedisCluster
	}
	if nodes < 0 || nodes == 1 || nodes == 2 || nodes > 16 {
		return nil, fmt.Errorf("local: a cluster of %d nodes: want 0 (single node) or 3 … 16", nodes)
	}
	timeout := spec.Policy.Failure.StoreTimeout.D()
	if timeout <= 0 {
		timeout = limiters.DefaultRedisTimeout
	}
	logf := spec.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}

	st := &Stack{Env: "local"}
	ok := false
	defer func() {
		if !ok {
			_ = st.Close()
		}
	}()

	// The servers.
	var addrs []string
	if nodes == 0 {
		srv, err := redisproc.Start()
		if err != nil {
			return nil, fmt.Errorf("local: start redis-server: %w", err)
		}
		st.OnClose(func() error { srv.Stop(); return nil })
		addrs = []string{srv.Addr}
		st.StoreDesc = "redis-server " + srv.Addr + " (child process)"
		logf("local: redis-server on %s", srv.Addr)
	} else {
		logf("local: starting a %d-node Redis Cluster", nodes)
		c, err := redisproc.StartCluster(nodes)
		if err != nil {
			return nil, fmt.Errorf("local: start a %d-node cluster: %w", nodes, err)
		}
		st.OnClose(func() error { c.Stop(); return nil })
		addrs = c.Addrs()
		st.StoreDesc = fmt.Sprintf("redis cluster of %d redis-server processes %v", nodes, addrs)
		logf("local: cluster up: %v", addrs)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}

	// One fault proxy per node.
	proxyOf := map[string]string{}
	faults := &localStackFaults{localFaults: &localFaults{pol: spec.Policy}}
	for _, a := range addrs {
		p, err := faultproxy.New(a)
		if err != nil {
			return nil, fmt.Errorf("local: %w", err)
		}
		st.OnClose(p.Close)
		proxyOf[a] = p.Addr()
		faults.proxies = append(faults.proxies, p)
	}
	newClient := func() redis.UniversalClient {
		if nodes == 0 {
			return limiters.NewRedisClient(proxyOf[addrs[0]], timeout)
		}
		return newProxiedClusterClient(addrs, proxyOf, timeout)
	}

	sink := service.NewSink(l.Now)
	st.Sink = sink
	var rules *service.RuleSource
	for i := 0; i < n; i++ {
		client := newClient()
		st.OnClose(client.Close)
		if i == 0 {
			if err := pingWithin(ctx, client, storeUpWithin); err != nil {
				return nil, fmt.Errorf("local: redis through the fault proxy does not answer PING within %s: %w", storeUpWithin, err)
			}
		}
		if nodes == 0 {
			warmStore(ctx, client)
		}
		if rules == nil {
			// Built once, on the first instance's client: every instance
			// falls back to the same shared conservative quotas.
			if rules, err = service.BuildRules(spec.Policy, entry, catalog.Env{Redis: client}); err != nil {
				return nil, fmt.Errorf("local: %w", err)
			}
			faults.rules = rules
		}
		in, err := service.NewInstance(spec.Policy, entry, service.InstanceOptions{
			Index: i, Now: l.Now, Skew: spec.Skew(i), Env: catalog.Env{Redis: client}, Downstream: sink, Rules: rules,
		})
		if err != nil {
			return nil, fmt.Errorf("local: %w", err)
		}
		faults.clocks = append(faults.clocks, in.Clock)
		faults.services = append(faults.services, in.Service)
		svc := in.Service
		url, stop, err := service.ServeLoopback(svc)
		if err != nil {
			return nil, fmt.Errorf("local: instance %d: %w", i, err)
		}
		st.OnClose(stop)
		st.Instances = append(st.Instances, url)
	}
	st.Faults = faults
	if nodes > 0 {
		st.Notes = append(st.Notes, fmt.Sprintf("redis: %d-node cluster of local redis-server processes, no replicas; store faults act on every node", nodes))
	}
	ok = true
	return st, nil
}

// newProxiedClusterClient is limiters.NewRedisClusterClient whose dialer sends
// every connection for a node to that node's fault proxy. Node addresses come
// from CLUSTER SLOTS and MOVED/ASK replies as the nodes' real addresses; the
// dialer maps them, so no connection bypasses the proxies.
func newProxiedClusterClient(addrs []string, proxyOf map[string]string, timeout time.Duration) *redis.ClusterClient {
	o := limiters.RedisClusterOptions(addrs, timeout)
	d := &net.Dialer{Timeout: o.DialTimeout}
	o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if p, ok := proxyOf[addr]; ok {
			addr = p
		} else if p, ok := proxyOf[normalizeLoopback(addr)]; ok {
			addr = p
		}
		return d.DialContext(ctx, network, addr)
	}
	return redis.NewClusterClient(o)
}

// normalizeLoopback writes a loopback host:port as 127.0.0.1:port (nodes may
// announce themselves as localhost or ::1).
func normalizeLoopback(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		if _, err := strconv.Atoi(port); err == nil {
			return net.JoinHostPort("127.0.0.1", port)
		}
	}
	return addr
}

// localStackFaults extends localFaults to several store proxies (one per
// cluster node): store faults act on all of them, clock skew on the
// instances' clocks.
type localStackFaults struct {
	*localFaults
	proxies []*faultproxy.Proxy
}

// Supports implements FaultInjector.
func (f *localStackFaults) Supports(kind string) bool {
	switch kind {
	case FaultStoreDown, FaultStoreSlow:
		return len(f.proxies) > 0
	}
	return f.localFaults.Supports(kind)
}

// Inject implements FaultInjector.
func (f *localStackFaults) Inject(ctx context.Context, kind, param string) error {
	switch kind {
	case FaultStoreDown, FaultStoreSlow:
		for _, p := range f.proxies {
			one := &localFaults{proxy: p}
			if err := one.Inject(ctx, kind, param); err != nil {
				return err
			}
		}
		return nil
	}
	return f.localFaults.Inject(ctx, kind, param)
}

// Clear implements FaultInjector.
func (f *localStackFaults) Clear(ctx context.Context, kind string) error {
	switch kind {
	case FaultStoreDown, FaultStoreSlow:
		for _, p := range f.proxies {
			one := &localFaults{proxy: p}
			if err := one.Clear(ctx, kind); err != nil {
				return err
			}
		}
		return nil
	}
	return f.localFaults.Clear(ctx, kind)
}
