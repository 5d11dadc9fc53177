package faultproxy

import (
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// echoServer answers every connection by echoing what it reads.
func echoServer(t *testing.T) string {
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
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// exchange writes ping through c and reads the echo within wait.
func exchange(c net.Conn, wait time.Duration) error {
	_ = c.SetDeadline(time.Now().Add(wait))
	if _, err := c.Write([]byte("ping")); err != nil {
		return err
	}
	buf := make([]byte, 4)
	_, err := io.ReadFull(c, buf)
	return err
}

// TestFaultProxy: each of the proxy's four faults, on a connection opened
// before it and on one opened during it, and the proxy mended after it.
func TestFaultProxy(t *testing.T) {
	p, err := New(echoServer(t))
	require.NoError(t, err)
	defer p.Close()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", p.Addr())
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	isTimeout := func(err error) bool {
		var ne net.Error
		return errors.As(err, &ne) && ne.Timeout()
	}
	isClosed := func(err error) bool {
		return err != nil && !isTimeout(err)
	}
	isReset := func(err error) bool {
		return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF)
	}

	for _, tc := range []struct {
		name   string
		break_ func()
		mend   func()
		// what an exchange during the fault gives
		want func(error) bool
	}{
		{"down", func() { p.SetDown(true) }, func() { p.SetDown(false) }, isClosed},
		{"reset", func() { p.SetReset(true) }, func() { p.SetReset(false) }, isReset},
		{"stall", func() { p.SetStall(true) }, func() { p.SetStall(false) }, isTimeout},
		{"latency beyond the deadline", func() { p.SetLatency(400 * time.Millisecond) }, func() { p.SetLatency(0) }, isTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := dial()
			require.NoError(t, exchange(before, 2*time.Second), "healthy")
			tc.break_()
			err := exchange(before, 150*time.Millisecond)
			require.True(t, tc.want(err), "open connection: %v", err)
			// A reset may already refuse the connect.
			c, err := net.Dial("tcp", p.Addr())
			if err == nil {
				err = exchange(c, 150*time.Millisecond)
				c.Close()
			}
			require.True(t, tc.want(err), "new connection: %v", err)
			tc.mend()
			require.NoError(t, exchange(dial(), 2*time.Second), "mended")
		})
	}

	// Latency below the deadline delays but delivers, both ways.
	p.SetLatency(30 * time.Millisecond)
	c := dial()
	start := time.Now()
	require.NoError(t, exchange(c, 2*time.Second))
	require.GreaterOrEqual(t, time.Since(start), 60*time.Millisecond, "30 ms each way")
}

// A proxy to itself is refused (issue 26 item 15: `--store-proxy A=A` spun
// at full CPU for the rest of the run).
func TestListenRefusesAProxyToItself(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	_, port, _ := net.SplitHostPort(addr)
	for _, backend := range []string{addr, "localhost:" + port, "0.0.0.0:" + port} {
		_, err := Listen(addr, backend)
		require.ErrorContains(t, err, "is the proxy's own address", backend)
	}
	p, err := Listen(addr, "127.0.0.1:1")
	require.NoError(t, err, "another port is another endpoint")
	require.NoError(t, p.Close())
}

func TestSameEndpoint(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"127.0.0.1:6379", "127.0.0.1:6379", true},
		{"localhost:6379", "127.0.0.1:6379", true},
		{"0.0.0.0:6379", "127.0.0.1:6379", true},
		{":6379", "127.0.0.1:6379", true},
		{"127.0.0.1:6379", "0.0.0.0:6379", true},
		{"[::1]:6379", "[::1]:6379", true},
		{"127.0.0.1:16379", "127.0.0.1:6379", false},
		{"127.0.0.1:6379", "192.0.2.1:6379", false},
		{"127.0.0.1:6379", "no-such-host.invalid:6379", false},
		{"nonsense", "127.0.0.1:6379", false},
	} {
		require.Equal(t, tc.same, SameEndpoint(tc.a, tc.b), "%s vs %s", tc.a, tc.b)
	}
}
