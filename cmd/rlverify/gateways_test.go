package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/envs/gateway"
)

// needGateway skips (locally) or fails (CI=true) when nginx or haproxy is
// missing (scripts/install.sh --test installs both) or gubernator is not
// built in (scripts/test.sh tests with -tags docker,gubernator).
func needGateway(t *testing.T, kinds ...string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts gateway processes")
	}
	for _, k := range kinds {
		if err := gateway.Available(k); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%v", err)
			}
			t.Skipf("%v", err)
		}
	}
}

// attackDoc runs attack and returns the verdicts, the result document and
// the run's directory.
func attackDoc(t *testing.T, args ...string) (map[string]string, string) {
	t.Helper()
	dir := t.TempDir()
	out, stderr, code := rl(t, append([]string{"attack", "--format", "json", "--out", dir, "--quiet"}, args...)...)
	require.Contains(t, []int{ExitPass, ExitFail}, code, stderr)
	return verdicts(decodeDoc(t, out)), filepath.Join(dir, "latest")
}

// checkHonest judges the history in dir against the honest policy the run
// wrote there.
func checkHonest(t *testing.T, dir string) map[string]string {
	t.Helper()
	out, stderr, code := rl(t, "check", "--history", filepath.Join(dir, "history.jsonl"), "--policy", filepath.Join(dir, rlverify.HonestPolicyFile), "--format", "json")
	require.Contains(t, []int{ExitPass, ExitFail}, code, stderr)
	return verdicts(decodeDoc(t, out))
}

// requireVerdicts compares verdicts; a wanted fail is met by explained too
// (the violation is there, the diagnosis names another check's defect as
// its cause).
func requireVerdicts(t *testing.T, got map[string]string, want map[string]string, what string) {
	t.Helper()
	for check, v := range want {
		g := got[check]
		if v == "fail" && g == "explained" {
			g = "fail"
		}
		assert.Equal(t, v, g, "%s: %s", what, check)
	}
}

// The command of issue 20's "done when": every gateway beside the
// reference bucket, with the verdicts docs/compare.md explains.
func TestCompareGatewaysConcurrentBurst(t *testing.T) {
	needGateway(t, "nginx", "haproxy", "gubernator")
	dir := t.TempDir()
	_, stderr, code := rl(t, "compare", "--plan", "concurrent-burst", "--limiter", "nginx/limit-req", "--limiter", "haproxy/stick-table",
		"--limiter", "gubernator/global", "--limiter", "token-bucket", "--out", dir, "--format", "md")
	require.Equal(t, ExitFail, code, stderr)
	cmp := readComparison(t, dir, 4)
	want := map[string]map[string]string{
		// Both gateways hold the burst and say nothing about it.
		"nginx/limit-req":     {"oversell": "pass", "under-admission": "pass", "retry-after": "fail", "headers": "fail", "downstream": "pass"},
		"haproxy/stick-table": {"oversell": "pass", "under-admission": "pass", "retry-after": "fail", "headers": "fail", "downstream": "pass"},
		// GLOBAL: three peers answer from their own caches, and what they
		// admit reaches downstream.
		"gubernator/global": {"oversell": "fail", "instances": "fail", "downstream": "fail"},
		"token-bucket":      {"oversell": "pass", "under-admission": "pass", "retry-after": "pass", "headers": "pass", "downstream": "pass"},
	}
	for _, col := range cmp.Columns {
		requireVerdicts(t, verdicts(*col.Document), want[col.Name], col.Name)
	}
	for _, name := range []string{"nginx_limit-req/nginx-0.conf", "nginx_limit-req/honest-policy.yaml", "haproxy_stick-table/haproxy-0.cfg"} {
		_, err := os.Stat(filepath.Join(dir, "latest", name))
		assert.NoError(t, err, "%s is kept beside the run", name)
	}
}

// Judged against what it really enforces, every gateway that keeps its
// documented semantics passes (nginx and HAProxy send no Retry-After: their
// honest policies turn retry-after off).
func TestGatewaysPassTheirHonestPolicy(t *testing.T) {
	needGateway(t, "nginx", "haproxy", "gubernator")
	for _, tc := range []struct {
		limiter         string
		declared, honst map[string]string
	}{
		{"nginx/limit-req",
			map[string]string{"oversell": "pass", "retry-after": "fail", "headers": "fail"},
			map[string]string{"oversell": "pass", "under-admission": "pass", "retry-after": "skip", "headers": "skip", "downstream": "pass"}},
		{"nginx/limit-req-delay",
			map[string]string{"oversell": "pass", "retry-after": "fail", "headers": "fail"},
			map[string]string{"oversell": "pass", "under-admission": "pass", "retry-after": "skip", "headers": "skip", "downstream": "pass"}},
		{"haproxy/stick-table",
			map[string]string{"oversell": "pass", "retry-after": "fail", "headers": "fail"},
			map[string]string{"oversell": "pass", "under-admission": "pass", "retry-after": "skip", "headers": "skip", "downstream": "pass"}},
		{"gubernator/local",
			map[string]string{"oversell": "pass", "instances": "pass", "retry-after": "pass", "headers": "pass"},
			map[string]string{"oversell": "pass", "under-admission": "pass", "instances": "pass", "retry-after": "pass", "headers": "pass", "downstream": "pass"}},
	} {
		t.Run(tc.limiter, func(t *testing.T) {
			got, dir := attackDoc(t, "--plan", "concurrent-burst", "--limiter", tc.limiter)
			requireVerdicts(t, got, tc.declared, "declared policy")
			requireVerdicts(t, checkHonest(t, dir), tc.honst, "honest policy (rlverify check)")
			got, _ = attackDoc(t, "--plan", "concurrent-burst", "--limiter", tc.limiter, "--honest")
			requireVerdicts(t, got, tc.honst, "honest policy (--honest)")
		})
	}
}

// envoyproxy/ratelimit as a gateway: started from the policy (a
// redis-server, the instances, the generated configuration) and called
// over gRPC. Declared, the default policy's 10 per 2s is refused early:
// the service's windows are units, and 10 per 2s became 5 per second
// (under-admission, with the honest policy saying so); judged against the
// honest policy the burst passes, and three instances on one Redis keep
// one quota per key.
func TestEnvoyRateLimitGateway(t *testing.T) {
	needGateway(t, "envoy-ratelimit")
	out := t.TempDir()
	stdout, stderr, code := rl(t, "attack", "--format", "json", "--out", out, "--quiet", "--plan", "concurrent-burst", "--limiter", "envoy/ratelimit")
	require.Equal(t, ExitFail, code, stderr)
	d := decodeDoc(t, stdout)
	got, dir := verdicts(d), filepath.Join(out, "latest")
	requireVerdicts(t, got, map[string]string{"oversell": "pass", "retry-after": "fail"}, "declared policy")
	// A burst inside one second gets 5 through where the declared window
	// has room for 10; one that straddles a second's edge gets 5 + 5, all
	// the declared window allows.
	if d.Stats.Admitted == 5 {
		assert.Equal(t, "fail", got["under-admission"], "5 admitted where 10 fit")
	} else {
		assert.Equal(t, int64(10), d.Stats.Admitted, "the burst straddled a second's edge")
	}
	honest := map[string]string{"oversell": "pass", "under-admission": "pass", "retry-after": "skip", "headers": "pass", "token-bounds": "pass"}
	requireVerdicts(t, checkHonest(t, dir), honest, "honest policy (rlverify check)")
	b, err := os.ReadFile(filepath.Join(dir, "envoy-ratelimit.yaml"))
	require.NoError(t, err, "the generated configuration is kept beside the run")
	assert.Contains(t, string(b), "requests_per_unit: 5")
	got, _ = attackDoc(t, "--plan", "multi-instance", "--limiter", "envoy/ratelimit", "--honest")
	requireVerdicts(t, got, map[string]string{"oversell": "pass", "instances": "pass"}, "three instances, one Redis")
	// bypass varies HTTP requests; a rate-limit service gets descriptors:
	// no verdict, and the reason.
	_, stderr, _ = rl(t, "attack", "--plan", "bypass", "--limiter", "envoy/ratelimit", "--out", t.TempDir(), "--quiet")
	assert.Contains(t, stderr, "a grpc:// rate-limit service is sent a descriptor, not the request")
}

// Without nodelay nginx admits the same requests, late: the checks judge
// each by its [send, receive] interval, which holds the decision, so a
// delaying limiter needs no check of its own.
func TestNginxDelayIsTimeShiftedNotRefused(t *testing.T) {
	needGateway(t, "nginx")
	dir := t.TempDir()
	out, stderr, code := rl(t, "attack", "--plan", "concurrent-burst", "--limiter", "nginx/limit-req-delay", "--honest", "--format", "json", "--out", dir, "--quiet")
	require.Equal(t, ExitPass, code, stderr)
	d := decodeDoc(t, out)
	assert.Equal(t, int64(10), d.Stats.Admitted, "burst 9 + 1: the same ten as with nodelay")
	require.NotNil(t, d.Latency)
	// The ninth delayed request waits 9 × 200ms; allow for a slow machine
	// only upwards.
	assert.GreaterOrEqual(t, time.Duration(d.Latency.Max), 1500*time.Millisecond, "the admitted excess is delayed to the rate")
	requireVerdicts(t, verdicts(d), map[string]string{"oversell": "pass", "under-admission": "pass", "downstream": "pass"}, "delay")
}

// HAProxy counts refused requests (sc_http_req_rate "includes every started
// request, valid or not"): under sustained overload the noisy tenant stays
// refused. Judged as a counter of admitted requests that is a wrong 429 —
// blamed on the quiet tenants by isolation too —; judged as what HAProxy
// documents, it passes.
func TestHAProxyCountsRefusedRequests(t *testing.T) {
	needGateway(t, "haproxy")
	got, dir := attackDoc(t, "--plan", "tenant-isolation", "--limiter", "haproxy/stick-table")
	requireVerdicts(t, got, map[string]string{"oversell": "pass", "under-admission": "fail"}, "declared policy")
	requireVerdicts(t, checkHonest(t, dir), map[string]string{"oversell": "pass", "under-admission": "pass", "isolation": "pass"}, "honest policy")
}

// Spread over three instances, nginx and HAProxy keep three quotas (one
// zone or table per process): the cluster-wide policy fails instances, as
// documented; the honest policy (scope: instance) judges each alone and
// passes.
func TestGatewayInstancesKeepTheirOwnState(t *testing.T) {
	needGateway(t, "nginx", "haproxy")
	for _, limiter := range []string{"nginx/limit-req", "haproxy/stick-table"} {
		got, dir := attackDoc(t, "--plan", "multi-instance", "--limiter", limiter, "--checks", "oversell,instances,downstream")
		requireVerdicts(t, got, map[string]string{"oversell": "fail", "instances": "fail"}, limiter+" declared")
		requireVerdicts(t, checkHonest(t, dir), map[string]string{"oversell": "pass", "instances": "pass", "downstream": "pass"}, limiter+" honest")
	}
}

func TestGatewayUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--limiter", "nginx/limit-req", "--env", "local"}, "--env local does not apply"},
		{[]string{"--limiter", "haproxy/stick-table", "--store", "redis"}, "--store, --redis and --regions do not apply"},
		{[]string{"--limiter", "token-bucket", "--honest"}, "--honest applies to gateway limiters"},
	} {
		_, stderr, code := rl(t, append([]string{"attack", "--plan", "concurrent-burst", "--out", t.TempDir(), "--quiet"}, tc.args...)...)
		assert.Equal(t, ExitUsage, code, "%v: %s", tc.args, stderr)
		assert.Contains(t, stderr, tc.want, "%v", tc.args)
	}
}

// A gateway whose program is missing: attack cannot run (exit 3, naming
// the packages), compare skips it and compares the rest.
func TestGatewayMissingProgram(t *testing.T) {
	t.Setenv(gateway.ProgramEnv("nginx"), "/nonexistent/nginx")
	_, stderr, code := rl(t, "attack", "--plan", "concurrent-burst", "--limiter", "nginx/limit-req", "--out", t.TempDir(), "--quiet")
	assert.Equal(t, ExitRun, code, stderr)
	assert.Contains(t, stderr, "apt-get install nginx haproxy")
	dir := t.TempDir()
	_, stderr, code = rl(t, "compare", "--plan", "concurrent-burst", "--limiter", "nginx/limit-req", "--limiter", "token-bucket", "--limiter", "gcra", "--out", dir)
	assert.Equal(t, ExitPass, code, stderr)
	assert.Contains(t, stderr, "compare: nginx/limit-req skipped: ")
	readComparison(t, dir, 2)
}

// Ctrl-C in the middle of a gateway run: rlverify still reports, and no
// gateway process or temporary configuration of the run is left.
func TestGatewayInterruptLeavesNothing(t *testing.T) {
	needGateway(t, "nginx", "haproxy", "gubernator")
	plan := writeFile(t, "long.yaml", longRatePlan)
	bin := rlverifyBinary(t)
	for _, limiter := range []string{"nginx/limit-req", "haproxy/stick-table", "gubernator/global"} {
		t.Run(limiter, func(t *testing.T) {
			tmp, out := t.TempDir(), t.TempDir()
			cmd := exec.Command(bin, "attack", "--plan", plan, "--limiter", limiter, "--out", out, "--quiet", "--fail-on", "none")
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
			var stderr bytes.Buffer
			cmd.Stderr, cmd.Stdout = &stderr, &bytes.Buffer{}
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			require.NoError(t, cmd.Start())
			pgid := cmd.Process.Pid
			t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
			// Wait until requests flow, then Ctrl-C the way a terminal does:
			// to rlverify's whole process group.
			require.Eventually(t, func() bool {
				// The run writes into its own folder under out.
				files, _ := filepath.Glob(filepath.Join(out, "*", "history.jsonl"))
				if len(files) == 0 {
					return false
				}
				st, err := os.Stat(files[0])
				return err == nil && st.Size() > 4096
			}, 30*time.Second, 50*time.Millisecond, "the run starts")
			if strings.HasPrefix(limiter, "nginx") || strings.HasPrefix(limiter, "haproxy") {
				require.NotEmpty(t, processesUnder(t, tmp), "the gateway runs from the run's temporary directory")
			}
			require.NoError(t, syscall.Kill(-pgid, syscall.SIGINT))
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				var ee *exec.ExitError
				if err != nil && !errors.As(err, &ee) {
					t.Fatalf("wait: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("rlverify did not stop within 30s of SIGINT; stderr:\n%s", stderr.String())
			}
			assert.Equal(t, ExitInterrupted, cmd.ProcessState.ExitCode(), stderr.String())
			requireCompleteInterrupted(t, out)
			assert.Empty(t, processesUnder(t, tmp), "no gateway process of the run is left")
			left, err := os.ReadDir(tmp)
			require.NoError(t, err)
			assert.Empty(t, left, "no temporary directory of the run is left")
		})
	}
}

// processesUnder lists the pids whose command line mentions dir.
func processesUnder(t *testing.T, dir string) []string {
	t.Helper()
	cmdlines, err := filepath.Glob("/proc/[0-9]*/cmdline")
	require.NoError(t, err)
	var pids []string
	for _, f := range cmdlines {
		b, err := os.ReadFile(f)
		if err == nil && strings.Contains(string(b), dir) {
			pids = append(pids, filepath.Base(filepath.Dir(f)))
		}
	}
	return pids
}
