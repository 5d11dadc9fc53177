package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ordersService is unlike the reference service on purpose: only
// POST /v1/orders exists, it wants a JSON body and a bearer token from its
// own list of keys, answers 201, and keeps one bucket of K=5 refilled at
// 1/s per key (in its own, simple code).
type ordersService struct {
	mu     sync.Mutex
	keys   map[string]bool
	tokens map[string]float64
	last   map[string]time.Time
	bodies []string
}

func newOrdersService(keys ...string) *ordersService {
	s := &ordersService{keys: map[string]bool{}, tokens: map[string]float64{}, last: map[string]time.Time{}}
	for _, k := range keys {
		s.keys[k] = true
	}
	return s
}

func (s *ordersService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/orders" {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || !s.keys[tok] {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	b, _ := io.ReadAll(r.Body)
	var order struct{ SKU string }
	if json.Unmarshal(b, &order) != nil || order.SKU == "" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	now := time.Now()
	t, seen := s.tokens[tok], !s.last[tok].IsZero()
	if !seen {
		t = 5
	} else {
		t = min(5, t+now.Sub(s.last[tok]).Seconds())
	}
	s.last[tok] = now
	allowed := t >= 1
	if allowed {
		t--
		s.bodies = append(s.bodies, string(b))
	}
	s.tokens[tok] = t
	s.mu.Unlock()
	if !allowed {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	w.WriteHeader(http.StatusCreated)
}

const ordersPolicy = `name: orders
tiers:
  - name: basic
    limits: [{capacity: 5, rate: 1/s}]
default_tier: basic
identity: {in: bearer}
statuses: {admitted: [201], rejected: [429]}
headers: {retry_after: true}
`

func TestAttackReachesAServiceWithItsOwnRoutesAuthAndKeys(t *testing.T) {
	svc := newOrdersService("live_k1", "live_k2")
	srv := httptest.NewServer(svc)
	defer srv.Close()
	pol := writeFile(t, "orders.yaml", ordersPolicy)
	keys := writeFile(t, "keys.yaml", "basic: [live_k1, live_k2]\n")
	dir := t.TempDir()
	out, stderr, code := rl(t, "attack", "--plan", "concurrent-burst", "--target", srv.URL+"/v1/orders",
		"--policy", pol, "--keys", keys, "--method", "POST", "--header", "Content-Type: application/json",
		"--body", `{"sku": "A-{i}", "tenant": "{tenant}"}`, "--out", dir, "--quiet")
	require.Equal(t, ExitPass, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
	doc, _ := readResult(t, dir)
	v, sum, _ := doc.check("evidence")
	require.Equal(t, "pass", v, sum)
	v, sum, _ = doc.check("oversell")
	require.Equal(t, "pass", v, sum)
	require.Contains(t, sum, "5 requests admitted")
	v, _, _ = doc.check("retry-after")
	require.Equal(t, "pass", v)
	// The bodies went out rendered; the real key never reaches the history.
	require.Len(t, svc.bodies, 5)
	require.Contains(t, svc.bodies[0], `"tenant": "free-burst"`)
	require.Regexp(t, `"sku": "A-\d+"`, svc.bodies[0])
	hist, err := os.ReadFile(filepath.Join(dir, "latest", "history.jsonl"))
	require.NoError(t, err)
	require.NotContains(t, string(hist), "live_k1")
	require.Contains(t, string(hist), "basic:…")
}

func TestAttackOnAWrongPathIsNoEvidence(t *testing.T) {
	srv := httptest.NewServer(newOrdersService("k"))
	defer srv.Close()
	dir := t.TempDir()
	out, stderr, code := rl(t, "attack", "--plan", "concurrent-burst", "--policy", "default", "--target", srv.URL+"/v1/order",
		"--out", dir, "--quiet")
	require.Equal(t, ExitFail, code, "a run of 404s must not pass\nstdout:\n%s\nstderr:\n%s", out, stderr)
	require.Contains(t, out, "100 of 100 requests got 404 from "+srv.URL+"/v1/order")
	require.Contains(t, out, "declared admitted: 2xx, rejected: 429")
	require.Contains(t, out, "verdict: UNKNOWN")
	doc, _ := readResult(t, dir)
	require.Equal(t, "unknown", doc.Verdict)
	// --fail-on none reports without failing.
	_, _, code = rl(t, "attack", "--plan", "concurrent-burst", "--policy", "default", "--target", srv.URL+"/v1/order",
		"--out", t.TempDir(), "--quiet", "--fail-on", "none")
	require.Equal(t, ExitPass, code)
	// A few errors within --max-error-rate are counted and shown, not fatal.
	v, _, _ := doc.check("oversell")
	require.Equal(t, "skip", v)
}

func TestAttackShapeAndKeyErrorsAreUsageErrors(t *testing.T) {
	srv := httptest.NewServer(newOrdersService("k"))
	defer srv.Close()
	pol := writeFile(t, "orders.yaml", ordersPolicy)
	one := writeFile(t, "one.yaml", "basic: [only_one]\n")
	empty := writeFile(t, "empty.yaml", "")
	unknownTier := writeFile(t, "tier.yaml", "gold: [k1]\n")
	badPlan := writeFile(t, "plan.yaml", "name: p\nrequest:\n  path: /v1/{kee}\nphases:\n  - kind: burst\n    key: free-a\n    requests: 2\n")
	base := []string{"attack", "--plan", "concurrent-burst", "--target", srv.URL, "--policy", pol, "--quiet", "--out", t.TempDir()}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--admitted", "2yy"}, `status "2yy"`},
		{[]string{"--rejected", "700"}, `status "700"`},
		{[]string{"--admitted", "429"}, "share a status"},
		{[]string{"--header", "no colon"}, "want 'Name: value'"},
		{[]string{"--header", "X-Id: {run"}, "is not closed"},
		{[]string{"--header", "X-Id: {kee}"}, "unknown variable {kee}"},
		{[]string{"--header", "Host: evil"}, "Host is set by rlverify"},
		{[]string{"--body", "@/nonexistent/body.json"}, "body file"},
		{[]string{"--method", "GE T"}, "not an HTTP method"},
		{[]string{"--identity", "nowhere"}, "want header:NAME, bearer"},
		{[]string{"--identity", "query:"}, "give the name"},
		{[]string{"--keys", "/nonexistent/keys.yaml"}, "keys file"},
		{[]string{"--keys", empty}, "is empty"},
		{[]string{"--keys", unknownTier}, `tier "gold" is not a tier`},
		{[]string{"--keys", one, "--plan", "tenant-isolation"}, "needs more basic keys than the keys file"},
		{[]string{"--max-error-rate", "2"}, "--max-error-rate 2"},
		{[]string{"--plan", badPlan}, "request.path: template"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			args := append(append([]string{}, base...), tc.args...)
			_, stderr, code := rl(t, args...)
			require.Equal(t, ExitUsage, code, stderr)
			require.Contains(t, stderr, tc.want)
		})
	}
}

func TestAttackHelpNamesTheShapeFlags(t *testing.T) {
	out, _, code := rl(t, "attack", "--help")
	require.Equal(t, ExitPass, code)
	for _, f := range []string{"--method", "--header", "--body", "--identity", "--keys", "--admitted", "--rejected", "--max-error-rate"} {
		require.Contains(t, out, f)
	}
}
