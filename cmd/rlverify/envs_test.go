package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/envs/redisproc"
)

// needEnv skips (locally) or fails (CI=true) when what an environment needs
// is missing.
func needEnv(t *testing.T, env string) {
	t.Helper()
	var err error
	switch env {
	case "docker":
		err = dockerAvailable(context.Background())
	default:
		err = redisproc.Available()
	}
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s environment unavailable in CI: %v", env, err)
	}
	t.Skipf("%s environment unavailable here: %v", env, err)
}

// dockerFlags use the locally built images and never pull.
var dockerFlags = []string{"--env", "docker", "--redis-image", "rlverify/redis:local", "--limiter-image", "rlverify/limiter:local", "--no-pull"}

func verdictOf(t *testing.T, out, check string) string {
	t.Helper()
	d := decodeDoc(t, out)
	for _, c := range d.Checks {
		if c.Name == check {
			return string(c.Verdict)
		}
	}
	t.Fatalf("no %s check in %s", check, out)
	return ""
}

// TestMultiInstanceOnEveryEnvironment: the same plan, three instances on
// shared Redis, passes the instances check on every in-process
// environment, and per-instance state is caught on every one (docker runs
// the 20-instance plan in TestScenariosOnDocker).
func TestMultiInstanceOnEveryEnvironment(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis processes and containers")
	}
	for _, tc := range []struct {
		name string
		env  string
		args []string
	}{
		{"embedded-redis", "embedded", []string{"--store", "redis"}},
		{"local", "local", []string{"--env", "local"}},
		{"local-cluster", "local", []string{"--env", "local", "--redis-cluster", "3"}},
		// docker: multi-instance-20 in TestScenariosOnDocker.
	} {
		t.Run(tc.name, func(t *testing.T) {
			needEnv(t, tc.env)
			for _, lim := range []struct{ name, want string }{{"token-bucket", "pass"}, {"faulty/local-only", "fail"}} {
				args := append([]string{"attack", "--plan", "multi-instance", "--limiter", lim.name, "--format", "json",
					"--out", t.TempDir(), "--quiet", "--checks", "instances"}, tc.args...)
				out, stderr, code := rl(t, args...)
				require.Contains(t, []int{ExitPass, ExitFail}, code, stderr)
				require.Equal(t, lim.want, verdictOf(t, out, "instances"), "%s on %s", lim.name, tc.name)
			}
		})
	}
}

// TestStoreOutageOnDocker stops and restarts the Redis container mid-run
// (store-outage) and pauses it (slow-store): the report shows the fault
// window and the fail-mode verdict under each declared mode (the shipped
// policies, enforcement back within their 1 s recovery); a limiter
// without a failure mode is caught, and so is a history judged against a
// mode it was not recorded under.
func TestStoreOutageOnDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts containers")
	}
	needEnv(t, "docker")
	// Docker tests wait on containers more than they use the CPU, and each
	// stack has its own network: they run beside each other (dockerParallel).
	t.Parallel()
	for _, tc := range []struct{ plan, fault, policy, limiter, want string }{
		{"store-outage", "store-down", "fail-open", "token-bucket", "pass"},
		{"store-outage", "store-down", "fail-closed", "token-bucket", "pass"},
		{"store-outage", "store-down", "fail-local", "token-bucket", "pass"},
		{"store-outage", "store-down", "fail-open", "faulty/unguarded-store", "fail"},
		{"slow-store", "store-slow", "fail-open", "token-bucket", "pass"},
		{"slow-store", "store-slow", "fail-open", "faulty/unguarded-store", "fail"},
	} {
		dir := t.TempDir()
		args := append([]string{"attack", "--plan", tc.plan, "--limiter", tc.limiter, "--format", "json", "--policy", tc.policy,
			"--out", dir, "--quiet", "--checks", "fail-mode"}, dockerFlags...)
		out, stderr, code := rl(t, args...)
		require.Contains(t, []int{ExitPass, ExitFail}, code, stderr)
		d := decodeDoc(t, out)
		require.Len(t, d.Faults, 1, "the fault window is in the report")
		require.Equal(t, tc.fault, d.Faults[0].Kind)
		require.Greater(t, d.Faults[0].End, d.Faults[0].Start)
		require.NotEmpty(t, d.PerSecond, "per-second table around the fault")
		require.Equal(t, tc.want, verdictOf(t, out, "fail-mode"), "%s under %s on %s: %s", tc.limiter, tc.policy, tc.plan, out)
		if tc.plan == "store-outage" && tc.want == "pass" && tc.policy != "fail-closed" {
			// The mismatched mode: the same history judged against a
			// policy declaring fail-closed.
			out, _, code := rl(t, "check", "--history", filepath.Join(dir, "latest", "history.jsonl"), "--policy", "fail-closed", "--format", "json", "--checks", "fail-mode")
			require.Equal(t, ExitFail, code)
			require.Equal(t, "fail", verdictOf(t, out, "fail-mode"), "a %s run judged as fail-closed", tc.policy)
		}
	}
}

// storeFaultPlan is a short outage of the shared store with the given
// fault and param.
func storeFaultPlan(t *testing.T, fault, param string) string {
	t.Helper()
	steady := func(name string) string {
		return "  - name: " + name + "\n    kind: rate\n    key: paid-mode\n    rate: 40/s\n    duration: 1500ms\n"
	}
	plan := "name: store-" + param + "\nneeds: [redis, faults]\nphases:\n" + steady("before") +
		"  - kind: fault\n    action: inject\n    fault: " + fault + "\n    param: " + param + "\n" + steady("during") +
		"  - kind: fault\n    action: clear\n    fault: " + fault + "\n" + steady("after")
	path := filepath.Join(t.TempDir(), "plan.yaml")
	require.NoError(t, os.WriteFile(path, []byte(plan), 0o644))
	return path
}

// TestStoreFaultModes: a store that resets its connections (store-down
// reset; docker kills the container), one cut off by a partition
// (store-down partition; docker disconnects the container from the
// network) and one that swallows every command (store-slow stall) are held to the declared failure mode like the plain
// outage, and a limiter without one is caught, in process and in
// containers.
func TestStoreFaultModes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs attacks against Redis")
	}
	needEnv(t, "embedded")
	storeFaultModes(t, "embedded", []string{"--store", "redis"})
}

// TestStoreFaultModesOnDocker is TestStoreFaultModes in containers.
func TestStoreFaultModesOnDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts containers")
	}
	needEnv(t, "docker")
	t.Parallel() // see TestStoreOutageOnDocker
	storeFaultModes(t, "docker", dockerFlags)
}

// storeFaultModes runs each store fault's plan on env against the reference
// limiter (fail-mode passes) and its unguarded twin (fails).
func storeFaultModes(t *testing.T, env string, envArgs []string) {
	for _, f := range []struct{ fault, param string }{{"store-down", "reset"}, {"store-down", "partition"}, {"store-slow", "stall"}} {
		plan := storeFaultPlan(t, f.fault, f.param)
		lims := []struct{ name, want string }{{"token-bucket", "pass"}, {"faulty/unguarded-store", "fail"}}
		if f.param == "partition" {
			// To the limiter a partition is a stall: its faulty twin is
			// caught there.
			lims = lims[:1]
		}
		for _, lim := range lims {
			args := append([]string{"attack", "--plan", plan, "--limiter", lim.name, "--policy", "fail-open", "--format", "json",
				"--out", t.TempDir(), "--quiet", "--checks", "fail-mode"}, envArgs...)
			out, stderr, code := rl(t, args...)
			require.Contains(t, []int{ExitPass, ExitFail}, code, stderr)
			d := decodeDoc(t, out)
			require.Equal(t, lim.want, verdictOf(t, out, "fail-mode"), "%s %s %s on %s: %+v", lim.name, f.fault, f.param, env, d.Check("fail-mode"))
		}
	}
}

// TestScenariosOnDocker runs the failure scenarios in containers: each
// passes against the reference limiter (or setting) and fails against the
// faulty or mismatched one, as TestMutationMatrix shows them on embedded.
// Instance faults (clock-skew, rules-down) reach the containers through
// their control endpoints; regions get one Redis container per region and
// the reconciliation loop runs in the harness.
func TestScenariosOnDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts containers")
	}
	needEnv(t, "docker")
	t.Parallel() // see TestStoreOutageOnDocker
	for _, tc := range []dockerScenario{
		{"clock-skew", "oversell", []dockerRun{
			{args: []string{"--limiter", "token-bucket"}, want: "pass"},
			{args: []string{"--limiter", "faulty/instance-clock"}, want: "fail"},
		}},
		{"rules-unavailable", "fail-mode", []dockerRun{
			{args: []string{"--limiter", "token-bucket"}, want: "pass"},
			{args: []string{"--limiter", "faulty/no-rule-defaults"}, want: "fail"},
		}},
		{"multi-instance-20", "instances", []dockerRun{
			{args: []string{"--limiter", "token-bucket"}, want: "pass"},
			{args: []string{"--limiter", "faulty/local-only"}, want: "fail"},
		}},
		{"regions", "regions", []dockerRun{
			// Replicated regions admit up to about 0.96 of the bound (the
			// quota and the 5% tolerance) on a quiet machine, and more when
			// the runner is busy and replication lags: one retry.
			{args: []string{"--region-mode", "replicated"}, want: "pass", retries: 1},
			{args: []string{"--region-mode", "strict"}, want: "pass"},
			{args: []string{"--region-mode", "independent"}, want: "fail"},
		}},
	} {
		t.Run(tc.plan, func(t *testing.T) {
			t.Parallel()
			tc.run(t)
		})
	}
}

// TestBoundaryBurstOnDocker runs alone, not beside the other docker tests:
// its fixed window's ratio depends on a burst landing on the window's edge.
func TestBoundaryBurstOnDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts containers")
	}
	needEnv(t, "docker")
	dockerScenario{"boundary-burst", "oversell", []dockerRun{
		{args: []string{"--limiter", "sliding-log"}, want: "pass"},
		{args: []string{"--limiter", "fixed-window"}, want: "pass"},
		{args: []string{"--limiter", "faulty/unweighted-fixed-window"}, want: "fail"},
	}}.run(t)
}

type dockerRun struct {
	args []string
	want string
	// retries is how many more runs a timing-bound pass may take.
	retries int
}

// dockerScenario is a plan run in containers with each of runs, judged by
// check.
type dockerScenario struct {
	plan, check string
	runs        []dockerRun
}

func (tc dockerScenario) run(t *testing.T) {
	for _, r := range tc.runs {
		args := append([]string{"attack", "--plan", tc.plan, "--format", "json", "--out", t.TempDir(), "--quiet", "--checks", tc.check}, r.args...)
		out, stderr, code := rl(t, append(args, dockerFlags...)...)
		require.Contains(t, []int{ExitPass, ExitFail}, code, stderr)
		for try := 0; try < r.retries && verdictOf(t, out, tc.check) != r.want; try++ {
			d := decodeDoc(t, out)
			t.Logf("%s %v on docker: %s, not %s (%s); again", tc.plan, r.args, verdictOf(t, out, tc.check), r.want, d.Check(tc.check).Summary)
			out, stderr, code = rl(t, append(args, dockerFlags...)...)
			require.Contains(t, []int{ExitPass, ExitFail}, code, stderr)
		}
		require.Equal(t, r.want, verdictOf(t, out, tc.check), "%s %v on docker", tc.plan, r.args)
		d := decodeDoc(t, out)
		if tc.plan == "multi-instance-20" {
			require.Len(t, d.Run.Instances, 20, "twenty containers")
		}
		if tc.plan == "regions" {
			require.Contains(t, d.Run.Store, "2 regions")
		}
		if r.args[1] == "fixed-window" {
			// The edge effect of a fixed window is expected for that
			// policy and reported as a figure: ~2× within W.
			require.InDelta(t, 2.0, d.Check("oversell").Figures["boundary_ratio"], 0.2)
		}
	}
}

// TestFailModeMismatchIsCaught: a history recorded under one failure mode,
// judged against a policy declaring another, fails fail-mode.
func TestFailModeMismatchIsCaught(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis")
	}
	needEnv(t, "embedded")
	dir := t.TempDir()
	_, stderr, code := rl(t, "attack", "--plan", "store-outage", "--policy", "fail-open", "--out", dir, "--quiet", "--checks", "fail-mode")
	require.Equal(t, ExitPass, code, stderr)
	out, _, code := rl(t, "check", "--history", dir+"/latest/history.jsonl", "--policy", "fail-closed", "--format", "json", "--checks", "fail-mode")
	require.Equal(t, ExitFail, code)
	require.Equal(t, "fail", verdictOf(t, out, "fail-mode"))
}

// TestGlobalGuardProtectsDownstream: with the guard, downstream arrivals in
// any second stay within it; a service without the guard, judged against a
// policy that declares one, fails downstream.
func TestGlobalGuardProtectsDownstream(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two attacks")
	}
	out, stderr, code := rl(t, "attack", "--plan", "global-guard", "--format", "json", "--out", t.TempDir(), "--quiet")
	require.Equal(t, ExitPass, code, stderr)
	require.Equal(t, "pass", verdictOf(t, out, "downstream"))
	d := decodeDoc(t, out)
	require.Greater(t, d.Stats.Rejected, int64(0), "the guard refused some requests")

	dir := t.TempDir()
	_, stderr, code = rl(t, "attack", "--plan", "global-guard", "--policy", "default", "--out", dir, "--quiet")
	require.Equal(t, ExitPass, code, stderr)
	out, _, code = rl(t, "check", "--history", filepath.Join(dir, "latest", "history.jsonl"), "--policy", "global-guard", "--format", "json", "--checks", "downstream")
	require.Equal(t, ExitFail, code)
	require.Equal(t, "fail", verdictOf(t, out, "downstream"))
}
