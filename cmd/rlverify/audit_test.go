package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/envs/redisproc"
	"github.com/rlverify/rlverify/internal/testsvc"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/reports"
)

// audit runs rlverify audit with args (JSON to stdout) and returns the
// document and the exit code.
func audit(t *testing.T, args ...string) (*reports.Audit, int, string) {
	t.Helper()
	dir := t.TempDir()
	out, stderr, code := rl(t, append([]string{"audit", "--out", dir, "--quiet", "--format", "json"}, args...)...)
	var a reports.Audit
	require.NoError(t, json.Unmarshal([]byte(out), &a), "stdout:\n%s\nstderr:\n%s", out, stderr)
	return &a, code, stderr
}

func property(t *testing.T, a *reports.Audit, name string) reports.Property {
	t.Helper()
	for _, p := range a.Properties {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no property %s", name)
	return reports.Property{}
}

func measurement(a *reports.Audit, name string) (checks.Measurement, bool) {
	for _, m := range a.Measured {
		if m.Name == name {
			return m, true
		}
	}
	return checks.Measurement{}, false
}

// variantOf writes the default policy with one line changed.
func variantOf(t *testing.T, from, to string) string {
	t.Helper()
	s := string(policy.DefaultYAML())
	require.Contains(t, s, from)
	return writeFile(t, "limiter.yaml", strings.Replace(s, from, to, 1))
}

func TestAuditMeasuresTheReferenceLimitersParameters(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	for _, tc := range []struct {
		name, limiterPolicy, param, verdict, measured string
	}{
		{"exact", "", "refill", "pass", " … "},
		{"refills 10% faster", variantOf(t, "rate: 5/s", "rate: 5.5/s"), "refill", "fail", "/s"},
		{"capacity K+1", variantOf(t, "capacity: 10\n", "capacity: 11\n"), "capacity", "fail", "at least 11"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--plans", "precision"}
			if tc.limiterPolicy != "" {
				args = append(args, "--limiter-policy", tc.limiterPolicy)
			}
			a, code, stderr := audit(t, args...)
			m, ok := measurement(a, tc.param)
			require.True(t, ok, "measurements: %+v", a.Measured)
			require.Equal(t, tc.verdict, string(m.Verdict), "%+v", m)
			require.Contains(t, m.Measured, tc.measured)
			require.Equal(t, tc.verdict, string(property(t, a, "calibration").Verdict))
			if tc.verdict == "fail" {
				require.Equal(t, ExitFail, code, stderr)
			} else {
				require.Equal(t, ExitPass, code, stderr)
			}
		})
	}
}

func TestAuditMeasuresAdviceAndRemainingOfAServiceWeDidNotWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	for _, tc := range []struct {
		quirk, param, verdict string
	}{
		{"", "retry-after", "pass"},
		{"retry-after-down", "retry-after", "fail"},
		{"remaining-off-by-one", "remaining", "fail"},
	} {
		t.Run(tc.quirk, func(t *testing.T) {
			var quirks []string
			if tc.quirk != "" {
				quirks = append(quirks, tc.quirk)
			}
			a, _, stderr := audit(t, append([]string{"--plans", "precision"}, testService(t, "orders", quirks...)...)...)
			m, ok := measurement(a, tc.param)
			require.True(t, ok, "measurements: %+v\n%s", a.Measured, stderr)
			require.Equal(t, tc.verdict, string(m.Verdict), "%+v", a.Measured)
			require.Equal(t, tc.verdict, string(property(t, a, "calibration").Verdict))
		})
	}
}

func TestAuditFaultsAServiceThroughAStoreProxyAndHooks(t *testing.T) {
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
			a, _, stderr := audit(t, append([]string{"--plans", "concurrent-burst,store-outage", "--store-proxy", listen + "=" + rs.Addr},
				redisBucketBehind(t, listen, "redisbucket", tc.quirks...)...)...)
			require.Equal(t, tc.want, string(property(t, a, "fail-mode").Verdict), "%+v\n%s", a.Properties, stderr)
			require.Equal(t, []string{"store-outage"}, property(t, a, "fail-mode").DecidedBy)
		})
	}
}

func TestAuditJudgesTheDownstreamFromTheServicesCounters(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	for _, tc := range []struct {
		service string
		quirks  []string
		want    string
	}{
		{"windowed", nil, "pass"},
		{"windowed", []string{"forward-rejected"}, "fail"},
		// A fixed window's envelope allows 2N in any span, so counts alone
		// cannot show its K+1; a sliding log's can.
		{"sessions", nil, "pass"},
		// Its K+1 reaches the downstream because the limiter admitted it:
		// oversell's defect, which explains the downstream's.
		{"sessions", []string{"capacity+1"}, "explained"},
	} {
		t.Run(tc.service+"/"+strings.Join(tc.quirks, "+"), func(t *testing.T) {
			svc := testService(t, tc.service, tc.quirks...)
			root := strings.TrimSuffix(strings.TrimSuffix(svc[1], "/search/items"), "/app/home")
			a, _, stderr := audit(t, append([]string{"--plans", "concurrent-burst,overload", "--downstream-prometheus", root + testsvc.MetricsPath,
				"--downstream-metric", "upstream_forwarded_total"}, svc...)...)
			require.Equal(t, tc.want, string(property(t, a, "downstream").Verdict), "%+v\n%s", a.Properties, stderr)
		})
	}
}

// The whole audit of a correct service we did not write: every property it
// can measure passes, and every other one says why it was not measured.
func TestAuditOfACorrectServiceWeDidNotWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	svc := testService(t, "sessions")
	dir := t.TempDir()
	out, stderr, code := rl(t, append([]string{"audit", "--out", dir, "--quiet", "--format", "text,md,junit,html"}, svc...)...)
	require.Equal(t, ExitPass, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
	b, err := os.ReadFile(filepath.Join(dir, "latest", "audit.json"))
	require.NoError(t, err)
	var a reports.Audit
	require.NoError(t, json.Unmarshal(b, &a))
	require.Equal(t, checks.Pass, a.Verdict)
	measured := 0
	for _, p := range a.Properties {
		switch p.Verdict {
		case checks.Pass:
			measured++
			require.NotEmpty(t, p.DecidedBy, p.Name)
		case checks.Skip:
			require.True(t, strings.HasPrefix(p.Summary, "not measured: "), p.Summary)
		default:
			t.Errorf("%s: %s %s", p.Name, p.Verdict, p.Summary)
		}
	}
	require.GreaterOrEqual(t, measured, 9)
	for _, p := range a.Plans {
		if !p.Ran {
			require.NotEmpty(t, p.Why, p.Plan)
		}
	}
	for _, f := range []string{"audit.txt", "audit.md", "audit.junit.xml", "audit.html"} {
		_, err := os.Stat(filepath.Join(dir, "latest", f))
		require.NoError(t, err, f)
	}
	require.Contains(t, out, "measured against declared:")
	require.Contains(t, out, "store-outage       not run  no way to inject store-down")
	require.Contains(t, out, "give --store-proxy, --toxiproxy or --on-inject", "the skip reason says flags")
	require.NotRegexp(t, `StoreProxies|OnInject|MaxDuration|MaxRequests|Checks\.`, string(b), "audit.json names no option fields")
}

func TestAuditUsageErrors(t *testing.T) {
	_, stderr, code := rl(t, "audit", "--plans", "nonsense", "--quiet", "--out", t.TempDir())
	require.Equal(t, ExitUsage, code)
	require.Contains(t, stderr, `--plans "nonsense": not a plan of the audit`)
	_, stderr, code = rl(t, "audit", "--target", "http://127.0.0.1:1", "--quiet", "--out", t.TempDir(), "--format", "pdf")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, stderr, "--format")
}

// An audit without --policy judges every plan against the built-in policy
// that `rlverify serve` enforces, not against a plan's own (retry-after's
// slow refill, tiers' seed tiers): our reference service passes it.
func TestAuditOfTheReferenceServiceUsesTheDeclaredPolicyForEveryPlan(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Run(ctx, []string{"serve", "--addr", addr}, io.Discard, io.Discard) }()
	t.Cleanup(func() { cancel(); <-served })
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 10*time.Second, 20*time.Millisecond, "rlverify serve listens")

	out, stderr, code := rl(t, "audit", "--target", "http://"+addr, "--policy", "default", "--plans", "retry-after,precision", "--out", t.TempDir(), "--quiet")
	require.Equal(t, ExitPass, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
	require.Regexp(t, `(?m)^  retry-after +PASS +\d+ requests`, out, "the plan ran and passed")
}

// TestAuditRunsTheUsersPlanFiles: --plan FILE (repeatable) runs the user's
// own plans after the audit's, judged against the same policy and merged
// into the same properties; a file whose plan is named like one of the
// audit's, or that does not parse, is a usage error naming the file.
func TestAuditRunsTheUsersPlanFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	// Two sequential bursts of a key: a racy bucket oversells the second.
	plan := writeFile(t, "my-plan.yaml", "name: two-bursts\nphases:\n  - name: one\n    kind: burst\n    key: free-mine\n    requests: 40\n  - name: two\n    kind: burst\n    key: free-mine\n    requests: 40\n")
	a, code, stderr := audit(t, "--limiter", "faulty/racy-token-bucket", "--plans", "idle-refill", "--plan", plan)
	require.Equal(t, ExitFail, code, stderr)
	var plans []string
	for _, c := range a.Plans {
		plans = append(plans, c.Plan)
	}
	require.Equal(t, []string{"idle-refill", "two-bursts (my-plan.yaml)"}, plans)
	over := property(t, a, "oversell")
	require.Equal(t, checks.Fail, over.Verdict)
	require.Contains(t, over.DecidedBy, "two-bursts (my-plan.yaml)")

	clash := writeFile(t, "clash.yaml", "name: precision\nphases:\n  - kind: burst\n    key: free-x\n    requests: 2\n")
	_, stderr, code = rl(t, "audit", "--plan", clash, "--quiet", "--out", t.TempDir())
	require.Equal(t, ExitUsage, code)
	require.Contains(t, stderr, `plan name "precision" is already a plan of this audit`)
	_, stderr, code = rl(t, "audit", "--plan", filepath.Join(t.TempDir(), "missing.yaml"), "--quiet", "--out", t.TempDir())
	require.Equal(t, ExitUsage, code)
	require.Contains(t, stderr, "missing.yaml")
}

// The audit runs the exempt plan only when the policy declares an exempt
// class; the reference service, built from that policy, never refuses its
// keys, and a K = 1 tier refilled once a minute is judged as declared.
func TestAuditRunsTheExemptPlanWhereDeclared(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	pol := writeFile(t, "exempt.yaml", "name: shapes\ntiers:\n  - name: free\n    key_prefix: free-\n    limits: [{capacity: 1, rate: 30/min}]\ndefault_tier: free\nexempt:\n  - name: internal\n    key_prefix: int-\nheaders: {retry_after: true}\n")
	a, code, stderr := audit(t, "--policy", pol, "--plans", "exempt,concurrent-burst")
	require.Equal(t, ExitPass, code, stderr)
	under := property(t, a, "under-admission")
	require.Equal(t, checks.Pass, under.Verdict, under.Summary)
	require.Contains(t, under.DecidedBy, "exempt")
	require.Equal(t, checks.Pass, property(t, a, "oversell").Verdict)

	a, _, stderr = audit(t, "--plans", "exempt,concurrent-burst")
	found := false
	for _, p := range a.Plans {
		if p.Plan == "exempt" {
			found = true
			require.False(t, p.Ran, stderr)
			require.Equal(t, "the policy declares no exempt class", p.Why)
		}
	}
	require.True(t, found, "the audit lists the exempt plan as not run")
}
