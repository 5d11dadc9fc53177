package targets

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
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
	"gopkg.in/yaml.v3"

	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/targets/redisproc"
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
	// EnvDockerDebug=1 keeps testcontainers' own log lines on stderr.
	EnvDockerDebug = "RLVERIFY_DOCKER_DEBUG"
)

// Docker starts a stack of containers with testcontainers-go: a private
// network; a Redis container (network alias "redis", its port published on
// 127.0.0.1 at a fixed free port so it survives stop/start); N limiter
// containers running `rlverify serve` with the declared policy copied in
// (aliases "limiter-0" …); and a sink container running `rlverify sink`
// (alias "sink") whose stats are read through its published port. Every
// published port is bound to 127.0.0.1.
//
// Every container and the network carry LabelRun=<run id>; Stack.Close
// terminates them and then removes anything left with that label. A Start
// that fails or whose context is cancelled cleans up before returning.
//
// Faults: store-down stops the Redis container and Clear starts it again
// (Redis has no persistence: it comes back empty), store-slow pauses it
// (every store call hangs until the store timeout).
// Clock skew is not supported (containers share the host's clock), nor is
// cutting one instance off the network (see docs/environments.md).
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
		return fmt.Errorf("docker: %w: no Docker engine answers: %w", ErrUnavailable, err)
	}
	defer cli.Close()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		return fmt.Errorf("docker: %w: ping: %w", ErrUnavailable, err)
	}
	return nil
}

// dockerStack is the state of one started docker stack.
type dockerStack struct {
	cli       *testcontainers.DockerClient
	runID     string
	labels    map[string]string
	network   *testcontainers.DockerNetwork
	redis     *testcontainers.DockerContainer
	redisAddr string // 127.0.0.1:port
	limiters  []*testcontainers.DockerContainer
	logger    tclog.Logger
	// mu serialises Stack.OnClose calls from the goroutines starting
	// containers.
	mu sync.Mutex
}

// Start implements Environment.
func (d Docker) Start(ctx context.Context, spec Spec) (*Stack, error) {
	if spec.Policy == nil {
		return nil, errors.New("docker: no policy")
	}
	n := spec.Instances
	if n <= 0 {
		n = 1
	}
	if n > MaxInstances {
		return nil, fmt.Errorf("docker: %d instances; at most %d", n, MaxInstances)
	}
	store := spec.Store
	if store == "" {
		store = catalog.Redis
	}
	if store != catalog.Redis {
		return nil, fmt.Errorf("docker: store %q: the docker environment keeps state in its Redis container (use --store redis)", store)
	}
	entry, err := catalog.Lookup(spec.Limiter, store)
	if err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	for _, s := range spec.Skews {
		if s != 0 {
			return nil, errors.New("docker: per-instance clock skew is not supported in containers (use the embedded or local environment)")
		}
	}
	if spec.RedisURL != "" {
		return nil, errors.New("docker: --redis is not used by the docker environment: it runs its own Redis container")
	}
	if spec.RedisCluster > 0 {
		return nil, errors.New("docker: a Redis Cluster is not supported in containers (use --env local --redis-cluster N)")
	}
	declared := spec.Policy.WithAlgorithm(entry.Algorithm)
	polYAML, err := PolicyYAML(declared)
	if err != nil {
		return nil, fmt.Errorf("docker: %w", err)
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

	configureTestcontainers()
	began := time.Now()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, fmt.Errorf("docker: %w: %w", ErrUnavailable, err)
	}
	ds := &dockerStack{cli: cli, runID: newRunID(), logger: tclog.NewNoopLogger()}
	if d.Verbose && spec.Log != nil {
		ds.logger = logfLogger(spec.Log)
	}
	ds.labels = map[string]string{LabelRun: ds.runID, LabelEnv: "docker"}
	for k, v := range d.Labels {
		ds.labels[k] = v
	}
	st := &Stack{Env: "docker"}
	// Registered first, so it runs last: whatever a cancelled or failed
	// call left behind is found by its label and removed.
	st.OnClose(func() error {
		defer cli.Close()
		return ds.sweep()
	})
	ok := false
	defer func() {
		if !ok {
			_ = st.Close()
		}
	}()

	limImage := d.limiterImage()
	if err := d.ensureLimiterImage(ctx, cli, limImage, logf); err != nil {
		return nil, err
	}
	redisImage := d.redisImage()
	if err := d.checkImage(ctx, cli, redisImage, "the Redis image (build "+LocalRedisImage+" with scripts/build-images.sh and set "+EnvRedisImage+"="+LocalRedisImage+")"); err != nil {
		return nil, err
	}

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
		return nil, fmt.Errorf("docker: create network: %w", err)
	}

	// Redis, on a fixed loopback port so that a stop/start keeps it.
	redisPort, err := freeLoopbackPort()
	if err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	ds.redisAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(redisPort))
	logf("docker: starting redis (%s) on %s", redisImage, ds.redisAddr)
	rc, err := ds.run(ctx, st, containerSpec{
		role: "redis", image: redisImage, alias: "redis", port: "6379/tcp", hostPort: strconv.Itoa(redisPort),
		wait: wait.ForAll(
			wait.ForListeningPort("6379/tcp").SkipInternalCheck(),
			wait.ForLog("Ready to accept connections"),
		).WithDeadline(60 * time.Second),
	})
	if err != nil {
		return nil, err
	}
	ds.redis = rc
	if err := waitRedis(ctx, ds.redisAddr, 10*time.Second); err != nil {
		return nil, fmt.Errorf("docker: redis container: %w", err)
	}

	// The sink and the limiters start together.
	type result struct {
		i   int
		c   *testcontainers.DockerContainer
		err error
	}
	results := make(chan result, n+1)
	go func() {
		c, err := ds.run(ctx, st, containerSpec{
			role: "sink", image: limImage, alias: "sink", port: "9090/tcp",
			cmd:  []string{"sink", "--addr", "0.0.0.0:9090"},
			wait: wait.ForHTTP("/healthz").WithPort("9090/tcp").WithStartupTimeout(60 * time.Second),
		})
		results <- result{-1, c, err}
	}()
	logf("docker: starting %d %s instance(s) (%s) and the sink", n, entry.Name, limImage)
	for i := 0; i < n; i++ {
		go func(i int) {
			c, err := ds.run(ctx, st, containerSpec{
				role: "limiter", image: limImage, alias: fmt.Sprintf("limiter-%d", i), port: "8080/tcp",
				cmd: []string{"serve", "--addr", "0.0.0.0:8080", "--limiter", entry.Name, "--store", "redis",
					"--redis", "redis:6379", "--downstream", "http://sink:9090/", "--policy", "/policy.yaml"},
				files: []testcontainers.ContainerFile{{Reader: bytes.NewReader(polYAML), ContainerFilePath: "/policy.yaml", FileMode: 0o644}},
				wait:  wait.ForHTTP("/healthz").WithPort("8080/tcp").WithStartupTimeout(60 * time.Second),
			})
			results <- result{i, c, err}
		}(i)
	}
	ds.limiters = make([]*testcontainers.DockerContainer, n)
	var sinkURL string
	var firstErr error
	for k := 0; k < n+1; k++ {
		r := <-results
		if r.err != nil {
			if firstErr == nil {
				firstErr = r.err
			}
			continue
		}
		url, err := endpoint(ctx, r.c, map[bool]string{true: "9090/tcp", false: "8080/tcp"}[r.i < 0])
		if err != nil && firstErr == nil {
			firstErr = err
		}
		if r.i < 0 {
			sinkURL = url
		} else {
			ds.limiters[r.i] = r.c
		}
	}
	if firstErr != nil {
		return nil, firstErr
	}
	for _, c := range ds.limiters {
		url, err := endpoint(ctx, c, "8080/tcp")
		if err != nil {
			return nil, err
		}
		st.Instances = append(st.Instances, url)
	}
	st.Sink = &RemoteSink{URL: sinkURL}
	faults := &dockerFaults{ds: ds}
	st.OnClose(faults.clearAll)
	st.Faults = faults
	st.StoreDesc = fmt.Sprintf("redis container %s at %s (network alias redis:6379)", redisImage, ds.redisAddr)
	st.Notes = append(st.Notes,
		fmt.Sprintf("docker: %d %s container(s) from %s, Redis %s, run label %s=%s; started in %s", n, entry.Name, limImage, redisImage, LabelRun, ds.runID, time.Since(began).Round(10*time.Millisecond)),
		"docker: store-down stops the Redis container (it restarts empty: no persistence); store-slow pauses it")
	ok = true
	return st, nil
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
func (ds *dockerStack) run(ctx context.Context, st *Stack, cs containerSpec) (*testcontainers.DockerContainer, error) {
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

// freeLoopbackPort returns a TCP port free on 127.0.0.1 right now.
func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
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

// dockerFaults injects faults into a docker stack. Safe for concurrent use.
type dockerFaults struct {
	ds     *dockerStack
	mu     sync.Mutex
	down   bool
	paused bool
}

// Supports implements FaultInjector.
func (f *dockerFaults) Supports(kind string) bool {
	switch kind {
	case FaultStoreDown, FaultStoreSlow:
		return true
	}
	return false
}

// Inject implements FaultInjector. store-slow's param is ignored: a paused
// Redis does not answer at all, so every call takes the store timeout.
func (f *dockerFaults) Inject(ctx context.Context, kind, param string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch kind {
	case FaultStoreDown:
		if f.down {
			return nil
		}
		if f.paused {
			if err := f.unpause(ctx); err != nil {
				return err
			}
		}
		stop := 2 * time.Second
		if err := f.ds.redis.Stop(ctx, &stop); err != nil {
			return fmt.Errorf("docker: store-down: stop redis: %w", err)
		}
		f.down = true
	case FaultStoreSlow:
		if f.paused || f.down {
			return nil
		}
		if _, err := f.ds.cli.ContainerPause(ctx, f.ds.redis.GetContainerID(), client.ContainerPauseOptions{}); err != nil {
			return fmt.Errorf("docker: store-slow: pause redis: %w", err)
		}
		f.paused = true
	default:
		return fmt.Errorf("docker: fault %q is not supported in containers (supported: %s, %s)", kind, FaultStoreDown, FaultStoreSlow)
	}
	return nil
}

func (f *dockerFaults) unpause(ctx context.Context) error {
	if _, err := f.ds.cli.ContainerUnpause(ctx, f.ds.redis.GetContainerID(), client.ContainerUnpauseOptions{}); err != nil {
		return fmt.Errorf("docker: unpause redis: %w", err)
	}
	f.paused = false
	return nil
}

// Clear implements FaultInjector. Clearing store-down starts Redis on the
// same host port and waits until it answers PING.
func (f *dockerFaults) Clear(ctx context.Context, kind string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch kind {
	case FaultStoreDown:
		if !f.down {
			return nil
		}
		if err := f.ds.redis.Start(ctx); err != nil {
			return fmt.Errorf("docker: store-down: start redis again: %w", err)
		}
		f.down = false
		return waitRedis(ctx, f.ds.redisAddr, 15*time.Second)
	case FaultStoreSlow:
		if !f.paused {
			return nil
		}
		return f.unpause(ctx)
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
