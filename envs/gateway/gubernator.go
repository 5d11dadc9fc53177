package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	guber "github.com/gubernator-io/gubernator/v2"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/envs/redisproc"
	"github.com/rlverify/rlverify/limiters"
	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/service"
)

// gubernator v2.13.0 (https://github.com/gubernator-io/gubernator), a
// distributed rate-limit service: a cluster of peers, each rate limit owned
// by one peer chosen by consistent hashing of its name and key.
//
// Mapping, per tier limit (K, r): a RateLimitReq with algorithm
// LEAKY_BUCKET, limit = burst = K, duration = K/r in milliseconds (the
// bucket leaks limit/duration = r per second, holds burst = K, starts full)
// and hits = 1, sent by the HTTP front over gRPC to its own peer. Keeping
// limit = burst matters for GLOBAL: the owner's broadcast sets a peer's
// cached burst to the limit, and a cached burst that differs from the
// request's refills the bucket. Behaviour local is gubernator's default
// (BATCHING): the peer that receives a hit forwards it, batched, to the
// owner, which decides. GLOBAL: the receiving peer answers from its own
// cache at once and sends the hits to the owner asynchronously; the owner
// broadcasts its state back every GlobalSyncWait (100ms by default), so peers
// decide on stale state in between.
//
// gubernator is an API, not an HTTP gateway: the front is the reference
// service (identity, tiers, headers, the sink) with a limiter that asks
// gubernator. It sends Remaining and Limit as gubernator reports them and,
// on OVER_LIMIT, Retry-After = reset_time − now, which the README documents
// as "the time at which the rate limit will no longer return OVER_LIMIT";
// for a leaky bucket reset_time is when the bucket is full again. Several
// limits on a key are separate rate limits: each is hit whatever the others
// answer. Time is gubernator's millisecond clock.
//
// Two quirks of v2.13.0's leaky bucket (algorithms.go) show under load: the
// cap applies only when the whole part of Remaining exceeds burst, so the
// bucket can hold up to K + 0.999 tokens (token-bounds sees a remaining
// count no bucket of K reaches); and a hit that takes the last whole token
// sets Remaining to 0, throwing away the fraction toward the next one, so a
// key hammered above its rate is refused while a bucket of (K, r) would
// admit (under-admission).

// gubernatorPeers is the size of the cluster.
const gubernatorPeers = 3

// gubernatorName names the rate limit of a tier's i-th limit.
func gubernatorName(i int) string { return "rlverify_" + strconv.Itoa(i) }

func translateGubernator(declared *policy.Policy, mode string) (*translation, error) {
	if mode != "global" && mode != "local" {
		return nil, fmt.Errorf("gateway gubernator: behaviour %q: want global or local", mode)
	}
	t, err := newTranslation(declared, "gubernator")
	if err != nil {
		return nil, err
	}
	for _, tl := range t.limits {
		ms := gubernatorDuration(tl.Limit)
		r := float64(tl.Limit.Capacity) * 1000 / float64(ms)
		if math.Abs(r-tl.Limit.R()) > 1e-9*tl.Limit.R() {
			t.deviate(fmt.Sprintf("limit %s refills at %s", tl.Limit.Name, policy.FormatRate(tl.Limit.R())),
				fmt.Sprintf("gubernator durations are whole milliseconds: duration=%dms leaks at %s", ms, policy.FormatRate(r)))
			setBucket(t.honestLimit(tl), tl.Limit.Capacity, r)
		}
	}
	t.deviate("the bucket holds at most K tokens",
		"the leaky bucket caps Remaining only when its whole part exceeds burst (algorithms.go:369, int64(b.Remaining) > b.Burst): it can hold up to K + 0.999 tokens")
	t.deviate("a request takes one token and leaves the rest",
		"a hit that takes the last whole token sets Remaining to 0 (algorithms.go:398), dropping the fraction already refilled toward the next one: under steady load it refills slower than r")
	if declared.Headers.RetryAfter {
		t.deviate("Retry-After is the wait until a request is admitted again",
			"the front advises reset_time − now, which for a leaky bucket is when the bucket is full again (up to K/r), not when the next hit fits (1/r)")
	}
	if mode == "global" {
		t.deviate("one quota per key across all instances",
			"with GLOBAL each peer answers from its own cache and the owner's state reaches it asynchronously (GlobalSyncWait, 100ms by default): a key spread over the peers is admitted up to once per peer before they hear of each other, and a broadcast can refill a peer's cache with hits the owner has not yet counted, so no per-peer bound holds either")
		for _, tl := range t.limits {
			t.honestLimit(tl).Scope = policy.ScopeInstance
		}
	}
	for _, tier := range declared.Tiers {
		if len(tier.Limits) > 1 {
			t.deviate(fmt.Sprintf("a request refused by one of tier %s's limits uses up none of them", tier.Name), "gubernator hits every rate limit of a request separately")
			break
		}
	}
	if t.honest.ClockQuantum.D() < time.Millisecond {
		t.honest.ClockQuantum = policy.Duration(time.Millisecond)
	}
	if err := t.finish(); err != nil {
		return nil, err
	}
	return t, nil
}

// gubernatorDuration is K/r in whole milliseconds (a validated policy's
// window is at least 1ms).
func gubernatorDuration(l policy.Limit) int64 {
	return max(int64(math.Round(float64(l.Capacity)/l.R()*1000)), 1)
}

// gubernatorLimiter asks one peer for the rate limits of one tier. Safe for
// concurrent use.
type gubernatorLimiter struct {
	client   guber.V1Client
	limits   []policy.Limit
	behavior guber.Behavior
}

func newGubernatorLimiter(c guber.V1Client, limits []policy.Limit, mode string) (*gubernatorLimiter, error) {
	b := guber.Behavior_BATCHING
	if mode == "global" {
		b = guber.Behavior_GLOBAL
	}
	return &gubernatorLimiter{client: c, limits: limits, behavior: b}, nil
}

// Allow implements limiters.Limiter; now is ignored (gubernator decides at
// its own clock).
func (g *gubernatorLimiter) Allow(ctx context.Context, _ time.Time, key string, n int) (limiters.Decision, error) {
	req := &guber.GetRateLimitsReq{Requests: make([]*guber.RateLimitReq, len(g.limits))}
	for i, l := range g.limits {
		req.Requests[i] = &guber.RateLimitReq{
			Name: gubernatorName(i), UniqueKey: key, Hits: int64(n),
			Limit: l.Capacity, Burst: l.Capacity, Duration: gubernatorDuration(l),
			Algorithm: guber.Algorithm_LEAKY_BUCKET, Behavior: g.behavior,
		}
	}
	resp, err := g.client.GetRateLimits(ctx, req)
	if err != nil {
		return limiters.Decision{}, fmt.Errorf("gateway gubernator: GetRateLimits for %q: %w: %w", key, limiters.ErrStore, err)
	}
	if len(resp.Responses) != len(g.limits) {
		return limiters.Decision{}, fmt.Errorf("gateway gubernator: GetRateLimits for %q: %d answers to %d rate limits", key, len(resp.Responses), len(g.limits))
	}
	now := time.Now().UnixMilli()
	d := limiters.Decision{Allowed: true}
	tightest := math.Inf(1)
	for i, r := range resp.Responses {
		if r.Error != "" {
			return limiters.Decision{}, fmt.Errorf("gateway gubernator: rate limit %s of %q: %w: %s", gubernatorName(i), key, limiters.ErrStore, r.Error)
		}
		reset := time.Duration(max(r.ResetTime-now, 0)) * time.Millisecond
		if share := float64(r.Remaining) / float64(max(r.Limit, 1)); share < tightest {
			tightest = share
			d.Limit, d.Remaining, d.ResetAfter = r.Limit, r.Remaining, reset
		}
		if r.Status == guber.Status_OVER_LIMIT {
			d.Allowed = false
			d.RetryAfter = max(d.RetryAfter, reset)
		}
	}
	if d.Allowed {
		d.RetryAfter = 0
	}
	return d, nil
}

// gubernatorCluster is three gubernator daemons in this process, on
// loopback, each knowing the others.
type gubernatorCluster struct {
	daemons []*guber.Daemon
	conns   []*grpc.ClientConn
	clients []guber.V1Client
}

// startGubernatorCluster starts peers daemons with gubernator's default
// behaviour settings and a client connection to each.
func startGubernatorCluster(ctx context.Context, peers int) (*gubernatorCluster, error) {
	c := &gubernatorCluster{}
	ok := false
	defer func() {
		if !ok {
			_ = c.close()
		}
	}()
	log := logrus.New()
	log.SetOutput(io.Discard)
	var infos []guber.PeerInfo
	for i := 0; i < peers; i++ {
		var d *guber.Daemon
		var last error
		for attempt := 0; attempt < startAttempts && d == nil; attempt++ {
			grpcPort, err1 := redisproc.FreePort()
			httpPort, err2 := redisproc.FreePort()
			if err := errors.Join(err1, err2); err != nil {
				return nil, fmt.Errorf("gateway gubernator: %w", err)
			}
			grpcAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(grpcPort))
			sctx, cancel := context.WithTimeout(ctx, StartTimeout)
			d, last = guber.SpawnDaemon(sctx, guber.DaemonConfig{
				GRPCListenAddress: grpcAddr,
				HTTPListenAddress: net.JoinHostPort("127.0.0.1", strconv.Itoa(httpPort)),
				AdvertiseAddress:  grpcAddr,
				InstanceID:        fmt.Sprintf("peer-%d", i),
				PeerDiscoveryType: "none",
				Logger:            logrus.NewEntry(log),
			})
			cancel()
			if last != nil {
				if d != nil {
					d.Close()
				}
				d = nil
			}
		}
		if d == nil {
			return nil, fmt.Errorf("gateway gubernator: peer %d: %w", i, last)
		}
		c.daemons = append(c.daemons, d)
		infos = append(infos, guber.PeerInfo{GRPCAddress: d.GRPCListeners[0].Addr().String(), HTTPAddress: d.HTTPListener.Addr().String()})
	}
	for _, d := range c.daemons {
		d.SetPeers(infos)
	}
	for _, info := range infos {
		conn, err := grpc.NewClient(info.GRPCAddress, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, fmt.Errorf("gateway gubernator: dial peer %s: %w", info.GRPCAddress, err)
		}
		c.conns = append(c.conns, conn)
		c.clients = append(c.clients, guber.NewV1Client(conn))
	}
	ok = true
	return c, nil
}

// gubernatorSettle is how long close lets the GLOBAL sync loops drain
// (three of their default 100ms GlobalSyncWait): gubernator v2.13.0's
// Daemon.Close can deadlock when a sync tick is still pending.
const gubernatorSettle = 300 * time.Millisecond

// gubernatorCloseTimeout bounds each Daemon.Close; past it the daemon's
// goroutines are abandoned (they end with the process).
const gubernatorCloseTimeout = 3 * time.Second

// close stops the cluster. It returns an error naming the peers whose Close
// did not return in time.
func (c *gubernatorCluster) close() error {
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	if len(c.daemons) > 0 {
		time.Sleep(gubernatorSettle)
	}
	var stuck []string
	for i, d := range c.daemons {
		done := make(chan struct{})
		go func() { d.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(gubernatorCloseTimeout):
			stuck = append(stuck, strconv.Itoa(i))
		}
	}
	c.conns, c.daemons, c.clients = nil, nil, nil
	if len(stuck) > 0 {
		return fmt.Errorf("gateway gubernator: peer(s) %s did not close within %s (gubernator's sync loop deadlock); left to end with the process", strings.Join(stuck, ", "), gubernatorCloseTimeout)
	}
	return nil
}

func startGubernator(ctx context.Context, e Environment, pol *policy.Policy, n int) (*envs.Stack, error) {
	t, err := translateGubernator(pol, e.Gateway.Mode)
	if err != nil {
		return nil, err
	}
	st := &envs.Stack{Env: "gubernator", StoreDesc: fmt.Sprintf("gubernator v2.13.0, %d peers in process", gubernatorPeers)}
	ok := false
	defer func() {
		if !ok {
			_ = st.Close()
		}
	}()
	cluster, err := startGubernatorCluster(ctx, gubernatorPeers)
	if err != nil {
		return nil, err
	}
	st.OnClose(cluster.close)
	sink := service.NewSink(nil)
	st.Sink = sink
	entry := catalog.Entry{
		Name: "gubernator/" + e.Gateway.Mode, Algorithm: policy.TokenBucket, Store: catalog.Cluster,
		New: func(l []policy.Limit, env catalog.Env) (limiters.Limiter, error) {
			return newGubernatorLimiter(cluster.clients[env.Instance%gubernatorPeers], l, e.Gateway.Mode)
		},
	}
	fronts := max(n, gubernatorPeers)
	for i := 0; i < fronts; i++ {
		in, err := service.NewInstance(pol, entry, service.InstanceOptions{Index: i, Downstream: sink})
		if err != nil {
			return nil, fmt.Errorf("gateway gubernator: front %d: %w", i, err)
		}
		url, stop, err := service.ServeLoopback(in.Service)
		if err != nil {
			return nil, fmt.Errorf("gateway gubernator: front %d: %w", i, err)
		}
		st.OnClose(stop)
		st.Instances = append(st.Instances, url)
	}
	behaviour := "default behaviour (BATCHING: the owning peer decides)"
	if e.Gateway.Mode == "global" {
		behaviour = "behaviour GLOBAL (each peer answers from its cache, the owner syncs them)"
	}
	st.Notes = append(st.Notes,
		fmt.Sprintf("gubernator v2.13.0: %d peers in process, %s; %d HTTP fronts (front i asks peer i mod %d over gRPC), requests spread over them", gubernatorPeers, behaviour, fronts, gubernatorPeers))
	st.Notes = append(st.Notes, deviationNotes("gubernator", t.deviations)...)
	ok = true
	return st, nil
}
