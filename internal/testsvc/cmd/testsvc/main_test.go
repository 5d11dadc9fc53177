package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/envs/redisproc"
	"github.com/rlverify/rlverify/internal/testsvc"
)

// start runs the command in process until the test ends and returns the
// URLs it printed.
func start(t *testing.T, n int, args ...string) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, args, pw, io.Discard)
		_ = pw.CloseWithError(io.EOF)
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Error("testsvc did not stop")
		}
	})
	var urls []string
	sc := bufio.NewScanner(pr)
	for len(urls) < n && sc.Scan() {
		urls = append(urls, sc.Text())
	}
	require.Len(t, urls, n, "the command printed %v", urls)
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	return urls
}

func status(t *testing.T, method, url string, header http.Header, body string) int {
	t.Helper()
	r, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	r.Header = header
	resp, err := http.DefaultClient.Do(r)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func admitted(t *testing.T, urls []string, n int, path string) int {
	got := 0
	for i := 0; i < n; i++ {
		if status(t, http.MethodGet, urls[i%len(urls)]+path, http.Header{}, "") == http.StatusOK {
			got++
		}
	}
	return got
}

func TestRunInstancesShareStateUnlessLocal(t *testing.T) {
	// One long window, so the test does not depend on this machine's speed.
	urls := start(t, 3, "--service", "windowed", "--instances", "3", "--window", "1h")
	assert.Equal(t, 10, admitted(t, urls, 30, "/search/x?api_key=k"))
	urls = start(t, 2, "--service", "windowed", "--addr", "127.0.0.1:0,127.0.0.1:0", "--window", "1h", "--local-state")
	assert.Equal(t, 20, admitted(t, urls, 30, "/search/x?api_key=k"))
}

func TestRunOrdersWithKeysTiersAndQuirk(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys.yaml")
	require.NoError(t, os.WriteFile(keys, []byte("gold: [g1]\n"), 0o600))
	urls := start(t, 1, "--service", "orders", "--keys", keys, "--tier", "gold=3@0.01", "--quirk", "capacity+1")
	h := http.Header{"Authorization": {"Bearer g1"}, "Content-Type": {"application/json"}}
	var got []int
	for i := 0; i < 5; i++ {
		got = append(got, status(t, http.MethodPost, urls[0]+testsvc.OrdersPath, h, `{"sku":"x"}`))
	}
	assert.Equal(t, []int{201, 201, 201, 201, 429}, got, "K=3, and one more under capacity+1")
	h.Set("Authorization", "Bearer fr_alpha")
	assert.Equal(t, http.StatusUnauthorized, status(t, http.MethodPost, urls[0]+testsvc.OrdersPath, h, `{"sku":"x"}`), "the given allowlist replaces the built-in one")
}

func TestRunRedisBucket(t *testing.T) {
	if err := redisproc.Available(); err != nil {
		t.Skipf("needs a real Redis: %v", err)
	}
	srv, err := redisproc.Start()
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	urls := start(t, 2, "--service", "redisbucket", "--redis", srv.Addr, "--instances", "2", "--capacity", "4", "--rate", "0.01")
	h := func() http.Header { return http.Header{testsvc.TenantHeader: {"t1"}} }
	got := 0
	for i := 0; i < 10; i++ {
		if status(t, http.MethodGet, urls[i%2]+"/x", h(), "") == http.StatusOK {
			got++
		}
	}
	assert.Equal(t, 4, got, "both instances decide on one Redis bucket")
	srv.Stop()
	assert.Equal(t, http.StatusServiceUnavailable, status(t, http.MethodGet, urls[0]+"/x", h(), ""), "fails closed by default")
}

func TestPrintPolicy(t *testing.T) {
	for _, tt := range []struct {
		args []string
		file string
	}{
		{[]string{"--service", "sessions"}, "sessions"},
		{[]string{"--service", "redisbucket"}, "redisbucket"},
		{[]string{"--service", "redisbucket", "--fail-mode", "open"}, "redisbucket-open"},
	} {
		var out strings.Builder
		require.NoError(t, run(context.Background(), append(tt.args, "--print-policy"), &out, io.Discard))
		want, err := os.ReadFile(filepath.Join("..", "..", "policies", tt.file+".yaml"))
		require.NoError(t, err)
		assert.Equal(t, string(want), out.String())
	}
	var out strings.Builder
	require.NoError(t, run(context.Background(), []string{"--service", "windowed", "--serve-last", "--skip", "int-", "--print-policy"}, &out, io.Discard))
	assert.Contains(t, out.String(), "  tenant_occurrence: last\n  limiter_occurrence: last\n")
	assert.Contains(t, out.String(), "exempt:\n  - name: skipped\n    key_prefix: \"int-\"\n")
}

func TestUsageErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{}, `--service ""`},
		{[]string{"--service", "nginx"}, "want one of orders"},
		{[]string{"--service", "orders", "--skip", "int-"}, "--skip applies to windowed, not orders"},
		{[]string{"--service", "orders", "--guard", "30ms"}, "--guard applies to sessions, not orders"},
		{[]string{"--service", "sessions", "--redis", "x:1"}, "--redis applies to redisbucket"},
		{[]string{"--service", "orders", "--quirk", "nope"}, "unknown quirk"},
		{[]string{"--service", "orders", "--quirk", "no-fold-case"}, "orders does not have quirk no-fold-case"},
		{[]string{"--service", "orders", "--tier", "gold"}, "want NAME=K@R"},
		{[]string{"--service", "orders", "--tier", "free=0@1"}, "capacity 0"},
		{[]string{"--service", "orders", "--keys", "/nonexistent/keys.yaml"}, "/nonexistent/keys.yaml"},
		{[]string{"--service", "windowed", "--instances", "0"}, "--instances 0"},
		{[]string{"--service", "windowed", "--addr", "localhost"}, "want HOST:PORT"},
		{[]string{"--service", "windowed", "--addr", "127.0.0.1:65535", "--instances", "2"}, "outside 0 … 65535"},
		{[]string{"--service", "windowed", "--addr", "127.0.0.1:0,127.0.0.1:0", "--instances", "3"}, "lists 2 addresses"},
		{[]string{"--service", "redisbucket"}, "needs a Redis address"},
		{[]string{"--service", "windowed", "extra"}, "unexpected arguments"},
		{[]string{"--service", "windowed", "--bogus"}, "unknown flag"},
	} {
		err := run(context.Background(), tt.args, io.Discard, io.Discard)
		require.Error(t, err, "%v", tt.args)
		assert.Contains(t, err.Error(), tt.want, "%v", tt.args)
		var u usageError
		assert.ErrorAs(t, err, &u, "%v is a usage error (exit 2)", tt.args)
	}
}

func TestPortInUseIsNotAUsageError(t *testing.T) {
	urls := start(t, 1, "--service", "sessions")
	addr := strings.TrimPrefix(urls[0], "http://")
	err := run(context.Background(), []string{"--service", "sessions", "--addr", addr}, io.Discard, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), addr)
	var u usageError
	assert.False(t, errors.As(err, &u), "exit 1, not 2")
}
