package service

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policy"
)

// secService is the reference token bucket on the default policy (free:
// K=10, r=5/s) with a frozen clock, trusting XFF only from trusted.
func secService(t *testing.T, trusted ...string) *Service {
	t.Helper()
	pol := policy.Default()
	pol.Identity.TrustedProxies = trusted
	require.NoError(t, pol.Validate())
	entry, err := catalog.Lookup("token-bucket", catalog.Memory)
	require.NoError(t, err)
	lims, err := BuildLimiters(pol, entry, catalog.Env{}, nil)
	require.NoError(t, err)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return &Service{Policy: pol, Limiters: lims, Now: func() time.Time { return t0 }}
}

func call(h http.Handler, peer, key, xff string) int {
	r := httptest.NewRequest(http.MethodGet, "/api", nil)
	r.RemoteAddr = peer
	r.Header.Set("X-API-Key", key)
	if xff != "" {
		r.Header.Set("X-Forwarded-For", xff)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}

// admittedWithRotatingXFF sends 20 requests for one key, each with a new
// X-Forwarded-For, and counts the admissions.
func admittedWithRotatingXFF(h http.Handler, peer string) int {
	n := 0
	for i := 0; i < 20; i++ {
		if call(h, peer, "free-xff", fmt.Sprintf("198.51.100.%d", i+1)) == http.StatusOK {
			n++
		}
	}
	return n
}

func TestSecurityXFFFromUntrustedPeerIsIgnored(t *testing.T) {
	for _, tc := range []struct {
		name    string
		trusted []string
		peer    string
	}{
		{"no trusted proxies", nil, "203.0.113.7:4000"},
		{"peer outside the trusted CIDR", []string{"10.0.0.0/8"}, "203.0.113.7:4000"},
		{"unparseable peer address", []string{"10.0.0.0/8"}, "not-an-address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := secService(t, tc.trusted...)
			require.Equal(t, 10, admittedWithRotatingXFF(svc, tc.peer),
				"spoofed X-Forwarded-For must not buy quota beyond K=10")
		})
	}
}

func TestSecurityXFFFromTrustedProxyIsUsed(t *testing.T) {
	svc := secService(t, "10.0.0.0/8")
	require.Equal(t, 20, admittedWithRotatingXFF(svc, "10.1.2.3:4000"),
		"each client behind a trusted proxy has its own quota")
	// Only the first (client) address counts: appending hops does not
	// create a new identity.
	svc = secService(t, "10.0.0.0/8")
	n := 0
	for i := 0; i < 20; i++ {
		if call(svc, "10.1.2.3:4000", "free-hops", fmt.Sprintf("198.51.100.1, 10.9.9.%d", i+1)) == http.StatusOK {
			n++
		}
	}
	require.Equal(t, 10, n)
}

func TestSecurityKeysWithControlCharactersAre401(t *testing.T) {
	svc := secService(t)
	for _, key := range []string{"free-a\x01", "free\x00a", "free-\x7f", "free-a\tb", "free-a\x1b[31m", "free-é", strings.Repeat("f", MaxKeyLen+1)} {
		require.Equal(t, http.StatusUnauthorized, call(svc, "127.0.0.1:1", key, ""), "%q", key)
	}
	require.Equal(t, http.StatusOK, call(svc, "127.0.0.1:1", "  Free-A ", ""), "white space and case are normalised, not refused")
}

// serve runs srv on a loopback listener until the test ends.
func serve(t *testing.T, srv *http.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

func TestSecurityServerTimeoutsAndLimits(t *testing.T) {
	srv := Server(secService(t))
	require.Equal(t, 5*time.Second, srv.ReadHeaderTimeout)
	require.Positive(t, srv.ReadTimeout)
	require.Positive(t, srv.WriteTimeout)
	require.Positive(t, srv.IdleTimeout)
	require.Equal(t, 64<<10, srv.MaxHeaderBytes)
}

func TestSecurityOversizeHeadersAre431(t *testing.T) {
	addr := serve(t, Server(secService(t)))
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/api", nil)
	require.NoError(t, err)
	req.Header.Set("X-API-Key", "free-big")
	req.Header.Set("X-Padding", strings.Repeat("a", 200<<10))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
}

func TestSecurityOversizeBodyIsCut(t *testing.T) {
	var got int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.Copy(io.Discard, r.Body)
	})
	addr := serve(t, Server(h))
	resp, err := http.Post("http://"+addr+"/api", "application/octet-stream", strings.NewReader(strings.Repeat("x", 3<<20)))
	if err == nil {
		resp.Body.Close()
	}
	require.LessOrEqual(t, got, int64(1<<20), "the handler never reads more than the 1 MiB body limit")
}

func TestSecuritySlowlorisIsCutByReadHeaderTimeout(t *testing.T) {
	srv := Server(secService(t))
	srv.ReadHeaderTimeout = 300 * time.Millisecond
	addr := serve(t, srv)
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()

	// Dribble a request's headers one byte every 50ms; a well-behaved
	// server drops the connection once ReadHeaderTimeout has passed.
	start := time.Now()
	closed := make(chan time.Duration, 1)
	go func() {
		_, _ = io.Copy(io.Discard, bufio.NewReader(conn))
		closed <- time.Since(start)
	}()
	line := "GET /api HTTP/1.1\r\nHost: x\r\nX-API-Key: free-slow\r\nX-Slow: " + strings.Repeat("z", 200)
	for i := 0; i < len(line); i++ {
		if _, err := conn.Write([]byte{line[i]}); err != nil {
			break
		}
		select {
		case d := <-closed:
			require.Less(t, d, 3*time.Second)
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
	select {
	case d := <-closed:
		require.Less(t, d, 3*time.Second)
	case <-time.After(3 * time.Second):
		t.Fatal("a client dribbling headers kept its connection past ReadHeaderTimeout")
	}
}
