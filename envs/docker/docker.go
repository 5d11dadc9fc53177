package docker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	dnetwork "github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	tcnetwork "github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"
	"go.yaml.in/yaml/v3"

	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/envs/redisproc"
	"github.com/rlverify/rlverify/limiters"
	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/service"
)

// Images and labels of the docker environment.
const (
	// DefaultRedisImage is the Redis image used when neither Docker.RedisImage
	// nor $RLVERIFY_REDIS_IMAGE names one (pulled by Docker when absent,
	// unless NoPull).
	DefaultRedisImage = "redis:7-alpine"
	// LocalRedisImage is the registry-free Redis image scripts/build-images.sh
	// builds from this machine's redis-server.
	LocalRedisImage = "rlverify/redis:local"
	// DefaultLimiterImage is the FROM scratch image holding a static rlverify
	// binary (scripts/build-images.sh, or built by Start from Docker.Binary).
	DefaultLimiterImage = "rlverify/limiter:local"
	// LabelRun is set on every container and network of one stack, to the
	// stack's run id; LabelEnv is set to "docker".
	LabelRun = "rlverify.run"
	LabelEnv = "rlverify.env"
)

// Environment variables the docker environment reads.
const (
	EnvRedisImage   = "RLVERIFY_REDIS_IMAGE"
	EnvLimiterImage = "RLVERIFY_LIMITER_IMAGE"
	EnvNoPull       = "RLVERIFY_NO_PULL"
	// EnvDockerDebug=1 keeps testcontainers' own log lines on stderr and,
	// when the stack closes, passes the last lines of every limiter
	// container's log to Spec.Log.
	EnvDockerDebug = "RLVERIFY_DOCKER_DEBUG"
)

// Docker starts a stack of containers with testcontainers-go: a private
// network; a Redis container (network alias "redis", its port published on
// 127.0.0.1 at a fixed free port so it survives stop/start); N limiter
// containers running `rlverify serve --control` with the declared policy
// copied in (aliases "limiter-0" …); and a sink container running
// `rlverify sink` (alias "sink") whose stats are read through its published
// port. Every published port is bound to 127.0.0.1. With Spec.Regions there
// is one Redis container per region (one in strict mode) and N limiter
// containers per region ("limiter-rG-I"); the reconciliation loop runs here.
//
// Every container and the network carry LabelRun=<run id>; Stack.Close
// terminates them and then removes anything left with that label. A Start
// that fails or whose context is cancelled cleans up before returning.
//
// Faults: store-down stops the Redis container(s) and Clear starts them
// again (Redis has no persistence: it comes back empty), store-slow pauses
// them (every store call hangs until the store timeout); clock-skew and
// rules-down (and limit-change, when the policy declares changes) go to
// each limiter container's control endpoint. Cutting one
// instance off the network is not offered (see docs/environments.md).
//
// Start sets TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1 (when Docker is local and
// the variable is unset: the ports are bound to loopback) and
// TESTCONTAINERS_RYUK_DISABLED=true (when unset: the stack cleans up after
// itself, and Ryuk's image would have to be pulled) before testcontainers
// reads its configuration.
//
// The zero value uses the default images. Docker is safe for concurrent use;
// each Start is independent.
type Docker struct {
	// RedisImage is the Redis image ($RLVERIFY_REDIS_IMAGE, else
	// DefaultRedisImage).
	RedisImage string
	// LimiterImage is the rlverify image ($RLVERIFY_LIMITER_IMAGE, else
	// DefaultLimiterImage).
	LimiterImage string
	// Binary is a static (CGO_ENABLED=0) linux rlverify binary to build
	// LimiterImage from when the image is absent or Rebuild is set. Empty:
	// $RLVERIFY_BINARY, else this executable if it is static.
	Binary string
	// Rebuild builds LimiterImage from Binary even when it exists.
	Rebuild bool
	// NoPull refuses to start when an image is not present locally instead
	// of letting Docker pull it (also set by RLVERIFY_NO_PULL=1).
	NoPull bool
	// Labels are added to every container and the network.
	Labels map[string]string
	// StartTimeout bounds Start (default 2 minutes).
	StartTimeout time.Duration
	// Verbose sends testcontainers' per-container log lines to Spec.Log
	// (they are dropped otherwise).
	Verbose bool
}

// Name implements Environment.
func (Docker) Name() string { return "docker" }

func (d Docker) redisImage() string {
	return firstNonEmpty(d.RedisImage, os.Getenv(EnvRedisImage), DefaultRedisImage)
}

func (d Docker) limiterImage() string {
	return firstNonEmpty(d.LimiterImage, os.Getenv(EnvLimiterImage), DefaultLimiterImage)
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

var tcEnvOnce sync.Once

// configureTestcontainers sets the testcontainers variables described on
// Docker, once, before its configuration is first read.
func configureTestcontainers() {
	tcEnvOnce.Do(func() {
		host := os.Getenv("DOCKER_HOST")
		if os.Getenv("TESTCONTAINERS_HOST_OVERRIDE") == "" && (host == "" || strings.HasPrefix(host, "unix://")) {
			_ = os.Setenv("TESTCONTAINERS_HOST_OVERRIDE", "127.0.0.1")
		}
		if os.Getenv("TESTCONTAINERS_RYUK_DISABLED") == "" {
			_ = os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
		}
		if os.Getenv(EnvDockerDebug) != "1" {
			tclog.SetDefault(tclog.NewNoopLogger())
		}
	})
}

// DockerAvailable returns nil when a Docker engine answers, else an error
// wrapping ErrUnavailable that says why.
func DockerAvailable(ctx context.Context) error {
	configureTestcontainers()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return fmt.Errorf("docker: %w: no Docker engine answers: %w", envs.ErrUnavailable, err)
	}
	defer cli.Close()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		return fmt.Errorf("docker: %w: ping: %w", envs.ErrUnavailable, err)
	}
	return nil
}

// dockerStack is the state of one started docker stack.
type dockerStack struct {
	cli     *testcontainers.DockerClient
	runID   string
	labels  map[string]string
	network *testcontainers.DockerNetwork
	// controlToken guards the limiters' control endpoints.
	controlToken string
	// redis holds one container, or one per region.
	redis    []dockerRedis
	limiters []*testcontainers.DockerContainer
	logger   tclog.Logger
	// mu serialises Stack.OnClose calls from the goroutines starting
	// containers.
	mu sync.Mutex
}

// dockerRedis is one Redis container of a stack.
type dockerRedis struct {
	c     *testcontainers.DockerContainer
	alias string // its name on the stack's network
	addr  string // 127.0.0.1:port, fixed so that it survives stop/start
}

// redisAlias names Redis container g on the stack's network.
func redisAlias(g int) string {
	if g == 0 {
		return "redis"
	}
	return fmt.Sprintf("redis-%d", g)
}

// Start implements Environment.
func (d Docker) Start(ctx context.Context, spec envs.Spec) (*envs.Stack, error) {
	p, err := d.plan(spec)
	if err != nil {
		return nil, err
	}
	logf := spec.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	timeout := d.StartTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	began := time.Now()
	ds, st, err := d.connect(ctx, spec)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			_ = st.Close()
		}
	}()
	limImage, redisImage := d.limiterImage(), d.redisImage()
	if err := d.ensureLimiterImage(ctx, ds.cli, limImage, logf); err != nil {
		return nil, err
	}
	if err := d.checkImage(ctx, ds.cli, redisImage, "the Redis image (build "+LocalRedisImage+" with scripts/build-images.sh and set "+EnvRedisImage+"="+LocalRedisImage+")"); err != nil {
		return nil, err
	}
	if err := ds.createNetwork(ctx, st); err != nil {
		return nil, err
	}
	if err := ds.startStores(ctx, st, redisImage, p.regions, logf); err != nil {
		return nil, err
	}
	lims, err := ds.limiterContainers(p, spec, limImage)
	if err != nil {
		return nil, err
	}
	logf("docker: starting %d %s container(s) (%s) and the sink", len(lims), p.entry.Name, limImage)
	sinkURL, err := ds.startLimitersAndSink(ctx, st, lims, limImage)
	if err != nil {
		return nil, err
	}
	if os.Getenv(EnvDockerDebug) == "1" {
		// Registered after the containers: runs before they are removed.
		st.OnClose(func() error { ds.dumpLogs(logf); return nil })
	}
	st.Sink = &envs.RemoteSink{URL: sinkURL}
	faults := &dockerFaults{ds: ds, instances: st.Instances, instanceFaults: p.regions == nil, changes: len(p.declared.Changes) > 0, control: service.ControlClient{Token: ds.controlToken}}
	st.OnClose(faults.clearAll)
	st.Faults = faults
	ds.describe(st, p, len(lims), limImage, redisImage, time.Since(began))
	if p.regions != nil && p.regions.Mode == service.RegionReplicated {
		stop, err := ds.reconcile(st, p.declared, *p.regions, p.instances, logf)
		if err != nil {
			return nil, err
		}
		st.OnClose(func() error { stop(); return nil })
	}
	ok = true
	return st, nil
}

// startPlan is a checked Spec: what Start builds.
type startPlan struct {
	instances int
	entry     catalog.Entry
	// regions is nil for a single-region stack.
	regions  *envs.RegionSpec
	declared *policy.Policy
}

// plan checks spec against what the docker environment can start.
func (d Docker) plan(spec envs.Spec) (startPlan, error) {
	var p startPlan
	if spec.Policy == nil {
		return p, errors.New("docker: no policy")
	}
	p.instances = spec.Instances
	if p.instances <= 0 {
		p.instances = 1
	}
	if p.instances > envs.MaxInstances {
		return p, fmt.Errorf("docker: %d instances; at most %d", p.instances, envs.MaxInstances)
	}
	store := spec.Store
	if store == "" {
		store = catalog.Redis
	}
	if store != catalog.Redis {
		return p, fmt.Errorf("docker: store %q: the docker environment keeps state in its Redis container (Store: redis)", store)
	}
	var err error
	if p.entry, err = spec.CatalogEntry(store); err != nil {
		return p, fmt.Errorf("docker: %w", err)
	}
	if spec.Regions != nil {
		rs := *spec.Regions
		if err := rs.Validate(); err != nil {
			return p, fmt.Errorf("docker: %w", err)
		}
		if p.entry.Name != "token-bucket" {
			return p, fmt.Errorf("docker: regions run the reference token-bucket limiter (got %s)", p.entry.Name)
		}
		if p.instances*rs.Regions > envs.MaxInstances {
			return p, fmt.Errorf("docker: %d regions × %d instances; at most %d instances", rs.Regions, p.instances, envs.MaxInstances)
		}
		p.regions = &rs
	}
	if spec.RedisURL != "" {
		return p, errors.New("docker: RedisURL is not used by the docker environment: it runs its own Redis container")
	}
	if spec.RedisCluster > 0 {
		return p, errors.New("docker: a Redis Cluster is not supported in containers (the local environment runs one: RedisCluster N)")
	}
	p.declared = spec.Policy.WithAlgorithm(p.entry.Algorithm)
	if _, err := PolicyYAML(p.declared); err != nil {
		return p, fmt.Errorf("docker: %w", err)
	}
	return p, nil
}

// connect opens the Docker client and the stack, whose last closer sweeps
// away whatever carries the run's label.
func (d Docker) connect(ctx context.Context, spec envs.Spec) (*dockerStack, *envs.Stack, error) {
	configureTestcontainers()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("docker: %w: %w", envs.ErrUnavailable, err)
	}
	ds := &dockerStack{cli: cli, runID: newRunID(), logger: tclog.NewNoopLogger(), controlToken: newRunID() + newRunID()}
	if d.Verbose && spec.Log != nil {
		ds.logger = logfLogger(spec.Log)
	}
	ds.labels = map[string]string{LabelRun: ds.runID, LabelEnv: "docker"}
	for k, v := range d.Labels {
		ds.labels[k] = v
	}
	st := &envs.Stack{Env: "docker"}
	// Registered first, so it runs last: whatever a cancelled or failed
	// call left behind is found by its label and removed.
	st.OnClose(func() error {
		defer cli.Close()
		return ds.sweep()
	})
	return ds, st, nil
}

// createNetwork makes the stack's private network.
func (ds *dockerStack) createNetwork(ctx context.Context, st *envs.Stack) error {
	nw, err := tcnetwork.New(ctx, tcnetwork.WithLabels(ds.labels))
	if nw != nil {
		ds.network = nw
		st.OnClose(func() error {
			rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			return ignoreNotFound(nw.Remove(rctx))
		})
	}
	if err != nil {
		return fmt.Errorf("docker: create network: %w", err)
	}
	return nil
}

// startStores starts Redis: one container, one per region, or one global
// store for strict regions.
func (ds *dockerStack) startStores(ctx context.Context, st *envs.Stack, image string, regions *envs.RegionSpec, logf func(string, ...any)) error {
	n := 1
	if regions != nil && regions.Mode != service.RegionStrict {
		n = regions.Regions
	}
	for g := 0; g < n; g++ {
		r, err := ds.startRedis(ctx, st, image, redisAlias(g), logf)
		if err != nil {
			return err
		}
		ds.redis = append(ds.redis, r)
	}
	return nil
}

// configFile is where a limiter container reads its serve configuration.
const configFile = "/rlverify-serve.yaml"

// limiterContainers are the limiter containers of the plan, each given its
// serve configuration as a file (service.Config, read by `rlverify serve
// --config`). Every container serves the control endpoint, through which
// clock-skew and rules-down reach it (and regions are drained). Published
// ports are on 127.0.0.1 only, but the endpoint breaks the limiter: each
// stack gets its own token (serve refuses the endpoint on 0.0.0.0 without
// one).
func (ds *dockerStack) limiterContainers(p startPlan, spec envs.Spec, image string) ([]containerSpec, error) {
	var lims []containerSpec
	add := func(alias string, cfg service.Config) error {
		cfg.Addr, cfg.Limiter, cfg.Store, cfg.Policy = "0.0.0.0:8080", p.entry.Name, catalog.Redis, p.declared
		cfg.Downstream, cfg.Control, cfg.ControlToken = "http://sink:9090/", true, ds.controlToken
		data, err := cfg.Marshal()
		if err != nil {
			return fmt.Errorf("docker: %s: %w", alias, err)
		}
		lims = append(lims, containerSpec{
			role: "limiter", image: image, alias: alias, port: "8080/tcp",
			cmd:   []string{"serve", "--config", configFile},
			files: []testcontainers.ContainerFile{{Reader: bytes.NewReader(data), ContainerFilePath: configFile, FileMode: 0o644}},
			wait:  wait.ForHTTP("/healthz").WithPort("8080/tcp").WithStartupTimeout(90 * time.Second),
		})
		return nil
	}
	if p.regions == nil {
		for i := 0; i < p.instances; i++ {
			if err := add(fmt.Sprintf("limiter-%d", i), service.Config{Redis: "redis:6379", ClockOffset: policy.Duration(spec.Skew(i))}); err != nil {
				return nil, err
			}
		}
		return lims, nil
	}
	for g := 0; g < p.regions.Regions; g++ {
		store := g
		if p.regions.Mode == service.RegionStrict {
			store = 0
		}
		for i := 0; i < p.instances; i++ {
			cfg := service.Config{Redis: redisAlias(store) + ":6379", RegionMode: p.regions.Mode}
			if p.regions.Mode == service.RegionStrict && g > 0 {
				cfg.RedisLatency = policy.Duration(p.regions.Latency)
			}
			if err := add(fmt.Sprintf("limiter-r%d-%d", g, i), cfg); err != nil {
				return nil, err
			}
		}
	}
	return lims, nil
}

// startLimitersAndSink starts the sink and the limiters together and
// returns the sink's URL; the limiters' URLs become the stack's instances.
func (ds *dockerStack) startLimitersAndSink(ctx context.Context, st *envs.Stack, lims []containerSpec, image string) (string, error) {
	type result struct {
		i   int
		c   *testcontainers.DockerContainer
		err error
	}
	results := make(chan result, len(lims)+1)
	go func() {
		c, err := ds.run(ctx, st, containerSpec{
			role: "sink", image: image, alias: "sink", port: "9090/tcp",
			cmd:  []string{"sink", "--addr", "0.0.0.0:9090"},
			wait: wait.ForHTTP("/healthz").WithPort("9090/tcp").WithStartupTimeout(90 * time.Second),
		})
		results <- result{-1, c, err}
	}()
	for i, cs := range lims {
		go func() {
			c, err := ds.run(ctx, st, cs)
			results <- result{i, c, err}
		}()
	}
	ds.limiters = make([]*testcontainers.DockerContainer, len(lims))
	var sinkURL string
	var firstErr error
	for k := 0; k < len(lims)+1; k++ {
		r := <-results
		if r.err != nil {
			if firstErr == nil {
				firstErr = r.err
			}
			continue
		}
		if r.i >= 0 {
			ds.limiters[r.i] = r.c
			continue
		}
		url, err := endpoint(ctx, r.c, "9090/tcp")
		if err != nil && firstErr == nil {
			firstErr = err
		}
		sinkURL = url
	}
	if firstErr != nil {
		return "", firstErr
	}
	for _, c := range ds.limiters {
		url, err := endpoint(ctx, c, "8080/tcp")
		if err != nil {
			return "", err
		}
		st.Instances = append(st.Instances, url)
	}
	return sinkURL, nil
}

// describe writes the stack's store description and notes.
func (ds *dockerStack) describe(st *envs.Stack, p startPlan, limiters int, limImage, redisImage string, took time.Duration) {
	var stores []string
	for _, r := range ds.redis {
		stores = append(stores, r.alias+" at "+r.addr)
	}
	st.StoreDesc = fmt.Sprintf("redis container(s) %s: %s", redisImage, strings.Join(stores, ", "))
	st.Notes = append(st.Notes,
		fmt.Sprintf("docker: %d %s container(s) from %s, %d Redis container(s) from %s, run label %s=%s; started in %s", limiters, p.entry.Name, limImage, len(ds.redis), redisImage, LabelRun, ds.runID, took.Round(10*time.Millisecond)),
		"docker: store-down stops the Redis container(s) (they restart empty: no persistence); store-slow pauses them")
	if p.regions != nil {
		st.Notes = append(st.Notes, "regions: "+p.regions.Describe()+" (docker: instances limiter-rG-I, stores "+strings.Join(stores, ", ")+")")
		st.StoreDesc = p.regions.Describe() + "; " + st.StoreDesc
		return
	}
	st.Notes = append(st.Notes, "docker: clock-skew and rules-down reach each container through its control endpoint")
}

// containerSpec is one container of a stack.
type containerSpec struct {
	role, image, alias string
	port               string // exposed container port, e.g. "8080/tcp"
	hostPort           string // "" for a free one
	cmd                []string
	files              []testcontainers.ContainerFile
	wait               wait.Strategy
}

// run creates and starts one container on the stack's network. The
// container is registered for termination even when starting it fails.
func (ds *dockerStack) run(ctx context.Context, st *envs.Stack, cs containerSpec) (*testcontainers.DockerContainer, error) {
	labels := map[string]string{"rlverify.role": cs.role}
	for k, v := range ds.labels {
		labels[k] = v
	}
	port := dnetwork.MustParsePort(cs.port)
	req := testcontainers.ContainerRequest{
		Image:          cs.image,
		Cmd:            cs.cmd,
		ExposedPorts:   []string{cs.port},
		Labels:         labels,
		Networks:       []string{ds.network.Name},
		NetworkAliases: map[string][]string{ds.network.Name: {cs.alias}},
		Files:          cs.files,
		WaitingFor:     cs.wait,
		HostConfigModifier: func(hc *container.HostConfig) {
			hc.PortBindings = dnetwork.PortMap{port: {{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: cs.hostPort}}}
			// Names the network does not know (redis while it is stopped)
			// must fail inside the container, never be forwarded to the
			// host's resolvers: the upstream of Docker's embedded DNS is
			// the container's own loopback, where nothing listens.
			hc.DNS = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
		},
	}
	c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{ContainerRequest: req, Started: true, Logger: ds.logger})
	dc, _ := c.(*testcontainers.DockerContainer)
	if dc != nil {
		ds.mu.Lock()
		st.OnClose(func() error {
			tctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			return ignoreNotFound(dc.Terminate(tctx))
		})
		ds.mu.Unlock()
	}
	if err != nil {
		return nil, fmt.Errorf("docker: start %s container (%s): %w", cs.alias, cs.image, err)
	}
	if dc == nil {
		return nil, fmt.Errorf("docker: start %s container: unexpected container type %T", cs.alias, c)
	}
	return dc, nil
}

// endpoint returns http://127.0.0.1:PORT for a container's published port.
func endpoint(ctx context.Context, c *testcontainers.DockerContainer, port string) (string, error) {
	p, err := c.MappedPort(ctx, port)
	if err != nil {
		return "", fmt.Errorf("docker: published port of %s: %w", port, err)
	}
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(int(p.Num()))), nil
}

// sweep removes every container and network still carrying this run's label.
func (ds *dockerStack) sweep() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := make(client.Filters).Add("label", LabelRun+"="+ds.runID)
	var errs []error
	cs, err := ds.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		errs = append(errs, err)
	}
	for _, c := range cs.Items {
		if _, err := ds.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); ignoreNotFound(err) != nil {
			errs = append(errs, err)
		}
	}
	ns, err := ds.cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		errs = append(errs, err)
	}
	for _, nw := range ns.Items {
		if _, err := ds.cli.NetworkRemove(ctx, nw.ID, client.NetworkRemoveOptions{}); ignoreNotFound(err) != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("docker: clean up run %s: %w", ds.runID, err)
	}
	return nil
}

func ignoreNotFound(err error) error {
	if err == nil {
		return nil
	}
	s := strings.ToLower(err.Error())
	if strings.Contains(s, "no such") || strings.Contains(s, "not found") || strings.Contains(s, "is already in progress") {
		return nil
	}
	return err
}

// checkImage fails when image is absent and pulling is not allowed.
func (d Docker) checkImage(ctx context.Context, cli *testcontainers.DockerClient, image, what string) error {
	if _, err := cli.ImageInspect(ctx, image); err == nil {
		return nil
	}
	if d.NoPull || os.Getenv(EnvNoPull) == "1" {
		return fmt.Errorf("docker: %s %q is not present locally and pulling is off (%s=1 or NoPull)", what, image, EnvNoPull)
	}
	return nil // testcontainers pulls it
}

// waitRedis waits until addr answers PING.
func waitRedis(ctx context.Context, addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		r, err := redisproc.Do(addr, "PING")
		if err == nil && r == "PONG" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s does not answer PING within %s: %v", addr, d, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func newRunID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// PolicyYAML writes p as YAML that policy.Parse reads back to the same
// policy (both views of every limit are written; they agree).
func PolicyYAML(p *policy.Policy) ([]byte, error) {
	out, err := yaml.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("policy %s to YAML: %w", p.Name, err)
	}
	if _, err := policy.Parse("generated", out); err != nil {
		return nil, fmt.Errorf("policy %s does not survive YAML: %w", p.Name, err)
	}
	return out, nil
}

// logfLogger adapts a Spec.Log function to testcontainers' logger.
type logfLogger func(format string, args ...any)

func (l logfLogger) Printf(format string, args ...any) { l("docker: "+format, args...) }

// dumpLogs passes the last lines of each limiter container's log to logf.
func (ds *dockerStack) dumpLogs(logf func(string, ...any)) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, c := range ds.limiters {
		rc, err := c.Logs(ctx)
		if err != nil {
			logf("docker: limiter %d log: %v", i, err)
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(rc, 1<<20))
		rc.Close()
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		for _, l := range lines {
			logf("docker: limiter %d: %s", i, l)
		}
	}
}

// startRedis starts one Redis container on a fixed loopback port (so that
// a stop/start keeps it) and waits until it answers PING.
func (ds *dockerStack) startRedis(ctx context.Context, st *envs.Stack, image, alias string, logf func(string, ...any)) (dockerRedis, error) {
	port, err := redisproc.FreePort()
	if err != nil {
		return dockerRedis{}, fmt.Errorf("docker: %w", err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	logf("docker: starting %s (%s) on %s", alias, image, addr)
	c, err := ds.run(ctx, st, containerSpec{
		role: "redis", image: image, alias: alias, port: "6379/tcp", hostPort: strconv.Itoa(port),
		wait: wait.ForAll(
			wait.ForListeningPort("6379/tcp").SkipInternalCheck(),
			wait.ForLog("Ready to accept connections"),
		).WithDeadline(60 * time.Second),
	})
	if err != nil {
		return dockerRedis{}, err
	}
	if err := waitRedis(ctx, addr, 10*time.Second); err != nil {
		return dockerRedis{}, fmt.Errorf("docker: %s container: %w", alias, err)
	}
	return dockerRedis{c: c, alias: alias, addr: addr}, nil
}

// reconcile runs the regions' reconciliation loop from here: it drains
// each region's instances through their control endpoints and charges the
// other regions' Redis containers (through their published ports).
func (ds *dockerStack) reconcile(st *envs.Stack, pol *policy.Policy, rs envs.RegionSpec, perRegion int, logf func(string, ...any)) (func(), error) {
	replicas := make([]envs.Replica, rs.Regions)
	for g := range replicas {
		client := limiters.NewRedisClient(ds.redis[g].addr, time.Second)
		st.OnClose(client.Close)
		_, reps, err := service.RegionLimiters(pol, client, service.RegionReplicated)
		if err != nil {
			return nil, fmt.Errorf("docker: region %d: %w", g, err)
		}
		replicas[g] = &remoteReplica{instances: st.Instances[g*perRegion : (g+1)*perRegion], stores: service.RegionReplicas(reps), control: service.ControlClient{Token: ds.controlToken}}
	}
	return envs.Reconcile(replicas, rs, logf), nil
}

// remoteReplica is a region whose instances run elsewhere: their
// admissions come through their control endpoints; debits go straight to
// the region's store.
type remoteReplica struct {
	instances []string
	stores    service.RegionReplicas
	control   service.ControlClient
}

func (r *remoteReplica) Drain(ctx context.Context) (map[string]map[string]int64, error) {
	out := map[string]map[string]int64{}
	var errs []error
	for _, u := range r.instances {
		got, err := r.control.Drain(ctx, u)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for tier, keys := range got {
			if out[tier] == nil {
				out[tier] = map[string]int64{}
			}
			for k, n := range keys {
				out[tier][k] += n
			}
		}
	}
	return out, errors.Join(errs...)
}

func (r *remoteReplica) Debit(ctx context.Context, tier, key string, n int64) error {
	return r.stores.Debit(ctx, tier, key, n)
}

// dockerFaults injects faults into a docker stack: store faults act on its
// Redis container(s); clock-skew and rules-down go to every limiter
// container's control endpoint. Safe for concurrent use.
type dockerFaults struct {
	ds        *dockerStack
	instances []string
	// instanceFaults: the containers take clock-skew and rules-down (not
	// in region mode).
	instanceFaults bool
	// changes: the policy declares limit changes (limit-change goes to
	// every container's control endpoint; not in region mode).
	changes     bool
	control     service.ControlClient
	mu          sync.Mutex
	down        bool
	partitioned bool // down as a partition: reconnect, do not start
	paused      bool
}

// Supports implements FaultInjector.
func (f *dockerFaults) Supports(kind string) bool {
	switch kind {
	case envs.FaultStoreDown, envs.FaultStoreSlow:
		return true
	case envs.FaultClockSkew, envs.FaultRulesDown:
		return f.instanceFaults
	case service.FaultLimitChange:
		return f.instanceFaults && f.changes
	}
	return false
}

// Inject implements FaultInjector. store-down's param "reset" kills the
// Redis container(s) instead of stopping them, "partition" disconnects them
// from the stack's network (they keep their state; the published port comes
// back with the network). store-slow's param is
// ignored: a paused Redis does not answer at all (a stall), so every call
// takes the store timeout.
// clock-skew's param is read by ParseSkews; each container gets its shift.
func (f *dockerFaults) Inject(ctx context.Context, kind, param string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.Supports(kind) {
		return fmt.Errorf("docker: fault %q is not supported here (supported: %s)", kind, f.supported())
	}
	switch kind {
	case envs.FaultStoreDown:
		if f.down {
			return nil
		}
		if f.paused {
			if err := f.unpause(ctx); err != nil {
				return err
			}
		}
		stop := 2 * time.Second
		for _, r := range f.ds.redis {
			var err error
			switch param {
			case "":
				err = r.c.Stop(ctx, &stop)
			case envs.StoreDownReset:
				// Killed, not stopped: no orderly shutdown of its
				// connections.
				_, err = f.ds.cli.ContainerKill(ctx, r.c.GetContainerID(), client.ContainerKillOptions{Signal: "KILL"})
			case envs.StoreDownPartition:
				// Alive and keeping its state, off the stack's network.
				_, err = f.ds.cli.NetworkDisconnect(ctx, f.ds.network.ID, client.NetworkDisconnectOptions{Container: r.c.GetContainerID(), Force: true})
			default:
				return fmt.Errorf("docker: store-down: param %q: want none, %q or %q", param, envs.StoreDownReset, envs.StoreDownPartition)
			}
			if err != nil {
				return fmt.Errorf("docker: store-down %s: %s: %w", param, r.alias, err)
			}
		}
		f.down, f.partitioned = true, param == envs.StoreDownPartition
	case envs.FaultStoreSlow:
		if f.paused || f.down {
			return nil
		}
		for _, r := range f.ds.redis {
			if _, err := f.ds.cli.ContainerPause(ctx, r.c.GetContainerID(), client.ContainerPauseOptions{}); err != nil {
				return fmt.Errorf("docker: store-slow: pause %s: %w", r.alias, err)
			}
		}
		f.paused = true
	case envs.FaultClockSkew:
		skews, err := envs.ParseSkews(param, len(f.instances))
		if err != nil {
			return fmt.Errorf("docker: %w", err)
		}
		return f.each(func(i int, u string) error {
			return f.control.Fault(ctx, u, kind, skews[i].String(), true)
		})
	case envs.FaultRulesDown:
		return f.each(func(_ int, u string) error { return f.control.Fault(ctx, u, kind, "", true) })
	case service.FaultLimitChange:
		// Every container applies the declared change by name (its
		// policy carries the changes).
		return f.each(func(_ int, u string) error { return f.control.Fault(ctx, u, kind, strings.TrimSpace(param), true) })
	}
	return nil
}

func (f *dockerFaults) supported() string {
	kinds := []string{envs.FaultStoreDown, envs.FaultStoreSlow}
	if f.instanceFaults {
		kinds = append(kinds, envs.FaultClockSkew, envs.FaultRulesDown)
		if f.changes {
			kinds = append(kinds, service.FaultLimitChange)
		}
	}
	return strings.Join(kinds, ", ")
}

// each calls fn for every limiter container at once (a fault reaches them
// all within milliseconds) and joins the errors.
func (f *dockerFaults) each(fn func(i int, url string) error) error {
	errs := make([]error, len(f.instances))
	var wg sync.WaitGroup
	for i, u := range f.instances {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(i, u)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (f *dockerFaults) unpause(ctx context.Context) error {
	for _, r := range f.ds.redis {
		if _, err := f.ds.cli.ContainerUnpause(ctx, r.c.GetContainerID(), client.ContainerUnpauseOptions{}); err != nil {
			return fmt.Errorf("docker: unpause %s: %w", r.alias, err)
		}
	}
	f.paused = false
	return nil
}

// Clear implements FaultInjector. Clearing store-down starts Redis on the
// same host port (or reconnects it to the network) and waits until it
// answers PING.
func (f *dockerFaults) Clear(ctx context.Context, kind string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch kind {
	case envs.FaultStoreDown:
		if !f.down {
			return nil
		}
		for _, r := range f.ds.redis {
			var err error
			if f.partitioned {
				_, err = f.ds.cli.NetworkConnect(ctx, f.ds.network.ID, client.NetworkConnectOptions{
					Container: r.c.GetContainerID(), EndpointConfig: &dnetwork.EndpointSettings{Aliases: []string{r.alias}}})
			} else {
				err = r.c.Start(ctx)
			}
			if err != nil {
				return fmt.Errorf("docker: store-down: bring %s back: %w", r.alias, err)
			}
		}
		f.down, f.partitioned = false, false
		for _, r := range f.ds.redis {
			if err := waitRedis(ctx, r.addr, 15*time.Second); err != nil {
				return fmt.Errorf("docker: store-down: %s: %w", r.alias, err)
			}
		}
	case envs.FaultStoreSlow:
		if !f.paused {
			return nil
		}
		return f.unpause(ctx)
	case envs.FaultClockSkew, envs.FaultRulesDown, service.FaultLimitChange:
		if !f.instanceFaults || (kind == service.FaultLimitChange && !f.changes) {
			return nil
		}
		return f.each(func(_ int, u string) error { return f.control.Fault(ctx, u, kind, "", false) })
	}
	return nil
}

// clearAll unpauses Redis before the stack is torn down (a paused container
// cannot stop gracefully).
func (f *dockerFaults) clearAll() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.paused {
		return f.unpause(ctx)
	}
	return nil
}
