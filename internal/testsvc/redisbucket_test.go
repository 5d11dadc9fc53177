package testsvc

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/envs/redisproc"
)

// startRedis starts a real redis-server on a free loopback port for the
// test, or skips the test when redis-server is not installed.
func startRedis(t *testing.T) *redisproc.Server {
	t.Helper()
	if err := redisproc.Available(); err != nil {
		t.Skipf("redisbucket tests need a real Redis: %v", err)
	}
	srv, err := redisproc.Start()
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	return srv
}

var namespaces atomic.Int64

// newRedisBucket builds an instance in a namespace of its own unless cfg
// names one.
func newRedisBucket(t *testing.T, cfg RedisBucketConfig) *RedisBucket {
	t.Helper()
	if cfg.Namespace == "" {
		cfg.Namespace = fmt.Sprintf("t%d:", namespaces.Add(1))
	}
	b := must[*RedisBucket](t)(NewRedisBucket(cfg))
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func tenant(key string) req {
	return req{method: http.MethodPut, target: "/any/path?x=1", header: hdr(TenantHeader, key)}
}

func TestRedisBucketDecidesInRedis(t *testing.T) {
	srv := startRedis(t)
	c := newClock()
	b := newRedisBucket(t, RedisBucketConfig{Common: Common{Now: c.Now}, Addr: srv.Addr})

	assert.Equal(t, http.StatusUnauthorized, req{target: "/x"}.send(b).Code)
	// K=6, r=3/s: a token every 333334µs (1/3 s rounded up to the µs).
	for i := 0; i < 6; i++ {
		w := tenant("acme").send(b)
		require.Equal(t, http.StatusOK, w.Code, "request %d: %s", i+1, w.Body)
		assert.Equal(t, "6", w.Header().Get("X-RateLimit-Limit"))
		assert.Equal(t, strconv.Itoa(5-i), w.Header().Get("X-RateLimit-Remaining"))
		assert.Equal(t, strconv.Itoa([]int{1, 1, 1, 2, 2, 2}[i]), w.Header().Get("X-RateLimit-Reset"), "(i+1)/3 s to full, rounded up")
	}
	w := tenant("acme").send(b)
	require.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Equal(t, "1", w.Header().Get("Retry-After"))
	assert.Equal(t, "0", w.Header().Get("X-RateLimit-Remaining"))

	c.At(333333 * time.Microsecond)
	assert.Equal(t, http.StatusTooManyRequests, tenant("acme").send(b).Code, "1µs early")
	c.At(333334 * time.Microsecond)
	assert.Equal(t, http.StatusOK, tenant("acme").send(b).Code)
	assert.Equal(t, http.StatusOK, tenant("Acme").send(b).Code, "case-sensitive: another tenant")
	assert.Equal(t, map[string]int64{"acme": 7, "Acme": 1}, b.g.up.ByKey())
}

func TestRedisBucketRedisTime(t *testing.T) {
	srv := startRedis(t)
	// Without Common.Now the script takes Redis TIME; a slow refill keeps
	// the test independent of how fast this machine is.
	b := newRedisBucket(t, RedisBucketConfig{Addr: srv.Addr, Bucket: Bucket{Capacity: 3, Rate: 0.05}})
	assert.Equal(t, []int{200, 200, 200, 429}, tenant("k").statuses(b, 4))
	w := tenant("k").send(b)
	ra, err := strconv.Atoi(w.Header().Get("Retry-After"))
	require.NoError(t, err)
	assert.InDelta(t, 20, ra, 1, "a token every 20s")
}

func TestRedisBucketInstancesShareOrKeepState(t *testing.T) {
	srv := startRedis(t)
	c := newClock()
	up := NewUpstream()
	shared := []*RedisBucket{
		newRedisBucket(t, RedisBucketConfig{Common: Common{Now: c.Now, Upstream: up}, Addr: srv.Addr, Namespace: "shared:"}),
		newRedisBucket(t, RedisBucketConfig{Common: Common{Now: c.Now, Upstream: up}, Addr: srv.Addr, Namespace: "shared:"}),
	}
	local := []*RedisBucket{
		newRedisBucket(t, RedisBucketConfig{Common: Common{Now: c.Now}, Addr: srv.Addr}),
		newRedisBucket(t, RedisBucketConfig{Common: Common{Now: c.Now}, Addr: srv.Addr}),
	}
	admitted := func(bs []*RedisBucket) int {
		n := 0
		for i := 0; i < 20; i++ {
			if tenant("k").send(bs[i%2]).Code == http.StatusOK {
				n++
			}
		}
		return n
	}
	assert.Equal(t, 6, admitted(shared), "one namespace: one bucket")
	assert.Equal(t, int64(6), up.Total())
	assert.Equal(t, 12, admitted(local), "a namespace each: a bucket each")
}

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	port, err := redisproc.FreePort()
	require.NoError(t, err)
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// silentAddr returns a loopback address that accepts connections and never
// answers: a store slower than any timeout.
func silentAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

func TestRedisBucketFailureModes(t *testing.T) {
	tests := []struct {
		name   string
		mode   string
		quirks Quirks
		want   int
	}{
		{"closed", FailClosed, Quirks{}, http.StatusServiceUnavailable},
		{"default is closed", "", Quirks{}, http.StatusServiceUnavailable},
		{"open", FailOpen, Quirks{}, http.StatusOK},
		{"fail-open quirk while declaring closed", FailClosed, Quirks{FailOpen: true}, http.StatusOK},
	}
	for _, store := range []struct {
		name string
		addr func(*testing.T) string
	}{{"down", deadAddr}, {"silent", silentAddr}} {
		for _, tt := range tests {
			t.Run(store.name+"/"+tt.name, func(t *testing.T) {
				b := newRedisBucket(t, RedisBucketConfig{Common: Common{Quirks: tt.quirks}, Addr: store.addr(t), FailMode: tt.mode, StoreTimeout: 40 * time.Millisecond})
				start := time.Now()
				w := tenant("k").send(b)
				took := time.Since(start)
				t.Logf("decided in %s", took)
				assert.Equal(t, tt.want, w.Code, w.Body.String())
				assert.Less(t, took, 2*time.Second, "bounded by the store timeout (generously, on a busy machine)")
				assert.Empty(t, w.Header().Get("X-RateLimit-Remaining"), "no limiter, no rate-limit headers")
				if tt.want == http.StatusServiceUnavailable {
					assert.Equal(t, "1", w.Header().Get("Retry-After"))
					assert.Zero(t, b.g.up.Total())
				} else {
					assert.Equal(t, int64(1), b.g.up.Count("k"), "failing open forwards")
				}
			})
		}
	}
}

func TestRedisBucketStoreOutageAndRecovery(t *testing.T) {
	srv := startRedis(t)
	c := newClock()
	b := newRedisBucket(t, RedisBucketConfig{Common: Common{Now: c.Now}, Addr: srv.Addr})
	assert.Equal(t, repeat(http.StatusOK, 3), tenant("k").statuses(b, 3))
	srv.Stop()
	assert.Equal(t, repeat(http.StatusServiceUnavailable, 3), tenant("k").statuses(b, 3))
	require.NoError(t, srv.Restart())
	// The restarted Redis is empty: the bucket starts full again.
	got := []int{}
	for i := 0; i < 7; i++ {
		got = append(got, tenant("k").send(b).Code)
	}
	assert.Equal(t, append(repeat(http.StatusOK, 6), http.StatusTooManyRequests), got)
}

func TestRedisBucketQuirks(t *testing.T) {
	srv := startRedis(t)
	t.Run("racy", func(t *testing.T) {
		for _, racy := range []time.Duration{0, 20 * time.Millisecond} {
			b := newRedisBucket(t, RedisBucketConfig{Common: Common{Quirks: Quirks{Racy: racy}}, Addr: srv.Addr, Bucket: Bucket{Capacity: 6, Rate: 0.05}})
			got := burst(b, tenant("k"), 24)
			if racy == 0 {
				assert.Equal(t, map[int]int{200: 6, 429: 18}, got, "the script is atomic")
			} else {
				assert.Greater(t, got[http.StatusOK], 6, "GET then SET oversells a burst: %v", got)
			}
		}
	})
	t.Run("deduct-on-reject", func(t *testing.T) {
		for _, deduct := range []bool{false, true} {
			c := newClock()
			b := newRedisBucket(t, RedisBucketConfig{Common: Common{Now: c.Now, Quirks: Quirks{DeductOnReject: deduct}}, Addr: srv.Addr, Bucket: Bucket{Capacity: 2, Rate: 10}})
			assert.Equal(t, []int{200, 200, 429, 429, 429}, tenant("k").statuses(b, 5))
			c.At(100 * time.Millisecond)
			want := http.StatusOK
			if deduct {
				want = http.StatusTooManyRequests
			}
			assert.Equal(t, want, tenant("k").send(b).Code, "deduct-on-reject=%v", deduct)
		}
	})
	t.Run("faster and capacity+1", func(t *testing.T) {
		c := newClock()
		b := newRedisBucket(t, RedisBucketConfig{Common: Common{Now: c.Now, Quirks: Quirks{Faster: 2, CapacityPlusOne: true}}, Addr: srv.Addr})
		assert.Equal(t, append(repeat(http.StatusOK, 7), http.StatusTooManyRequests), tenant("k").statuses(b, 8))
		c.At(166667 * time.Microsecond)
		assert.Equal(t, http.StatusOK, tenant("k").send(b).Code, "a token every 1/6 s")
	})
}

func TestRedisBucketConfigErrors(t *testing.T) {
	for _, tt := range []struct {
		cfg  RedisBucketConfig
		want string
	}{
		{RedisBucketConfig{}, "Redis address"},
		{RedisBucketConfig{Addr: "x:1", FailMode: "local"}, `fail mode "local"`},
		{RedisBucketConfig{Addr: "x:1", StoreTimeout: time.Microsecond}, "store timeout"},
		{RedisBucketConfig{Addr: "x:1", Bucket: Bucket{Capacity: 1, Rate: -1}}, "rate"},
	} {
		_, err := NewRedisBucket(tt.cfg)
		require.Error(t, err)
		assert.Contains(t, err.Error(), tt.want)
	}
}
