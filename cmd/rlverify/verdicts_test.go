package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/envs/redisproc"
	"github.com/rlverify/rlverify/internal/testsvc"
	"github.com/rlverify/rlverify/reports"
)

// rlCtx runs the CLI in process under ctx (a cancelled ctx is what a
// signal does to a run) and returns stdout, stderr and the exit code.
func rlCtx(t *testing.T, ctx context.Context, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	err := Run(ctx, args, &out, &errb)
	code := 0
	if err != nil {
		var ee *exitError
		require.True(t, errors.As(err, &ee), "%v", err)
		code = ee.code
		if ee.err != nil {
			errb.WriteString(ee.err.Error())
		}
	}
	return out.String(), errb.String(), code
}

// requireCutEverywhere checks that every report in dir says the run was
// cut (verdict v: interrupted or incomplete), that the first stdout line
// says so, and that `report --in` exits code for it.
func requireCutEverywhere(t *testing.T, dir, stdout, v string, code int) {
	t.Helper()
	up := strings.ToUpper(v)
	first, _, _ := strings.Cut(stdout, "\n")
	require.True(t, strings.HasPrefix(first, up+": "), "the headline says %s: %q", up, first)
	require.NotContains(t, first, "checks passed")
	raw, err := os.ReadFile(filepath.Join(dir, "result.json"))
	require.NoError(t, err)
	var doc reports.Document
	require.NoError(t, json.Unmarshal(raw, &doc))
	require.Equal(t, v, string(doc.Verdict), "result.json verdict")
	require.True(t, doc.Interrupted)
	junit, err := os.ReadFile(filepath.Join(dir, "report.junit.xml"))
	require.NoError(t, err)
	var suites struct {
		Suites []struct {
			Failures int `xml:"failures,attr"`
			Errors   int `xml:"errors,attr"`
		} `xml:"testsuite"`
	}
	require.NoError(t, xml.Unmarshal(junit, &suites))
	require.NotEmpty(t, suites.Suites)
	require.Positive(t, suites.Suites[0].Failures+suites.Suites[0].Errors, "JUnit is not green: %s", junit)
	require.Contains(t, string(junit), `type="`+v+`"`)
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	require.NoError(t, err)
	require.Contains(t, string(md), "**Verdict: "+up+"**")
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	require.NoError(t, err)
	require.Contains(t, string(html), `<span class="badge `+v+`">`+up+`</span>`)
	text, err := os.ReadFile(filepath.Join(dir, "report.txt"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(text), up+": "), "report.txt: %.80s", text)
	out, stderr, got := rl(t, "report", "--in", filepath.Join(dir, "result.json"))
	require.Equal(t, code, got, "report --in of a %s run; stderr:\n%s", v, stderr)
	require.True(t, strings.HasPrefix(out, up+": "), out)
}

// Issue 26 item 5: a run cut by a signal said PASS in its saved reports.
func TestCutRunIsInterruptedInEveryFormat(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	plan := writeFile(t, "long.yaml", longRatePlan)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	stdout, stderr, code := rlCtx(t, ctx, "attack", "--plan", plan, "--out", dir, "--quiet",
		"--format", "text,json,junit,md,html")
	require.Equal(t, ExitInterrupted, code, stderr)
	requireCutEverywhere(t, filepath.Join(dir, "latest"), stdout, "interrupted", ExitInterrupted)
}

// Issue 26 item 5: a fault hook that timed out (the fault never happened)
// left a run whose saved verdict was PASS.
func TestRunWithAFaultThatNeverHappenedIsIncomplete(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	url, stopSvc := testsvc.Serve(mustWindowed(t))
	defer stopSvc()
	dir := t.TempDir()
	stdout, stderr, code := rl(t, "attack", "--target", url+"/search/x", "--policy", windowedPolicy(t), "--plan", "store-outage",
		"--on-inject", "store-down=sleep 10", "--hook-timeout", "200ms", "--out", dir, "--quiet",
		"--format", "text,json,junit,md,html")
	require.Equal(t, ExitRun, code, stderr)
	require.Contains(t, stderr, "did not finish within 200ms")
	requireCutEverywhere(t, filepath.Join(dir, "latest"), stdout, "incomplete", ExitRun)
}

// Issue 26 item 5: an interrupted audit wrote "pass" with the plans that
// never ran simply missing.
func TestInterruptedAuditListsThePlansThatNeverRan(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, stderr, code := rlCtx(t, ctx, "audit", "--out", dir, "--format", "json,junit")
	require.Equal(t, ExitInterrupted, code, stderr)
	raw, err := os.ReadFile(filepath.Join(dir, "latest", "audit.json"))
	require.NoError(t, err, stderr)
	var a reports.Audit
	require.NoError(t, json.Unmarshal(raw, &a))
	require.Equal(t, "interrupted", string(a.Verdict))
	notRun := 0
	for _, p := range a.Plans {
		if strings.Contains(p.Why, "the audit was interrupted") {
			notRun++
			require.False(t, p.Ran, p.Plan)
			require.Equal(t, "interrupted", string(p.Verdict), p.Plan)
		}
	}
	require.Positive(t, notRun, "the plans after the interruption are listed as not run: %+v", a.Plans)
	junit, err := os.ReadFile(filepath.Join(dir, "latest", "audit.junit.xml"))
	require.NoError(t, err)
	require.Contains(t, string(junit), `type="interrupted"`)
}

// restartingCounters serves root's downstream counters (JSON and
// Prometheus) as they are for the first two reads (the baseline and after
// the burst), then as a service that restarted would: every count back at 0.
func restartingCounters(t *testing.T, root string) string {
	t.Helper()
	var reads atomic.Int64
	zeroNumbers := regexp.MustCompile(`(":\s*)\d+`)
	zeroSamples := regexp.MustCompile(`(?m)^(upstream_forwarded_total\{[^}]*\}) \d+(\.\d+)?(e[+-]?\d+)?$`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, err := http.Get(root + r.URL.Path)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if reads.Add(1) > 2 {
			if r.URL.Path == testsvc.UpstreamPath {
				b = zeroNumbers.ReplaceAll(b, []byte("${1}0"))
			} else {
				b = zeroSamples.ReplaceAll(b, []byte("${1} 0"))
			}
		}
		w.Header().Set("Content-Type", res.Header.Get("Content-Type"))
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Issue 26 item 7: a downstream counter that went backwards (a restart)
// passed as "saw 0 arrivals", read as JSON or as Prometheus.
func TestDownstreamCounterResetIsNotAPass(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	for _, reader := range []string{"json", "prometheus"} {
		t.Run(reader, func(t *testing.T) {
			svc := testService(t, "windowed")
			root := strings.TrimSuffix(svc[1], "/search/items")
			counters := restartingCounters(t, root)
			from := []string{"--downstream-json", counters + testsvc.UpstreamPath, "--downstream-by-key", "forwarded.by_key"}
			if reader == "prometheus" {
				from = []string{"--downstream-prometheus", counters + testsvc.MetricsPath, "--downstream-metric", testsvc.ForwardedMetric}
			}
			got, doc := serviceVerdicts(t, "concurrent-burst", append(svc, from...))
			require.Equal(t, "unknown", got["downstream"], "%+v", doc.Checks)
			for _, c := range doc.Checks {
				if c.Name == "downstream" {
					require.Contains(t, c.Summary, "counter went backwards")
				}
			}
		})
	}
}

// Issue 26 item 8: clock_quantum 10s turned a racy bucket's oversell (100
// admitted where 10 fit) into a PASS with no mention, from a policy file
// or from a history header edited to say so. The slack is now named in
// the check's summary and JSON, and the report warns under its verdict.
func TestSlackIsNamedAndAWideOneWarns(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	dir := t.TempDir()
	_, stderr, code := rl(t, "attack", "--plan", "concurrent-burst", "--limiter", "faulty/racy-token-bucket", "--out", dir, "--quiet")
	require.Equal(t, ExitFail, code, stderr)
	hist := filepath.Join(dir, "latest", "history.jsonl")
	raw, err := os.ReadFile(hist)
	require.NoError(t, err)
	def, err := os.ReadFile(filepath.Join("..", "..", "policies", "faster-refill.yaml"))
	require.NoError(t, err)
	wide := writeFile(t, "wide.yaml", strings.Replace(string(def), "rate: 5.5/s", "rate: 5/s", 1)+"clock_quantum: 10s\n")
	// The forged header: the declared policy the history carries, edited.
	header, rest, _ := bytes.Cut(raw, []byte("\n"))
	var run map[string]any
	require.NoError(t, json.Unmarshal(header, &run))
	declared := run["declared"].(map[string]any)
	declared["clock_quantum"] = int64(10 * time.Second)
	header, err = json.Marshal(run)
	require.NoError(t, err)
	forged := writeFile(t, "forged.jsonl", string(header)+"\n"+string(rest))
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"policy file", []string{"check", "--history", hist, "--policy", wide}},
		{"forged header", []string{"check", "--history", forged}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, _ := rl(t, append(tc.args, "--format", "json")...)
			var doc reports.Document
			require.NoError(t, json.Unmarshal([]byte(out), &doc), stderr)
			var oversell *checks.Result
			for i := range doc.Checks {
				if doc.Checks[i].Name == "oversell" {
					oversell = &doc.Checks[i]
				}
			}
			require.NotNil(t, oversell)
			require.Contains(t, oversell.Summary, "clock_quantum 10s", "the summary names the slack")
			require.NotEmpty(t, oversell.Slack)
			require.Equal(t, "clock_quantum", oversell.Slack[0].Name)
			require.Equal(t, int64(10*time.Second), oversell.Slack[0].Ns)
			require.NotEmpty(t, oversell.Warnings)
			require.Contains(t, oversell.Warnings[0], "oversell: clock_quantum 10s is wider than this run's own timing uncertainty")
			require.Contains(t, doc.Warnings, oversell.Warnings[0])
			if tc.name == "forged header" {
				require.Equal(t, "modified", string(doc.Verdict), "the edit is also caught by the digest")
			}
			// In the headline area: the WARNING lines right under the verdict.
			text, _, _ := rl(t, tc.args...)
			var head []string
			for _, l := range strings.Split(text, "\n")[1:] {
				if !strings.HasPrefix(l, "WARNING: ") {
					break
				}
				head = append(head, l)
			}
			require.Contains(t, strings.Join(head, "\n"), "WARNING: oversell: clock_quantum 10s", "the warning is in the headline area: %q", text)
		})
	}
}

// Issue 26 item 9: a history edited after the run (admitted events
// deleted, checks_off added to the declared policy, recv widened) was
// judged like the run's own record; one shard checked alone passed as the
// whole run.
func TestCheckTellsAModifiedHistoryAndMissingShards(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	dir := t.TempDir()
	_, stderr, code := rl(t, "attack", "--plan", "concurrent-burst", "--limiter", "faulty/racy-token-bucket", "--out", dir, "--quiet")
	require.Equal(t, ExitFail, code, stderr)
	hist := filepath.Join(dir, "latest", "history.jsonl")
	raw, err := os.ReadFile(hist)
	require.NoError(t, err)
	out, stderr, code := rl(t, "check", "--history", hist, "--format", "json")
	require.Equal(t, ExitFail, code, stderr)
	require.Equal(t, "intact", decodeDoc(t, out).Integrity, "the run's own history")

	lines := strings.SplitAfter(string(raw), "\n")
	var kept []string
	admitted := 0
	for _, l := range lines {
		if strings.HasPrefix(l, `{"t":"e",`) && strings.Contains(l, `"status":200`) {
			if admitted++; admitted > 10 {
				continue // the oversold admissions, deleted
			}
		}
		kept = append(kept, l)
	}
	var header map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &header))
	header["declared"].(map[string]any)["checks_off"] = []string{"oversell"}
	hb, err := json.Marshal(header)
	require.NoError(t, err)
	for _, tc := range []struct{ name, content string }{
		{"admitted events deleted", strings.Join(kept, "")},
		{"checks_off added to the declared policy", string(hb) + "\n" + strings.Join(lines[1:], "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := writeFile(t, "edited.jsonl", tc.content)
			out, stderr, code := rl(t, "check", "--history", file)
			require.Equal(t, ExitUsage, code, stderr)
			require.True(t, strings.HasPrefix(out, "MODIFIED: the history was modified after the run"), out)
			require.Contains(t, out, "WARNING: the history was modified after the run")
			require.Contains(t, stderr, "digest does not match")
			out, _, _ = rl(t, "check", "--history", file, "--format", "json")
			doc := decodeDoc(t, out)
			require.Equal(t, "modified", string(doc.Verdict))
			require.Equal(t, "modified", doc.Integrity)
		})
	}

	a, b, pol := shardHistories(t)
	for _, shard := range []struct{ file, missing string }{{a, "2/2"}, {b, "1/2"}} {
		out, stderr, code := rl(t, "check", "--history", shard.file, "--policy", pol)
		require.Equal(t, ExitRun, code, stderr)
		require.True(t, strings.HasPrefix(out, "INCOMPLETE: shard "+shard.missing+" of the run is missing"), out)
	}
	_, stderr, code = rl(t, "check", "--history", a, "--history", b, "--policy", pol)
	require.Equal(t, ExitPass, code, "both shards: the whole run; stderr:\n%s", stderr)
}

// Issue 26 item 6 (and issue 27): a fault that never took effect gave a
// false FAIL: a hook that succeeds and does nothing, or a store proxy no
// traffic goes through, against a correct service. The same service with a
// real outage still passes and one that breaks its declared mode still
// fails (TestStoreProxyFaultsAServiceWeDidNotStart,
// TestFaultHooksStopAndStartTheServicesRedis).
func TestAFaultThatNeverTookEffectIsUnknown(t *testing.T) {
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
		name  string
		fault []string
		why   string
	}{
		{"a hook that does nothing", []string{"--on-inject", "store-down=true"}, "the fault hook ran but no behaviour changed"},
		{"a store proxy the service does not use", []string{"--store-proxy", freeAddr(t) + "=" + rs.Addr}, "the fault's injection but no behaviour changed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The service talks to Redis directly, never through the proxy.
			args := append(append([]string{"attack", "--plan", "store-outage", "--out", t.TempDir(), "--quiet", "--fail-on", "none", "--format", "json"},
				tc.fault...), redisBucketBehind(t, rs.Addr, "redisbucket")...)
			out, stderr, code := rl(t, args...)
			require.Equal(t, ExitPass, code, "stderr:\n%s", stderr)
			v, sum := checkOf(t, out, "fail-mode")
			require.Equal(t, "unknown", v, sum)
			require.Contains(t, sum, tc.why)
			require.Contains(t, sum, "the fault may never have happened")
		})
	}
}
