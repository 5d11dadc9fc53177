package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/envs/redisproc"
	"github.com/rlverify/rlverify/internal/testsvc"
	"github.com/rlverify/rlverify/reports"
)

// Faults on a service rlverify did not start: testsvc's redisbucket keeps
// its buckets in a Redis it reaches through an address the test chooses.

// redisBucketBehind starts redisbucket (with quirks) using redisAddr as its
// store and returns its URL and the attack arguments for its policy.
func redisBucketBehind(t *testing.T, redisAddr, policyName string, quirks ...string) []string {
	t.Helper()
	var q testsvc.Quirks
	for _, s := range quirks {
		require.NoError(t, q.Set(s))
	}
	svc, err := testsvc.NewRedisBucket(testsvc.RedisBucketConfig{Common: testsvc.Common{Quirks: q}, Addr: redisAddr,
		Namespace: fmt.Sprintf("t%d", time.Now().UnixNano())})
	require.NoError(t, err)
	t.Cleanup(func() { _ = svc.Close() })
	url, stop := testsvc.Serve(svc)
	t.Cleanup(stop)
	pol, err := testsvc.PolicyYAML(policyName)
	require.NoError(t, err)
	return []string{"--target", url + "/any", "--policy", writeFile(t, policyName+".yaml", string(pol))}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	port, err := redisproc.FreePort()
	require.NoError(t, err)
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

func TestStoreProxyFaultsAServiceWeDidNotStart(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	if err := redisproc.Available(); err != nil {
		t.Skip(err)
	}
	rs, err := redisproc.Start()
	require.NoError(t, err)
	defer rs.Stop()
	for _, tc := range []struct {
		name   string
		quirks []string
		want   string
	}{
		{"fails closed as declared", nil, "pass"},
		{"fails open while declaring closed", []string{"fail-open"}, "fail"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			listen := freeAddr(t)
			args := append([]string{"attack", "--plan", "store-outage", "--store-proxy", listen + "=" + rs.Addr,
				"--out", t.TempDir(), "--quiet", "--fail-on", "none", "--format", "json"},
				redisBucketBehind(t, listen, "redisbucket", tc.quirks...)...)
			out, stderr, code := rl(t, args...)
			require.Equal(t, ExitPass, code, "stderr:\n%s", stderr)
			v, sum := checkOf(t, out, "fail-mode")
			require.Equal(t, tc.want, v, sum)
			require.Contains(t, out, "store proxy on "+listen)
		})
	}
}

func TestFaultHooksStopAndStartTheServicesRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	if err := redisproc.Available(); err != nil {
		t.Skip(err)
	}
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	start := fmt.Sprintf("redis-server --bind 127.0.0.1 --port %s --save '' --appendonly no --daemonize yes && until redis-cli -p %s ping >/dev/null 2>&1; do sleep 0.05; done", port, port)
	stop := fmt.Sprintf("redis-cli -p %s shutdown nosave || true", port)
	require.NoError(t, exec.Command("sh", "-c", start).Run())
	t.Cleanup(func() { _ = exec.Command("sh", "-c", stop).Run() })
	for _, tc := range []struct {
		name   string
		quirks []string
		want   string
	}{
		{"fails closed as declared", nil, "pass"},
		{"fails open while declaring closed", []string{"fail-open"}, "fail"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"attack", "--plan", "store-outage", "--on-inject", "store-down=" + stop, "--on-clear", "store-down=" + start,
				"--out", t.TempDir(), "--quiet", "--fail-on", "none", "--format", "json"},
				redisBucketBehind(t, addr, "redisbucket", tc.quirks...)...)
			out, stderr, code := rl(t, args...)
			require.Equal(t, ExitPass, code, "stderr:\n%s", stderr)
			v, sum := checkOf(t, out, "fail-mode")
			require.Equal(t, tc.want, v, sum)
			require.Contains(t, out, `"command": "`+strings.ReplaceAll(stop, `'`, `'`))
		})
	}
}

func TestExternalFaultErrorsAreClear(t *testing.T) {
	url, stopSvc := testsvc.Serve(mustWindowed(t))
	defer stopSvc()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	base := []string{"attack", "--policy", "default", "--target", url + "/search/x", "--out", t.TempDir(), "--quiet"}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		// The rules themselves are the library's (validate_test.go,
		// envs/settings_test.go); these rows prove the flags are said.
		{[]string{"--plan", "store-outage"}, ExitUsage, "run a store proxy (--store-proxy LISTEN=UPSTREAM"},
		{[]string{"--plan", "store-outage", "--store-proxy", "127.0.0.1:1=192.0.2.1:6379"}, ExitUsage, "is not a loopback address"},
		{[]string{"--plan", "store-outage", "--store-proxy", busy.Addr().String() + "=127.0.0.1:6379"}, ExitRun, "cannot listen on " + busy.Addr().String()},
		{[]string{"--plan", "store-outage", "--toxiproxy", "http://127.0.0.1:1", "--toxiproxy-proxy", "redis"}, ExitRun, "toxiproxy http://127.0.0.1:1 is unreachable"},
		{[]string{"--plan", "store-outage", "--toxiproxy", "http://127.0.0.1:1"}, ExitUsage, "name the proxies"},
		{[]string{"--plan", "store-outage", "--on-clear", "store-down=true"}, ExitUsage, "has no --on-inject store-down"},
		{[]string{"--plan", "store-outage", "--on-inject", "store-down=sleep 10", "--hook-timeout", "200ms"}, ExitRun, "did not finish within 200ms"},
		{[]string{"--plan", "store-outage", "--on-inject", "store-down=echo no redis here >&2; exit 7"}, ExitRun, "no redis here"},
		{[]string{"--plan", "concurrent-burst", "--sink", "http://192.0.2.1:9090"}, ExitUsage, "is not a loopback address"},
		{[]string{"--plan", "concurrent-burst", "--downstream-json", url + "/internal/upstream", "--downstream-by-key", "forwarded.keys"}, ExitRun, "path forwarded.keys matches nothing"},
		{[]string{"--plan", "concurrent-burst", "--downstream-prometheus", url + "/metrics", "--downstream-metric", "nope_total"}, ExitRun, "no metric nope_total after requests were sent"},
		{[]string{"--plan", "concurrent-burst", "--sink", "http://127.0.0.1:1"}, ExitRun, "is unreachable"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, stderr, code := rl(t, append(append([]string{}, base...), tc.args...)...)
			require.Equal(t, tc.code, code, stderr)
			require.Contains(t, stderr, tc.want)
		})
	}
	_, stderr, code := rl(t, "attack", "--plan", "concurrent-burst", "--store-proxy", "127.0.0.1:1=127.0.0.1:2", "--quiet", "--out", t.TempDir())
	require.Equal(t, ExitUsage, code)
	require.Contains(t, stderr, "are for your own service")
}

func mustWindowed(t *testing.T) *testsvc.Windowed {
	t.Helper()
	w, err := testsvc.NewWindowed(testsvc.WindowedConfig{})
	require.NoError(t, err)
	return w
}

// checkOf returns a check's verdict and summary from a JSON report.
func checkOf(t *testing.T, out, check string) (string, string) {
	t.Helper()
	d := decodeDoc(t, out)
	for _, c := range d.Checks {
		if c.Name == check {
			return string(c.Verdict), c.Summary
		}
	}
	t.Fatalf("no %s check in %s", check, out)
	return "", ""
}

// TestExternalPlanWithItsOwnPolicyNeedsTheServicesPolicy: a plan whose own
// policy describes the reference service (retry-after's slow refill, tiers'
// seeds, …) is refused against --target without --policy, naming the flag;
// with the service's policy it runs.
func TestExternalPlanWithItsOwnPolicyNeedsTheServicesPolicy(t *testing.T) {
	url, stop := testsvc.Serve(mustWindowed(t))
	defer stop()
	for _, plan := range []string{"retry-after", "tiers", "global-guard", "multi-instance-20", "regions"} {
		t.Run(plan, func(t *testing.T) {
			_, stderr, code := rl(t, "attack", "--plan", plan, "--target", url+"/search/x", "--out", t.TempDir(), "--quiet")
			assert.Equal(t, ExitUsage, code, stderr)
			assert.Contains(t, stderr, "no declared policy")
			assert.Contains(t, stderr, "plan "+plan+"'s own policy")
			assert.Contains(t, stderr, "--policy FILE")
			assert.Contains(t, stderr, "rlverify discover")
		})
	}
	pol, err := testsvc.PolicyYAML("windowed")
	require.NoError(t, err)
	_, stderr, code := rl(t, "attack", "--plan", "retry-after", "--target", url+"/search/x", "--policy", writeFile(t, "windowed.yaml", string(pol)),
		"--max-requests", "20", "--max-duration", "3s", "--out", t.TempDir(), "--quiet", "--fail-on", "none")
	assert.NotEqual(t, ExitUsage, code, stderr)
	assert.NotContains(t, stderr, "no declared policy")
}

// TestAuditStopsAfterAFailedFaultCommand: a fault command that fails may
// leave the service in the fault, so the audit runs no later plan against
// it (each says why) and exits 3, as attack does.
func TestAuditStopsAfterAFailedFaultCommand(t *testing.T) {
	url, stopSvc := testsvc.Serve(mustWindowed(t))
	defer stopSvc()
	pol, err := testsvc.PolicyYAML("windowed")
	require.NoError(t, err)
	later := writeFile(t, "later.yaml", "name: later\nphases:\n  - name: one\n    kind: burst\n    key: free-later\n    requests: 3\n")
	dir := t.TempDir()
	_, stderr, code := rl(t, "audit", "--target", url+"/search/x", "--policy", writeFile(t, "windowed.yaml", string(pol)),
		"--plans", "store-outage", "--plan", later, "--on-inject", "store-down=echo no redis here >&2; exit 7",
		"--out", dir, "--quiet", "--format", "json")
	require.Equal(t, ExitRun, code, stderr)
	require.Contains(t, stderr, "no redis here")
	require.Contains(t, stderr, "no later plan was run")
	b, err := os.ReadFile(filepath.Join(dir, "latest", "audit.json"))
	require.NoError(t, err)
	var a reports.Audit
	require.NoError(t, json.Unmarshal(b, &a))
	var why string
	for _, p := range a.Plans {
		if strings.HasPrefix(p.Plan, "later") {
			require.False(t, p.Ran, "%+v", p)
			why = p.Why
		}
	}
	require.Contains(t, why, "a fault command failed in plan store-outage")
}
