package gateway

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policies"
	"github.com/rlverify/rlverify/policy"
)

// processesUnder lists the pids whose command line mentions dir.
func processesUnder(t *testing.T, dir string) []string {
	t.Helper()
	cmdlines, err := filepath.Glob("/proc/[0-9]*/cmdline")
	require.NoError(t, err)
	var pids []string
	for _, f := range cmdlines {
		b, err := os.ReadFile(f)
		if err == nil && strings.Contains(string(b), dir) {
			pids = append(pids, filepath.Base(filepath.Dir(f)))
		}
	}
	return pids
}

func slowRefill(t *testing.T) *policy.Policy {
	t.Helper()
	b, ok := policies.Get("slow-refill")
	require.True(t, ok)
	p, err := policy.Parse("builtin:slow-refill", b)
	require.NoError(t, err)
	return p
}

// burst sends n requests for key at once to the instances in turn and
// returns how many were admitted.
func burst(t *testing.T, st *envs.Stack, key string, n int) int {
	t.Helper()
	var mu sync.Mutex
	admitted := 0
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			req, err := http.NewRequest(http.MethodGet, st.Instances[i%len(st.Instances)]+"/api", nil)
			require.NoError(t, err)
			req.Header.Set("X-API-Key", key)
			resp, err := http.DefaultClient.Do(req)
			if !assert.NoError(t, err) {
				return
			}
			resp.Body.Close()
			assert.Contains(t, []int{200, 429}, resp.StatusCode)
			if resp.StatusCode == 200 {
				mu.Lock()
				admitted++
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	return admitted
}

func sinkArrivals(t *testing.T, st *envs.Stack, key string) int64 {
	t.Helper()
	got, err := st.Sink.Read(context.Background(), time.Time{})
	require.NoError(t, err)
	for _, s := range got {
		if s.Key == key {
			return s.Arrivals
		}
	}
	return 0
}

// A gateway stack admits one bucket per instance (slow-refill: K=5, one
// token every 3s), forwards what it admits to the sink, and leaves no
// process or temporary directory behind when it closes.
func TestProcessStacksCleanUp(t *testing.T) {
	for _, e := range []struct {
		gw  catalog.Gateway
		alg policy.Algorithm
	}{
		{catalog.Gateway{Kind: catalog.NGINX, Mode: "nodelay"}, policy.TokenBucket},
		{catalog.Gateway{Kind: catalog.NGINX, Mode: "delay"}, policy.TokenBucket},
		{catalog.Gateway{Kind: catalog.HAProxy}, policy.SlidingCounter},
	} {
		t.Run(e.gw.Kind+"-"+e.gw.Mode, func(t *testing.T) {
			if err := Available(e.gw.Kind); err != nil {
				t.Skipf("%v", err)
			}
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			kept := t.TempDir()
			env := Environment{Gateway: e.gw, KeepConfigs: kept}
			pol := slowRefill(t).WithAlgorithm(e.alg)
			k := int64(5)
			if e.gw.Mode == "delay" {
				// The delaying nginx holds the admitted excess until it
				// drains: K=2 refilled at 1/s delays one request per
				// instance by a second, not four by three seconds each.
				k = 2
				pol.Tiers[0].Limits[0] = policy.Limit{Algorithm: policy.TokenBucket, Capacity: k, Rate: 1}
				require.NoError(t, pol.Validate())
			}
			st, err := env.Start(context.Background(), envs.Spec{Policy: pol, Instances: 2})
			require.NoError(t, err)
			closed := false
			defer func() {
				if !closed {
					_ = st.Close()
				}
			}()
			require.Len(t, st.Instances, 2)
			assert.NotEmpty(t, processesUnder(t, tmp), "the gateway processes run from their temporary directories")
			// 12 requests over 2 instances: 6 each, K of which each
			// instance's own bucket admits (the delaying nginx too, late).
			got := burst(t, st, "free-cleanup", 12)
			assert.Equal(t, int(2*k), got, "each instance keeps its own bucket of K")
			assert.Equal(t, 2*k, sinkArrivals(t, st, "free-cleanup"), "admitted requests reach the sink under their key")
			files, err := os.ReadDir(kept)
			require.NoError(t, err)
			assert.Len(t, files, 2, "a copy of each instance's configuration is kept")

			require.NoError(t, st.Close())
			closed = true
			assert.Empty(t, processesUnder(t, tmp), "no gateway process survives Close")
			left, err := os.ReadDir(tmp)
			require.NoError(t, err)
			assert.Empty(t, left, "no temporary directory survives Close")
		})
	}
}

func TestMissingProgramIsUnavailable(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := findProgram("no-such-gateway")
	require.ErrorIs(t, err, ErrUnavailable)
	require.ErrorContains(t, err, "apt-get install nginx haproxy")
	t.Setenv("RLVERIFY_NGINX", "/nonexistent/nginx")
	_, err = findProgram("nginx")
	require.ErrorIs(t, err, ErrUnavailable)
	require.ErrorContains(t, err, "$RLVERIFY_NGINX")
}

// A bad configuration fails the start with the program's own message and
// leaves nothing behind.
func TestFailedStartCleansUp(t *testing.T) {
	prog, err := findProgram("nginx")
	if err != nil {
		t.Skipf("%v", err)
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	_, err = startProcesses(context.Background(), Environment{}, policy.Default(), 1, processKind{
		name: "nginx", file: "nginx.conf", prog: prog,
		render: func(string, string, string) string { return "this is not a directive;\n" },
		args: func(dir, conf string) []string {
			return []string{"-p", dir + "/", "-c", conf, "-e", filepath.Join(dir, "error.log")}
		},
	})
	require.ErrorContains(t, err, "unknown directive")
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, left)
	assert.Empty(t, processesUnder(t, tmp))
}

// processesWithEnv lists the pids whose environment mentions s.
func processesWithEnv(t *testing.T, s string) []string {
	t.Helper()
	files, err := filepath.Glob("/proc/[0-9]*/environ")
	require.NoError(t, err)
	var pids []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && strings.Contains(string(b), s) {
			pids = append(pids, filepath.Base(filepath.Dir(f)))
		}
	}
	return pids
}

// envoyproxy/ratelimit as a stack: two instances on loopback speaking
// gRPC, a store proxy the plans can break, the configuration kept; Close
// leaves no instance, redis-server or directory behind.
func TestEnvoyStackCleansUp(t *testing.T) {
	if err := Available(catalog.EnvoyRateLimit); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v", err)
		}
		t.Skipf("%v", err)
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	kept := t.TempDir()
	env := Environment{Gateway: catalog.Gateway{Kind: catalog.EnvoyRateLimit}, KeepConfigs: kept}
	st, err := env.Start(context.Background(), envs.Spec{Policy: policy.Default().WithAlgorithm(policy.FixedWindow), Instances: 2})
	require.NoError(t, err)
	closed := false
	defer func() {
		if !closed {
			_ = st.Close()
		}
	}()
	require.Len(t, st.Instances, 2)
	for _, in := range st.Instances {
		require.True(t, strings.HasPrefix(in, "grpc://127.0.0.1:"), in)
	}
	require.NotNil(t, st.Faults)
	assert.True(t, st.Faults.Supports(envs.FaultStoreDown))
	assert.Nil(t, st.Sink, "a rate-limit service forwards nothing")
	assert.Len(t, processesWithEnv(t, "RUNTIME_ROOT="+tmp), 2, "one process per instance, configured under TMPDIR")
	b, err := os.ReadFile(filepath.Join(kept, "envoy-ratelimit.yaml"))
	require.NoError(t, err)
	assert.Contains(t, string(b), "requests_per_unit: 5")

	require.NoError(t, st.Close())
	closed = true
	assert.Empty(t, processesWithEnv(t, "RUNTIME_ROOT="+tmp), "no instance survives Close")
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, left, "no temporary directory survives Close")
}

// Without the binary the kind is unavailable, with the command that
// builds it: compare skips the column as for a missing nginx.
func TestEnvoyNotBuiltIsUnavailable(t *testing.T) {
	t.Setenv(EnvoyProgramEnv, filepath.Join(t.TempDir(), "envoy-ratelimit"))
	require.ErrorIs(t, Available(catalog.EnvoyRateLimit), ErrUnavailable)
	_, err := Environment{Gateway: catalog.Gateway{Kind: catalog.EnvoyRateLimit}}.Start(context.Background(), envs.Spec{Policy: policy.Default().WithAlgorithm(policy.FixedWindow)})
	require.ErrorIs(t, err, ErrUnavailable)
	require.ErrorContains(t, err, "bash scripts/envoy-ratelimit.sh")
	require.ErrorContains(t, err, "$"+EnvoyProgramEnv)
	assert.Equal(t, "bash scripts/envoy-ratelimit.sh (and apt-get install redis-server)", Install(catalog.EnvoyRateLimit))
}
