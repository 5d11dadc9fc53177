package envs

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/envs/redisproc"
	"github.com/rlverify/rlverify/internal/envtest"
)

func needRedisServer(t *testing.T) {
	t.Helper()
	if err := redisproc.Available(); err != nil {
		envtest.SkipOrFail(t, "the local environment needs redis-server and redis-cli: %v", err)
	}
}

// redisServerPIDs lists the redis-server processes that are children of this
// test process.
func redisServerPIDs(t *testing.T) []string {
	t.Helper()
	out, _ := exec.Command("pgrep", "-P", strconv.Itoa(os.Getpid()), "redis-server").Output()
	return strings.Fields(string(out))
}

func TestLocal(t *testing.T) {
	needRedisServer(t)
	for _, tc := range []struct {
		name    string
		cluster int
	}{
		{"single", 0},
		{"cluster3", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := envtest.Policy(t)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			env := Local{Cluster: tc.cluster}
			require.Equal(t, "local", env.Name())
			st, err := env.Start(ctx, Spec{Policy: p, Limiter: "token-bucket", Store: "redis", Instances: 3})
			require.NoError(t, err)
			closed := false
			defer func() {
				if !closed {
					_ = st.Close()
				}
			}()
			require.Len(t, st.Instances, 3)
			require.Contains(t, st.StoreDesc, "redis")
			t.Logf("store: %s", st.StoreDesc)

			t.Run("burst-respects-quota", func(t *testing.T) {
				envtest.CheckQuota(t, p, envtest.FireBurst(t, st.Instances, "free-burst", 45))
			})
			t.Run("sink-counts-arrivals", func(t *testing.T) {
				start := time.Now()
				b := envtest.FireBurst(t, st.Instances, "free-sink", 12)
				snap, err := st.Sink.Read(context.Background(), start)
				require.NoError(t, err)
				require.NotEmpty(t, snap)
				all := snap[len(snap)-1]
				require.Equal(t, "*", all.Key)
				require.EqualValues(t, b.Admitted(), all.Arrivals, "every admitted request reaches the sink")
			})
			t.Run("store-down-fails-closed-and-recovers", func(t *testing.T) {
				envtest.CheckStoreDownAndRecover(t, st.Instances, st.Faults, p, "free-outage")
			})
			t.Run("store-slow", func(t *testing.T) {
				require.True(t, st.Faults.Supports(FaultStoreSlow))
				require.Error(t, st.Faults.Inject(ctx, FaultStoreSlow, "nonsense"))
				require.NoError(t, st.Faults.Inject(ctx, FaultStoreSlow, "2500ms"))
				// Slower than the 2s store timeout: fail closed answers 503.
				require.Equal(t, http.StatusServiceUnavailable, envtest.One(st.Instances[0], "free-slow"))
				require.NoError(t, st.Faults.Clear(ctx, FaultStoreSlow))
			})
			t.Run("clock-skew", func(t *testing.T) {
				require.True(t, st.Faults.Supports(FaultClockSkew))
				require.NoError(t, st.Faults.Inject(ctx, FaultClockSkew, "2s"))
				require.NoError(t, st.Faults.Clear(ctx, FaultClockSkew))
			})

			require.NotEmpty(t, redisServerPIDs(t), "redis-server children while the stack runs")
			require.NoError(t, st.Close())
			closed = true
			require.Empty(t, redisServerPIDs(t), "Stack.Close must stop every redis-server")
		})
	}
}

// TestLocalOnlyOversells shows the instances check has something to catch:
// faulty/local-only keeps per-instance state, so 3 instances admit about 3K.
func TestLocalOnlyOversells(t *testing.T) {
	needRedisServer(t)
	p := envtest.Policy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := Local{}.Start(ctx, Spec{Policy: p, Limiter: "faulty/local-only", Store: "redis", Instances: 3})
	require.NoError(t, err)
	defer st.Close()
	b := envtest.FireBurst(t, st.Instances, "free-local", 60)
	k := float64(p.Tiers[0].Limits[0].Capacity)
	t.Logf("faulty/local-only: %v in %s", b.Status, b.Elapsed)
	require.Greater(t, float64(b.Admitted()), envtest.Envelope(p, b.Elapsed), "local-only state must oversell across instances")
	require.GreaterOrEqual(t, float64(b.Admitted()), 2.5*k, "about 3× K expected from 3 instances")
}

func TestLocalRejects(t *testing.T) {
	needRedisServer(t)
	p := envtest.Policy(t)
	ctx := context.Background()
	_, err := Local{Cluster: 2}.Start(ctx, Spec{Policy: p, Limiter: "token-bucket"})
	require.ErrorContains(t, err, "3 … 16")
	_, err = Local{}.Start(ctx, Spec{Policy: p, Limiter: "token-bucket", Store: "memory"})
	require.ErrorContains(t, err, "Store: redis")
	_, err = Local{}.Start(ctx, Spec{Limiter: "token-bucket"})
	require.Error(t, err)
	require.Empty(t, redisServerPIDs(t))
}

func TestNormalizeLoopback(t *testing.T) {
	require.Equal(t, "127.0.0.1:7000", normalizeLoopback("localhost:7000"))
	require.Equal(t, "127.0.0.1:7000", normalizeLoopback("[::1]:7000"))
	require.Equal(t, "10.0.0.1:7000", normalizeLoopback("10.0.0.1:7000"))
	require.Equal(t, "junk", normalizeLoopback("junk"))
}
