package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/internal/testsvc"
)

// Issue 26, item 13: numbers past what the run can hold are usage errors
// naming the value and the flag, never a crash or a wrapped value.
func TestReliabilityOverflowsAreUsageErrors(t *testing.T) {
	hist := filepath.Join(t.TempDir(), "h.jsonl")
	require.NoError(t, os.WriteFile(hist, sampleHistory(t), 0o600))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		// Was "fatal error: stack overflow" in human.Duration(MinInt64).
		{"latency threshold of 2^63-1 ns", []string{"check", "--history", hist, "--threshold", "latency.p99<9223372036854775807ns"},
			`threshold "latency.p99<9223372036854775807ns": p99: "9223372036854775807ns": want a duration such as 50ms or 1.5s, at most 24h0m0s`},
		{"latency threshold of 1e308 ms", []string{"check", "--history", hist, "--threshold", "latency.p99<1e308"}, "at most 24h0m0s"},
		// Was accepted: every comparison with NaN is false.
		{"NaN%", []string{"check", "--history", hist, "--threshold", "errors<NaN%"}, `threshold "errors<NaN%": share: "NaN%": want a percentage in 0 … 100%`},
		{"NaN rate", []string{"check", "--history", hist, "--threshold", "admitted.rate<NaN/s"}, `"NaN/s": want a rate`},
		// Was accepted and overflowed the interval arithmetic.
		{"--clock-skew 2562047h", []string{"check", "--history", hist, "--clock-skew", "2562047h"}, "--clock-skew 2562047h0m0s: want at most 1h0m0s"},
		// Was accepted: net/http's own margin overflowed and every answer became an error.
		{"--max-header-bytes 2^63-1", []string{"attack", "--plan", "concurrent-burst", "--out", t.TempDir(), "--max-header-bytes", "9223372036854775807"},
			"--max-header-bytes 9223372036854775807, --max-headers 100: want at most 1073741824 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := rl(t, tc.args...)
			require.Equal(t, ExitUsage, code, stderr)
			require.Contains(t, stderr, tc.want)
		})
	}
}

// readmeCommand returns the README's `rlverify …` command line that
// contains every one of parts, split into arguments (README commands quote
// nothing they need split differently), without the leading "rlverify".
func readmeCommand(t *testing.T, parts ...string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	var found []string
	// A command continued with a trailing backslash is one line.
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if i := strings.Index(line, "  #"); i > 0 {
			line = strings.TrimSpace(line[:i]) // a trailing comment
		}
		ok := strings.HasPrefix(line, "rlverify ")
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			found = append(found, line)
		}
	}
	require.Len(t, found, 1, "README.md: want exactly one command line with %q", parts)
	args := strings.Fields(found[0])[1:]
	for i, a := range args {
		args[i] = strings.Trim(a, "'") // shell quoting; no README argument holds a space
	}
	return args
}

// Issue 26, item 17: the README's `compare --target NAME=URL` exited 2
// ("--hook-timeout 0s: want a positive duration": attack's external flags
// and their defaults were never registered on compare). This runs the
// README's command as written — only the address is the test service's —
// against a service rlverify did not write. It declares no policy, so the
// service is judged against the default one it does not speak: its column
// must be there, hold what the service answered, and be UNKNOWN, not PASS.
func TestReadmeCompareTargetCommand(t *testing.T) {
	args := readmeCommand(t, "compare", "--target mine=")
	sessions, err := testsvc.NewSessions(testsvc.SessionsConfig{})
	require.NoError(t, err)
	url, stop := testsvc.Serve(sessions)
	t.Cleanup(stop)
	for i, a := range args {
		args[i] = strings.ReplaceAll(a, "http://127.0.0.1:8080", url)
	}
	require.Contains(t, args, "mine="+url)
	t.Chdir(t.TempDir()) // the README's command writes ./rlverify-compare
	// The README declares your service's policy as my-policy.yaml: here the
	// sessions service's own.
	pol, err := testsvc.PolicyYAML("sessions")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile("my-policy.yaml", pol, 0o644))
	stdout, stderr, code := rl(t, args...)
	require.NotEqual(t, ExitUsage, code, stderr)
	require.Equal(t, ExitFail, code, "an UNKNOWN column fails --fail-on's default; stderr:\n%s", stderr)
	require.Regexp(t, `(?m)^\s+token-bucket\s+mine$`, stdout)
	require.Regexp(t, `(?m)^verdict\s+PASS\s+UNKNOWN$`, stdout)
	h, err := history.ReadFile(filepath.Join("rlverify-compare", "latest", "mine", "history.jsonl"))
	require.NoError(t, err)
	require.NotEmpty(t, h.Events)
	for _, e := range h.Events {
		require.Equal(t, http.StatusNotFound, e.Status, "the service answered every request (404: / is not under %s)", testsvc.SessionsPrefix)
	}
}

// Issue 26, item 14: a failing clear hook exits 3 as docs/environments.md
// says, even when a check failed on what was recorded (it exited 1: the
// service may be left in the fault); a hook that leaves a process in the
// background does not stop the run ("WaitDelay expired").
func TestReliabilityFaultHooks(t *testing.T) {
	url, stop := testsvc.Serve(mustWindowed(t))
	defer stop()
	base := []string{"attack", "--target", url + "/search/x", "--policy", windowedPolicy(t), "--plan", "store-outage", "--out", t.TempDir()}
	// The real binary, so that main's printing of the error is what is
	// checked too (item 18: the hook's colours must reach the terminal
	// escaped).
	cmd := exec.Command(rlverifyBinary(t), append(base, "--quiet", "--on-inject", "store-down=true", "--on-clear", `store-down=printf '\033[31mclear failed' >&2; exit 5`)...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	stderr := errb.String()
	require.Equal(t, ExitRun, ee.ExitCode(), stderr)
	require.Contains(t, stderr, `clear hook for store-down failed (exit status 5): "printf '\\033[31mclear failed' >&2; exit 5" (output: \x1b[31mclear failed)`)
	require.NotContains(t, stderr, "\x1b", "no raw ESC reaches the terminal")

	// Interrupted while the fault is on: the clear command run at the end
	// of the run fails, and that is said and exits 3 (it was silent).
	code, stderr, _ := interrupt(t, syscall.SIGINT, 3*time.Second, append(base, "--quiet", "--on-inject", "store-down=true", "--on-clear", "store-down=echo still down; exit 9")...)
	require.Equal(t, ExitRun, code, stderr)
	require.Contains(t, stderr, `clear store-down at the end of the run: fault command failed: clear hook for store-down failed (exit status 9): "echo still down; exit 9" (output: still down)`)

	_, stderr, _ = rl(t, append(base, "--on-inject", "store-down=sleep 2 &", "--on-clear", "store-down=true")...)
	require.NotContains(t, stderr, "WaitDelay")
	require.NotContains(t, stderr, "did not complete")
	require.Contains(t, stderr, `inject hook for store-down left a process running in the background (its output is not kept): "sleep 2 &"`)
}

// Issue 26, item 15: a store proxy whose upstream is its own listen
// address, or another store proxy's, is a usage error (it spun at 100% CPU
// for the rest of the run).
func TestReliabilityStoreProxyToItself(t *testing.T) {
	url, stop := testsvc.Serve(mustWindowed(t))
	defer stop()
	for _, tc := range []struct {
		proxies []string
		want    string
	}{
		{[]string{"127.0.0.1:16390=127.0.0.1:16390"}, "--store-proxy 127.0.0.1:16390=127.0.0.1:16390: the upstream is the proxy's own listen address: it would forward to itself"},
		{[]string{"localhost:16390=127.0.0.1:16390"}, "the upstream is the proxy's own listen address"},
		{[]string{"127.0.0.1:16390=127.0.0.1:16391", "127.0.0.1:16391=127.0.0.1:16390"}, "the proxies would forward to each other"},
	} {
		t.Run(strings.Join(tc.proxies, " "), func(t *testing.T) {
			args := []string{"attack", "--target", url + "/search/x", "--policy", windowedPolicy(t), "--plan", "store-outage", "--quiet", "--out", t.TempDir()}
			for _, p := range tc.proxies {
				args = append(args, "--store-proxy", p)
			}
			_, stderr, code := rl(t, args...)
			require.Equal(t, ExitUsage, code, stderr)
			require.Contains(t, stderr, tc.want)
		})
	}
}

// Issue 26, item 16: check honours SIGINT and SIGTERM while it reads and
// judges (a 3.6 M-event check ran 22 s past Ctrl-C). Its standard input
// here is a history that never ends, so without the fix check waits for ever.
func TestReliabilityCheckStopsOnASignal(t *testing.T) {
	header := strings.SplitAfter(string(sampleHistory(t)), "\n")[0]
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			// A signal that lands before the process has installed its
			// handlers (a loaded runner starts it slowly) kills it with the
			// signal's default action: that is a start too slow for the
			// wait, not the bug, so wait longer and try again; a check that
			// never handles the signal dies by it every time.
			for _, wait := range []time.Duration{300 * time.Millisecond, time.Second, 3 * time.Second} {
				code, stderr := checkStoppedBy(t, header, sig, wait)
				if code == -1 && wait < 3*time.Second {
					t.Logf("killed by %v after %v, before its handlers were installed: again, waiting longer", sig, wait)
					continue
				}
				require.Equal(t, ExitInterrupted, code, stderr)
				require.Contains(t, stderr, "interrupted")
				return
			}
		})
	}
}

// checkStoppedBy starts `check --history -`, writes header to its standard
// input (which then never ends), sends sig after wait and returns the exit
// code (-1: killed by the signal) and standard error.
func checkStoppedBy(t *testing.T, header string, sig syscall.Signal, wait time.Duration) (int, string) {
	t.Helper()
	cmd := exec.Command(rlverifyBinary(t), "check", "--history", "-")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	defer stdin.Close()
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	_, err = io.WriteString(stdin, header)
	require.NoError(t, err)
	time.Sleep(wait)
	require.NoError(t, cmd.Process.Signal(sig))
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("check did not stop within 10s of %v; stderr:\n%s", sig, stderr.String())
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// Issue 26, item 16: `attack --history - | head` died silently from
// SIGPIPE, leaving a history with no end record. The run now stops when
// its reader goes away: the history file is complete (end record, reason),
// the reports are in --out, stderr says why, exit 3.
func TestReliabilityHistoryReaderGoesAway(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(rlverifyBinary(t), "attack", "--plan", "overload", "--max-duration", "20s", "--history", "-", "--out", dir)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	line := make([]byte, 1)
	_, err = stdout.Read(line) // the run header has begun: `head -c 1`
	require.NoError(t, err)
	require.NoError(t, stdout.Close())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatalf("attack did not stop within 15s of its reader going away; stderr:\n%s", stderr.String())
	}
	require.Equal(t, ExitRun, cmd.ProcessState.ExitCode(), "not killed by SIGPIPE; stderr:\n%s", stderr.String())
	require.Contains(t, stderr.String(), "the copy of the history cannot be written (did its reader go away?)")
	h, err := history.ReadFile(filepath.Join(dir, "latest", "history.jsonl"))
	require.NoError(t, err)
	require.NotNil(t, h.End, "the history file has its end record")
	require.True(t, h.End.Interrupted)
	require.Contains(t, h.End.Reason, "broken pipe")
	require.FileExists(t, filepath.Join(dir, "latest", "result.json"))
}

// Issue 26, item 16: --redis where no Redis of the user's is used was
// ignored silently (the user believed the run exercised their Redis); it is
// a usage error naming why, as it already was for --env docker.
func TestReliabilityRedisThatWouldBeIgnored(t *testing.T) {
	url, stop := testsvc.Serve(mustWindowed(t))
	defer stop()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"memory store by default", nil, "--redis redis://127.0.0.1:1 does not apply: token-bucket keeps its state in memory in this run (store memory); give --store redis"},
		{"--store memory", []string{"--store", "memory"}, "does not apply: token-bucket keeps its state in memory"},
		{"--env local", []string{"--env", "local"}, "--env local starts its own redis-server processes: --redis redis://127.0.0.1:1 does not apply"},
		{"--target", []string{"--target", url + "/search/x", "--policy", windowedPolicy(t)}, "--redis redis://127.0.0.1:1 does not apply to --env external"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"attack", "--plan", "concurrent-burst", "--redis", "127.0.0.1:1", "--quiet", "--out", t.TempDir()}, tc.args...)
			_, stderr, code := rl(t, args...)
			require.Equal(t, ExitUsage, code, stderr)
			require.Contains(t, stderr, tc.want)
		})
	}
	// With --store redis it is used: port 1 answers nothing, so the run
	// cannot be done.
	_, stderr, code := rl(t, "attack", "--plan", "concurrent-burst", "--redis", "127.0.0.1:1", "--store", "redis", "--quiet", "--out", t.TempDir())
	require.Equal(t, ExitRun, code, stderr)
	require.Contains(t, stderr, "redis at 127.0.0.1:1")
}

// Issue 26, item 18: names from a plan holding control characters are
// refused where the plan is read, and whatever reaches standard error goes
// through one writer that shows control characters escaped.
func TestReliabilityTerminalEscapes(t *testing.T) {
	for _, tc := range []struct{ name, plan, want string }{
		{"ANSI escape in a phase name", "name: p\nphases:\n  - name: \"ph\\x1b[31mRED\"\n    kind: burst\n    key: free-k\n    requests: 5\n",
			`bad.yaml:3: phases.0.name: name "ph\x1b[31mRED" holds a control character (U+001B)`},
		{"newline in a phase name", "name: p\nphases:\n  - name: \"ph\\nfake line\"\n    kind: burst\n    key: free-k\n    requests: 5\n",
			`name "ph\nfake line" holds a control character (U+000A)`},
		{"BEL in the plan name", "name: \"p\\a\"\nphases:\n  - kind: burst\n    key: free-k\n    requests: 5\n",
			`bad.yaml:1: name: name "p\a" holds a control character (U+0007)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "bad.yaml")
			require.NoError(t, os.WriteFile(file, []byte(tc.plan), 0o600))
			_, stderr, code := rl(t, "attack", "--plan", file, "--quiet", "--out", t.TempDir())
			require.Equal(t, ExitUsage, code, stderr)
			require.Contains(t, stderr, tc.want)
		})
	}

}

// The README's commands whose flags issue 26 items 13 and 16 touched
// (--threshold limits, --clock-skew bounds), run as written.
func TestReadmeThresholdAndClockSkewCommands(t *testing.T) {
	t.Run("thresholds", func(t *testing.T) {
		args := readmeCommand(t, "--plan overload --threshold")
		require.Equal(t, []string{"attack", "--plan", "overload", "--threshold", "latency.p99<50ms", "--threshold", "errors<1%",
			"--threshold", "phase.overload.admitted.rate<=8/s"}, args)
		t.Chdir(t.TempDir())
		stdout, stderr, code := rl(t, args...)
		// The latency threshold may fail on a loaded machine: the command
		// must run and judge every threshold either way.
		require.Contains(t, []int{ExitPass, ExitFail}, code, stderr)
		for _, th := range []string{"latency.p99<50ms", "errors<1%", "phase.overload.admitted.rate<=8/s"} {
			require.Regexp(t, `(?m)^\s*`+regexp.QuoteMeta(th)+`\s+(PASS|FAIL)`, stdout)
		}
	})
	t.Run("clock skew", func(t *testing.T) {
		args := readmeCommand(t, "--clock-skew 5ms")
		a, b, pol := shardHistories(t)
		dir := t.TempDir()
		for src, dst := range map[string]string{a: "a.jsonl", b: "b.jsonl", pol: "p.yaml"} {
			data, err := os.ReadFile(src)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, dst), data, 0o600))
		}
		t.Chdir(dir)
		stdout, stderr, code := rl(t, args...)
		require.Equal(t, ExitPass, code, "%s\n%s", stdout, stderr)
		require.Contains(t, stdout, "PASS")
	})
}

// windowedPolicy is the honest policy of testsvc's windowed service as a
// file: a run against a --target declares its service's policy.
func windowedPolicy(t *testing.T) string {
	t.Helper()
	pol, err := testsvc.PolicyYAML("windowed")
	require.NoError(t, err)
	return writeFile(t, "windowed.yaml", string(pol))
}
