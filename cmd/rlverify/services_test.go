package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/internal/testsvc"
)

// Services we did not write (internal/testsvc), each run as an external
// target with the policy that honestly describes it. Correct ones must pass
// every check that can judge the plan; each quirk must fail exactly the
// property it breaks, and every other check must stay quiet.

// testService starts service (with quirks) and returns the attack
// arguments that reach it: targets, policy, request shape.
func testService(t *testing.T, service string, quirks ...string) []string {
	t.Helper()
	var q testsvc.Quirks
	for _, s := range quirks {
		require.NoError(t, q.Set(s))
	}
	c := testsvc.Common{Quirks: q}
	var h http.Handler
	var path string
	var extra []string
	switch service {
	case "orders":
		o, err := testsvc.NewOrders(testsvc.OrdersConfig{Common: c, Keys: testsvc.DefaultOrdersKeys()})
		require.NoError(t, err)
		h, path = o, "/v1/orders"
		extra = []string{"--method", "POST", "--header", "Content-Type: application/json", "--body", `{"sku": "sku-{i}"}`,
			"--keys", filepath.Join("..", "..", "internal", "testsvc", "policies", "orders-keys.yaml")}
	case "windowed":
		w, err := testsvc.NewWindowed(testsvc.WindowedConfig{Common: c})
		require.NoError(t, err)
		h, path = w, "/search/items"
	case "sessions":
		s, err := testsvc.NewSessions(testsvc.SessionsConfig{Common: c})
		require.NoError(t, err)
		h, path = s, "/app/home"
	default:
		t.Fatalf("no service %s", service)
	}
	url, stop := testsvc.Serve(h)
	t.Cleanup(stop)
	pol, err := testsvc.PolicyYAML(service)
	require.NoError(t, err)
	return append([]string{"--target", url + path, "--policy", writeFile(t, service+".yaml", string(pol))}, extra...)
}

// serviceVerdicts runs plan against a service and returns each check's verdict.
func serviceVerdicts(t *testing.T, plan string, svc []string) (map[string]string, resultDoc) {
	t.Helper()
	dir := t.TempDir()
	args := append([]string{"attack", "--plan", plan, "--out", dir, "--quiet", "--fail-on", "none"}, svc...)
	out, stderr, code := rl(t, args...)
	require.Equal(t, ExitPass, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
	doc, _ := readResult(t, dir)
	got := map[string]string{}
	for _, c := range doc.Checks {
		got[c.Name] = c.Verdict
	}
	if t.Failed() {
		b, _ := os.ReadFile(filepath.Join(dir, "latest", "report.txt"))
		t.Log(string(b))
	}
	return got, doc
}

func failing(got map[string]string) []string {
	out := []string{}
	for n, v := range got {
		if v == "fail" || v == "unknown" {
			out = append(out, n+":"+v)
		}
	}
	sort.Strings(out)
	return out
}

func TestServicesWeDidNotWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	for _, tc := range []struct {
		service string
		quirks  []string
		plan    string
		// fails lists the checks that must fail; every other check must
		// pass or have nothing to judge.
		fails []string
		// judged lists checks that must have judged (not skip).
		judged []string
	}{
		{"orders", nil, "concurrent-burst", nil, []string{"oversell", "under-admission", "retry-after", "headers", "token-bounds"}},
		{"orders", nil, "bypass", nil, []string{"bypass"}},
		{"orders", []string{"last-identity-wins"}, "bypass", []string{"bypass"}, nil},
		{"windowed", nil, "concurrent-burst", nil, []string{"oversell", "retry-after", "headers"}},
		{"windowed", nil, "idle-refill", nil, []string{"oversell", "under-admission"}},
		{"windowed", nil, "tenant-isolation", nil, []string{"isolation"}},
		{"windowed", []string{"trust-xff"}, "bypass", []string{"bypass"}, nil},
		{"windowed", nil, "bypass", nil, []string{"bypass"}},
		{"windowed", []string{"per-path"}, "bypass", []string{"bypass"}, nil},
		{"sessions", nil, "concurrent-burst", nil, []string{"oversell", "retry-after", "headers"}},
		{"sessions", nil, "bypass", nil, []string{"bypass"}},
		{"sessions", []string{"no-fold-case"}, "bypass", []string{"bypass"}, nil},
		{"sessions", []string{"racy"}, "concurrent-burst", []string{"oversell"}, nil},
		{"orders", []string{"retry-after-down"}, "retry-after", []string{"retry-after"}, nil},
	} {
		name := fmt.Sprintf("%s/%s/%s", tc.service, strings.Join(tc.quirks, "+"), tc.plan)
		t.Run(name, func(t *testing.T) {
			got, _ := serviceVerdicts(t, tc.plan, testService(t, tc.service, tc.quirks...))
			want := make([]string, len(tc.fails))
			for i, f := range tc.fails {
				want[i] = f + ":fail"
			}
			sort.Strings(want)
			require.Equal(t, want, failing(got), "verdicts: %v", got)
			for _, c := range tc.judged {
				require.NotEqual(t, "skip", got[c], "%s must judge this run", c)
			}
		})
	}
}

// The downstream of a service we did not write, read from its own counters.
func TestDownstreamFromTheServicesOwnCounters(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	for _, tc := range []struct {
		service, source string
		quirks          []string
		want            string
	}{
		{"windowed", "json", nil, "pass"},
		{"windowed", "prometheus", nil, "pass"},
		{"windowed", "json", []string{"forward-rejected"}, "fail"},
		{"sessions", "prometheus", []string{"forward-rejected"}, "fail"},
		// The downstream got K+1 because the limiter admitted K+1: the
		// surplus is oversell's defect, which explains this one.
		{"sessions", "json", []string{"capacity+1"}, "explained"},
	} {
		t.Run(tc.service+"/"+tc.source+"/"+strings.Join(tc.quirks, "+"), func(t *testing.T) {
			svc := testService(t, tc.service, tc.quirks...)
			root := strings.TrimSuffix(strings.TrimSuffix(svc[1], "/search/items"), "/app/home")
			src := []string{"--downstream-json", root + testsvc.UpstreamPath, "--downstream-by-key", testsvc.ByKeyJSONPath, "--downstream-total", testsvc.TotalJSONPath}
			if tc.source == "prometheus" {
				src = []string{"--downstream-prometheus", root + testsvc.MetricsPath, "--downstream-metric", "upstream_forwarded_total", "--downstream-label", "api_key"}
			}
			got, _ := serviceVerdicts(t, "concurrent-burst", append(svc, src...))
			require.Equal(t, tc.want, got["downstream"], "verdicts: %v", got)
		})
	}
}
