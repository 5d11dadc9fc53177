//go:build gubernator

package gateway

// The gubernator cluster itself: built only with -tags gubernator, because
// gubernator's module links gRPC, etcd and the Kubernetes client (about 650
// packages, most of a default build's compile time). Its translation and
// honest policy (gubernator.go) are in every build.

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

// gubernatorBuilt says this binary can start the cluster.
const gubernatorBuilt = true

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
