package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
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
	return testServiceAs(t, service, svcOpts{}, quirks...)
}

// svcOpts vary a test service and its policy.
type svcOpts struct {
	// serveLast: the service serves a repeated identity's last occurrence.
	serveLast bool
	// skip: the windowed service's skip list (a key prefix never limited).
	skip string
	// edit changes the policy's text (each old → new, which must be there).
	edit map[string]string
}

// testServiceAs is testService with the service and its policy varied.
func testServiceAs(t *testing.T, service string, o svcOpts, quirks ...string) []string {
	t.Helper()
	var q testsvc.Quirks
	for _, s := range quirks {
		require.NoError(t, q.Set(s))
	}
	c := testsvc.Common{Quirks: q, ServeLast: o.serveLast}
	edit := o.edit
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
		w, err := testsvc.NewWindowed(testsvc.WindowedConfig{Common: c, Skip: o.skip})
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
	b, err := testsvc.HonestPolicyYAML(service, testsvc.Variant{ServeLast: o.serveLast, Skip: o.skip})
	require.NoError(t, err)
	pol := string(b)
	for from, to := range edit {
		require.Contains(t, pol, from)
		pol = strings.Replace(pol, from, to, 1)
	}
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
		// serveLast: the service serves a repeated identity's last
		// occurrence; skip: the windowed service's skip list (both
		// declared by its honest policy); edit changes the policy's text.
		serveLast bool
		edit      map[string]string
		skip      string
	}{
		{"orders", nil, "concurrent-burst", nil, []string{"oversell", "under-admission", "retry-after", "headers", "token-bounds"}, false, nil, ""},
		{"orders", nil, "bypass", nil, []string{"bypass"}, false, nil, ""},
		{"orders", []string{"last-identity-wins"}, "bypass", []string{"bypass"}, nil, false, nil, ""},
		// The tenant and the limiter read the last occurrence, as declared;
		// then a limiter that counts the first.
		{"orders", nil, "bypass", nil, []string{"bypass"}, true, nil, ""},
		{"orders", []string{"first-identity-wins"}, "bypass", []string{"bypass"}, nil, true, nil, ""},
		// A limiter that counts the last while the application serves the
		// first, declared honestly: the declared mismatch is the bypass.
		{"orders", []string{"last-identity-wins"}, "bypass", []string{"bypass"}, nil, false, map[string]string{"repeated: first": "tenant_occurrence: first\n  limiter_occurrence: last"}, ""},
		// A skip list the policy declares exempt: never refused; then a
		// service that limits it all the same.
		{"windowed", nil, "exempt", nil, []string{"under-admission"}, false, nil, "int-"},
		{"windowed", []string{"limit-skipped"}, "exempt", []string{"under-admission"}, nil, false, nil, "int-"},
		{"windowed", nil, "concurrent-burst", nil, []string{"oversell", "retry-after", "headers"}, false, nil, ""},
		{"windowed", nil, "idle-refill", nil, []string{"oversell", "under-admission"}, false, nil, ""},
		{"windowed", nil, "tenant-isolation", nil, []string{"isolation"}, false, nil, ""},
		{"windowed", []string{"trust-xff"}, "bypass", []string{"bypass"}, nil, false, nil, ""},
		{"windowed", nil, "bypass", nil, []string{"bypass"}, false, nil, ""},
		{"windowed", []string{"per-path"}, "bypass", []string{"bypass"}, nil, false, nil, ""},
		{"sessions", nil, "concurrent-burst", nil, []string{"oversell", "retry-after", "headers"}, false, nil, ""},
		{"sessions", nil, "bypass", nil, []string{"bypass"}, false, nil, ""},
		{"sessions", []string{"no-fold-case"}, "bypass", []string{"bypass"}, nil, false, nil, ""},
		{"sessions", []string{"racy"}, "concurrent-burst", []string{"oversell"}, nil, false, nil, ""},
		{"orders", []string{"retry-after-down"}, "retry-after", []string{"retry-after"}, nil, false, nil, ""},
	} {
		name := fmt.Sprintf("%s/%s/%s", tc.service, strings.Join(tc.quirks, "+"), tc.plan)
		if tc.serveLast {
			name += "/serving-last"
		}
		if tc.skip != "" {
			name += "/skipping-" + tc.skip
		}
		if tc.edit != nil {
			name += "/edited-policy"
		}
		t.Run(name, func(t *testing.T) {
			got, doc := serviceVerdicts(t, tc.plan, testServiceAs(t, tc.service, svcOpts{serveLast: tc.serveLast, skip: tc.skip, edit: tc.edit}, tc.quirks...))
			want := make([]string, len(tc.fails))
			for i, f := range tc.fails {
				want[i] = f + ":fail"
			}
			sort.Strings(want)
			require.Equal(t, want, failing(got), "verdicts: %v", got)
			for _, c := range tc.judged {
				require.NotEqual(t, "skip", got[c], "%s must judge this run", c)
			}
			if slices.Contains(tc.fails, "bypass") && tc.plan == "bypass" {
				// The finding names the occurrence that was wrongly counted
				// or the declaration that lets it happen.
				b, err := json.Marshal(doc.Checks)
				require.NoError(t, err)
				want := "the limiter charged another occurrence"
				if tc.edit != nil && !tc.serveLast {
					want = "as the policy declares: the limiter counts the last occurrence"
				}
				if slices.Contains(tc.quirks, "trust-xff") || slices.Contains(tc.quirks, "per-path") || slices.Contains(tc.quirks, "no-fold-case") {
					want = "variant"
				}
				require.Contains(t, string(b), want)
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
