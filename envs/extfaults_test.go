package envs

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	tpclient "github.com/Shopify/toxiproxy/v2/client"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/envs/redisproc"
)

// echoStore answers every line with itself, like a tiny store.
func echoStore(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends one line through addr and reports how long the echo took,
// or the error.
func roundTrip(addr string, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return 0, err
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(c, buf); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

func freeAddr(t *testing.T) string {
	t.Helper()
	p, err := redisproc.FreePort()
	require.NoError(t, err)
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
}

// faultsBehave checks every store fault of inj on a proxy at addr.
func faultsBehave(t *testing.T, inj FaultInjector, addr string) {
	t.Helper()
	ctx := context.Background()
	_, err := roundTrip(addr, time.Second)
	require.NoError(t, err, "the proxy passes traffic")

	require.NoError(t, inj.Inject(ctx, FaultStoreDown, ""))
	_, err = roundTrip(addr, 300*time.Millisecond)
	require.Error(t, err, "store-down refuses")
	require.NoError(t, inj.Clear(ctx, FaultStoreDown))
	require.Eventually(t, func() bool { _, err := roundTrip(addr, time.Second); return err == nil }, 5*time.Second, 50*time.Millisecond)

	require.NoError(t, inj.Inject(ctx, FaultStoreSlow, "200ms"))
	d, err := roundTrip(addr, 2*time.Second)
	require.NoError(t, err)
	require.GreaterOrEqual(t, d, 200*time.Millisecond, "store-slow adds its latency")
	require.NoError(t, inj.Clear(ctx, FaultStoreSlow))

	require.NoError(t, inj.Inject(ctx, FaultStoreSlow, StoreSlowStall))
	_, err = roundTrip(addr, 300*time.Millisecond)
	require.Error(t, err, "a stall passes nothing")
	require.NoError(t, inj.Clear(ctx, FaultStoreSlow))

	require.NoError(t, inj.Inject(ctx, FaultStoreDown, StoreDownReset))
	_, err = roundTrip(addr, 500*time.Millisecond)
	require.Error(t, err, "reset")
	require.NoError(t, inj.Clear(ctx, FaultStoreDown))
	require.Eventually(t, func() bool { _, err := roundTrip(addr, time.Second); return err == nil }, 5*time.Second, 50*time.Millisecond)
}

func TestStoreProxyFaults(t *testing.T) {
	up := echoStore(t)
	listen := freeAddr(t)
	sp, err := StartStoreProxy([]ProxySpec{{Listen: listen, Upstream: up}})
	require.NoError(t, err)
	defer sp.Close()
	faultsBehave(t, sp, listen)

	_, err = StartStoreProxy([]ProxySpec{{Listen: listen, Upstream: up}})
	require.ErrorContains(t, err, "cannot listen on "+listen)
}

// A service whose store client is still backing off when the proxy starts
// is waited for (bounded), and one that never connects is named, not waited
// for beyond the bound.
func TestStoreProxyWaitsForTheServicesStoreClient(t *testing.T) {
	up := echoStore(t)
	listen := freeAddr(t)
	sp, err := StartStoreProxy([]ProxySpec{{Listen: listen, Upstream: up}})
	require.NoError(t, err)
	defer sp.Close()

	start := time.Now()
	require.Equal(t, []string{listen}, sp.Unserved(context.Background(), 100*time.Millisecond), "nothing connected yet")
	require.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond)

	// A client that retries once its backoff ends, as go-redis does.
	go func() {
		time.Sleep(150 * time.Millisecond)
		_, _ = roundTrip(listen, 2*time.Second)
	}()
	require.Empty(t, sp.Unserved(context.Background(), 10*time.Second), "the late client is seen")
	require.Empty(t, sp.Unserved(context.Background(), time.Hour), "once seen, no more waiting")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	other, err := StartStoreProxy([]ProxySpec{{Listen: freeAddr(t), Upstream: up}})
	require.NoError(t, err)
	defer other.Close()
	require.Len(t, other.Unserved(ctx, time.Hour), 1, "a cancelled run does not wait")
}

// A real Toxiproxy server (its API server, in process), driven through its
// HTTP API as a user's would be.
func TestToxiproxyAPIFaults(t *testing.T) {
	up := echoStore(t)
	apiAddr := freeAddr(t)
	host, port, _ := net.SplitHostPort(apiAddr)
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	go server.Listen(host, port)
	api := "http://" + apiAddr
	require.Eventually(t, func() bool {
		resp, err := http.Get(api + "/version")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	}, 5*time.Second, 20*time.Millisecond)
	listen := freeAddr(t)
	_, err := tpclient.NewClient(api).CreateProxy("redis", listen, up)
	require.NoError(t, err)

	_, err = ConnectToxiproxy(api, []string{"nope"})
	require.ErrorContains(t, err, `has no proxy "nope" (it has: redis)`)
	_, err = ConnectToxiproxy("http://"+freeAddr(t), []string{"redis"})
	require.ErrorContains(t, err, "is unreachable")

	tp, err := ConnectToxiproxy(api, []string{"redis"})
	require.NoError(t, err)
	faultsBehave(t, tp, listen)
}

func TestHooksRunTheUsersCommands(t *testing.T) {
	dir := t.TempDir()
	h := NewHooks([]Hook{
		{Kind: FaultStoreDown, Action: "inject", Command: fmt.Sprintf("echo down $RLVERIFY_FAULT_PARAM > %s/state", dir)},
		{Kind: FaultStoreDown, Action: "clear", Command: fmt.Sprintf("echo up > %s/state; cat %s/state", dir, dir)},
	}, time.Second)
	ctx := context.Background()
	require.True(t, h.Supports(FaultStoreDown))
	require.False(t, h.Supports(FaultStoreSlow))
	require.NoError(t, h.Inject(ctx, FaultStoreDown, "reset"))
	require.NoError(t, h.Clear(ctx, FaultStoreDown))
	rec, ok := h.LastHook(FaultStoreDown, "clear")
	require.True(t, ok)
	require.Equal(t, "up", strings.TrimSpace(rec.Output))
	require.Equal(t, 0, rec.Exit)

	slow := NewHooks([]Hook{{Kind: FaultStoreDown, Action: "inject", Command: "sleep 5"}}, 100*time.Millisecond)
	start := time.Now()
	err := slow.Inject(ctx, FaultStoreDown, "")
	require.ErrorContains(t, err, "did not finish within 100ms")
	require.Less(t, time.Since(start), 3*time.Second, "a hanging command is killed at its timeout")
}

// Issue 26 items 12 and 14: a hook runs in its own process group, killed
// whole at its timeout; a process it starts in the background does not
// stop the run; its output is capped while it is read; a failure is ErrHook.
func TestHooksOwnTheirProcessGroup(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	slow := NewHooks([]Hook{{Kind: FaultStoreDown, Action: "inject", Command: "sleep 600 & echo $! > " + pidFile + "; wait"}}, 300*time.Millisecond)
	err := slow.Inject(ctx, FaultStoreDown, "")
	require.ErrorIs(t, err, ErrHook)
	require.ErrorContains(t, err, "its process group was killed")
	b, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return syscall.Kill(pid, 0) != nil }, 5*time.Second, 20*time.Millisecond, "the hook's sleep 600 is gone")

	var logged []string
	bg := NewHooks([]Hook{{Kind: FaultStoreDown, Action: "inject", Command: "sleep 600 & echo $! > " + pidFile}}, 5*time.Second)
	bg.Log = func(format string, a ...any) { logged = append(logged, fmt.Sprintf(format, a...)) }
	require.NoError(t, bg.Inject(ctx, FaultStoreDown, ""), "was: exec: WaitDelay expired before I/O complete")
	require.Len(t, logged, 1)
	require.Contains(t, logged[0], "left a process running in the background")
	b, err = os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL), "the background process is the hook's to start")

	loud := NewHooks([]Hook{{Kind: FaultStoreDown, Action: "inject", Command: "head -c 50000000 /dev/zero; exit 4"}}, 10*time.Second)
	err = loud.Inject(ctx, FaultStoreDown, "")
	require.ErrorIs(t, err, ErrHook)
	require.ErrorContains(t, err, "output truncated: 49995904 more bytes not kept")
	rec, ok := loud.LastHook(FaultStoreDown, "inject")
	require.True(t, ok)
	require.Equal(t, 4, rec.Exit)
	require.Less(t, len(rec.Output), MaxHookOutput+100)
}
