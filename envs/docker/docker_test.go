package docker

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"
	"github.com/testcontainers/testcontainers-go"

	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/internal/envtest"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/service"
)

// testLimiterImage is the limiter image the tests build once per test binary
// from the current source.
const testLimiterImage = "rlverify/limiter:envtest"

var (
	imageOnce sync.Once
	imageErr  error
)

// dockerForTest returns a Docker environment whose images exist locally
// (nothing is pulled), building the limiter image once from ./cmd/rlverify.
// Without Docker it skips, or fails under CI=true.
func dockerForTest(t *testing.T) Docker {
	t.Helper()
	ctx := context.Background()
	if err := DockerAvailable(ctx); err != nil {
		envtest.SkipOrFail(t, "the docker environment needs a Docker engine (scripts/docker-up.sh starts one): %v", err)
	}
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	require.NoError(t, err)
	defer cli.Close()

	imageOnce.Do(func() {
		dir := filepath.Join(os.TempDir(), "rlverify-envtest")
		if imageErr = os.MkdirAll(dir, 0o755); imageErr != nil {
			return
		}
		bin := filepath.Join(dir, "rlverify")
		cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/rlverify")
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			imageErr = errors.New("CGO_ENABLED=0 go build ./cmd/rlverify: " + err.Error() + ": " + string(out))
			return
		}
		began := time.Now()
		imageErr = BuildLimiterImage(ctx, cli.Client, testLimiterImage, bin)
		t.Logf("built %s in %s", testLimiterImage, time.Since(began).Round(time.Millisecond))
	})
	require.NoError(t, imageErr)

	redisImage := os.Getenv(EnvRedisImage)
	if redisImage == "" {
		for _, img := range []string{LocalRedisImage, DefaultRedisImage} {
			if _, err := cli.ImageInspect(ctx, img); err == nil {
				redisImage = img
				break
			}
		}
	}
	if redisImage == "" {
		envtest.SkipOrFail(t, "no Redis image present locally (the tests never pull): run scripts/build-images.sh to build %s", LocalRedisImage)
	}
	if _, err := cli.ImageInspect(ctx, redisImage); err != nil {
		envtest.SkipOrFail(t, "Redis image %s (from %s) is not present locally: %v", redisImage, EnvRedisImage, err)
	}
	return Docker{RedisImage: redisImage, LimiterImage: testLimiterImage, NoPull: true}
}

// leftovers lists the containers and networks labelled key=value.
func leftovers(t *testing.T, key, value string) (containers, networks []string) {
	t.Helper()
	ctx := context.Background()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	require.NoError(t, err)
	defer cli.Close()
	f := make(client.Filters).Add("label", key+"="+value)
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	require.NoError(t, err)
	for _, c := range cs.Items {
		containers = append(containers, c.ID[:12]+" "+c.Image+" "+string(c.State))
	}
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	require.NoError(t, err)
	for _, n := range ns.Items {
		networks = append(networks, n.Name)
	}
	return containers, networks
}

func TestDocker(t *testing.T) {
	d := dockerForTest(t)
	tag := newRunID()
	d.Labels = map[string]string{"rlverify.test": tag}
	// The policy declares a limit change, which limit-change applies
	// through every container's control endpoint.
	p := envtest.PolicyWithChange(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	began := time.Now()
	st, err := d.Start(ctx, envs.Spec{Policy: p, Limiter: "token-bucket", Store: "redis", Instances: 3, Log: t.Logf})
	require.NoError(t, err)
	closed := false
	defer func() {
		if !closed {
			_ = st.Close()
		}
	}()
	t.Logf("stack up in %s: %v; %s", time.Since(began).Round(time.Millisecond), st.Instances, st.StoreDesc)
	require.Equal(t, "docker", st.Env)
	require.Len(t, st.Instances, 3)
	cs, ns := leftovers(t, "rlverify.test", tag)
	require.Len(t, cs, 5, "redis, sink and 3 limiters carry the label")
	require.Len(t, ns, 1)

	t.Run("burst-respects-quota-and-sink-counts", func(t *testing.T) {
		start := time.Now()
		b := envtest.FireBurst(t, st.Instances, "free-docker-burst", 45)
		envtest.CheckQuota(t, p, b)
		snap, err := st.Sink.Read(context.Background(), start)
		require.NoError(t, err)
		require.NotEmpty(t, snap)
		all := snap[len(snap)-1]
		require.Equal(t, "*", all.Key)
		require.EqualValues(t, b.Admitted(), all.Arrivals, "every admitted request reaches the sink container")
	})
	t.Run("store-down-stop-start", func(t *testing.T) {
		began := time.Now()
		envtest.CheckStoreDownAndRecover(t, st.Instances, st.Faults, p, "free-docker-outage")
		t.Logf("store-down cycle took %s", time.Since(began).Round(time.Millisecond))
	})
	t.Run("store-slow-pause", func(t *testing.T) {
		require.NoError(t, st.Faults.Inject(ctx, envs.FaultStoreSlow, "2500ms"))
		// A paused Redis never answers: fail closed answers 503 after the
		// store timeout.
		require.Equal(t, http.StatusServiceUnavailable, envtest.One(st.Instances[0], "free-docker-slow"))
		require.NoError(t, st.Faults.Clear(ctx, envs.FaultStoreSlow))
	})
	t.Run("instance-faults-through-control", func(t *testing.T) {
		require.True(t, st.Faults.Supports(envs.FaultClockSkew))
		require.True(t, st.Faults.Supports(envs.FaultRulesDown))
		fallback := func() string {
			req, _ := http.NewRequest(http.MethodGet, st.Instances[2]+"/", nil)
			req.Header.Set("X-API-Key", "free-docker-rules")
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			return resp.Header.Get(service.FallbackHeader)
		}
		require.NoError(t, st.Faults.Inject(ctx, service.FaultRulesDown, ""))
		require.Equal(t, service.FallbackRules, fallback(), "every container applies its conservative defaults")
		require.NoError(t, st.Faults.Clear(ctx, service.FaultRulesDown))
		require.Empty(t, fallback())
		require.NoError(t, st.Faults.Inject(ctx, service.FaultClockSkew, "+2s@1"))
		require.NoError(t, st.Faults.Clear(ctx, service.FaultClockSkew))
		require.ErrorContains(t, st.Faults.Inject(ctx, service.FaultClockSkew, "+2s@7"), "instance")
	})
	t.Run("limit-change-through-control", func(t *testing.T) {
		// Each container decides over the shared Redis with the changed
		// limits and advertises them; clearing gives the declared ones
		// back; a change the policy does not declare is refused.
		began := time.Now()
		require.True(t, st.Faults.Supports(service.FaultLimitChange))
		advertised := func(inst int, key string) (int, string) {
			req, _ := http.NewRequest(http.MethodGet, st.Instances[inst]+"/", nil)
			req.Header.Set("X-API-Key", key)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			return resp.StatusCode, resp.Header.Get("X-RateLimit-Limit")
		}
		require.NoError(t, st.Faults.Inject(ctx, service.FaultLimitChange, "halve"))
		admitted := 0
		for i := range 9 {
			code, lim := advertised(i%3, "free-docker-change")
			require.Equal(t, "5", lim, "instance %d advertises the changed limit", i%3)
			if code == http.StatusOK {
				admitted++
			}
		}
		// 5 from the changed bucket, plus at most what 1/s refills while
		// the nine requests run.
		require.GreaterOrEqual(t, admitted, 5)
		require.LessOrEqual(t, admitted, 5+int(time.Since(began)/time.Second)+1, "the changed capacity holds across the containers")
		require.NoError(t, st.Faults.Clear(ctx, service.FaultLimitChange))
		_, lim := advertised(1, "free-docker-change-2")
		require.Equal(t, "10", lim, "the declared limit is back")
		require.ErrorContains(t, st.Faults.Inject(ctx, service.FaultLimitChange, "triple"), "no limit change \"triple\"")
		t.Logf("limit-change cycle took %s", time.Since(began).Round(time.Millisecond))
	})

	began = time.Now()
	require.NoError(t, st.Close())
	closed = true
	t.Logf("torn down in %s", time.Since(began).Round(time.Millisecond))
	cs, ns = leftovers(t, "rlverify.test", tag)
	require.Empty(t, cs, "containers left after Close")
	require.Empty(t, ns, "networks left after Close")
}

// TestDockerCancelledStart is Ctrl-C during start-up: Start returns an error
// and leaves no container or network behind.
func TestDockerCancelledStart(t *testing.T) {
	d := dockerForTest(t)
	tag := newRunID()
	d.Labels = map[string]string{"rlverify.test": tag}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(700*time.Millisecond, cancel)
	st, err := d.Start(ctx, envs.Spec{Policy: envtest.Policy(t), Limiter: "token-bucket", Instances: 2})
	if err == nil {
		// The machine was fast enough to finish first: Close must clean up.
		require.NoError(t, st.Close())
	}
	cs, ns := leftovers(t, "rlverify.test", tag)
	require.Empty(t, cs, "containers left after a cancelled Start")
	require.Empty(t, ns, "networks left after a cancelled Start")
}

func TestDockerRejects(t *testing.T) {
	p := envtest.Policy(t)
	ctx := context.Background()
	_, err := Docker{}.Start(ctx, envs.Spec{Policy: p, Limiter: "token-bucket", Store: "memory"})
	require.ErrorContains(t, err, "Store: redis")
	_, err = Docker{}.Start(ctx, envs.Spec{Policy: p, Limiter: "gcra", Regions: &envs.RegionSpec{Regions: 2}})
	require.ErrorContains(t, err, "regions run the reference token-bucket")
	_, err = Docker{}.Start(ctx, envs.Spec{Policy: p, Limiter: "token-bucket", Regions: &envs.RegionSpec{Regions: 2, Mode: "sideways"}})
	require.ErrorContains(t, err, `region mode "sideways"`)
	_, err = Docker{}.Start(ctx, envs.Spec{Policy: p, Limiter: "token-bucket", Instances: 40, Regions: &envs.RegionSpec{Regions: 2}})
	require.ErrorContains(t, err, "at most 64 instances")
	_, err = Docker{}.Start(ctx, envs.Spec{Policy: p, Limiter: "token-bucket", RedisCluster: 3})
	require.ErrorContains(t, err, "Cluster")
	_, err = Docker{}.Start(ctx, envs.Spec{Policy: p, Limiter: "no-such-limiter"})
	require.Error(t, err)
}

func TestDockerImageDefaults(t *testing.T) {
	t.Setenv(EnvRedisImage, "")
	t.Setenv(EnvLimiterImage, "")
	require.Equal(t, DefaultRedisImage, Docker{}.redisImage())
	require.Equal(t, DefaultLimiterImage, Docker{}.limiterImage())
	t.Setenv(EnvRedisImage, LocalRedisImage)
	require.Equal(t, LocalRedisImage, Docker{}.redisImage())
	require.Equal(t, "mine:1", Docker{RedisImage: "mine:1"}.redisImage())
}

func TestStaticBinaryCheck(t *testing.T) {
	// The race-enabled test binary needs cgo, so it is dynamically linked.
	exe, err := os.Executable()
	require.NoError(t, err)
	static, err := isStaticELF(exe)
	require.NoError(t, err)
	if !static {
		_, err := Docker{Binary: exe}.staticBinary()
		require.ErrorContains(t, err, "CGO_ENABLED=0")
	}
	_, err = Docker{Binary: "/nonexistent/rlverify"}.staticBinary()
	require.Error(t, err)
}

func TestPolicyYAMLRoundTrip(t *testing.T) {
	p := envtest.Policy(t)
	for _, alg := range []string{"token-bucket", "gcra", "fixed-window", "sliding-log", "sliding-counter"} {
		declared := p.WithAlgorithm(policyAlg(alg))
		b, err := PolicyYAML(declared)
		require.NoError(t, err, alg)
		back, err := policyParse(b)
		require.NoError(t, err, alg)
		require.Equal(t, declared.Tiers, back.Tiers, alg)
		require.Equal(t, declared.Failure, back.Failure, alg)
		require.Equal(t, declared.Headers, back.Headers, alg)
	}
}

func policyAlg(s string) policy.Algorithm { return policy.Algorithm(s) }

func policyParse(b []byte) (*policy.Policy, error) { return policy.Parse("roundtrip.yaml", b) }
