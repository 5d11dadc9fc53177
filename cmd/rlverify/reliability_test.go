package main

// Reliability: bad input of every kind, nonsense from a target, targets that
// hang or go away, and interruptions by signal. docs/reliability.md lists
// every case with the test that proves it.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/history"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(file, []byte(content), 0o644))
	return file
}

// billionLaughs nests 8 levels of 9 aliases (9^8 ≈ 43 million strings if
// expanded) under field.
func billionLaughs(field string) string {
	var b strings.Builder
	b.WriteString("name: laughs\nchecks:\n  - &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	prev := "a"
	for _, c := range "bcdefgh" {
		fmt.Fprintf(&b, "  - &%c [%s]\n", c, strings.TrimSuffix(strings.Repeat("*"+prev+", ", 9), ", "))
		prev = string(c)
	}
	fmt.Fprintf(&b, "%s: *h\n", field)
	return b.String()
}

func garbage() string {
	var b strings.Builder
	x := uint32(2463534242)
	for i := 0; i < 4096; i++ {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b.WriteByte(byte(x))
	}
	return b.String()
}

// requireQuick fails when f takes longer than d (an input must not make the
// CLI spin or balloon).
func requireQuick(t *testing.T, d time.Duration, f func()) {
	t.Helper()
	start := time.Now()
	f()
	require.Less(t, time.Since(start), d)
}

func TestReliabilityBadPlans(t *testing.T) {
	burst := "name: bad\nphases:\n  - kind: burst\n    key: free-a\n"
	rate := "name: bad\nphases:\n  - kind: rate\n    key: free-a\n    duration: 1s\n"
	for _, tc := range []struct {
		name, yaml string
		want       []string // substrings of the message, in order
	}{
		{"wrong type", burst + "    requests: many\n", []string{"bad.yaml:5:", "cannot unmarshal a string `many` into int"}},
		{"unknown field", burst + "    requests: 5\n    burts: 3\n", []string{"bad.yaml:6:", `unknown field "burts"`}},
		{"negative rate", rate + "    rate: -5/s\n", []string{"bad.yaml:6:", "phases.0.rate"}},
		{"absurd rate", rate + "    rate: 1e12/s\n", []string{"bad.yaml:6:", "phases.0.rate", "200000/s"}},
		{"overflowing rate", rate + "    rate: 1e308/1ns\n", []string{"bad.yaml:6:", "out of range"}},
		{"NaN duration", "name: bad\nphases:\n  - kind: idle\n    duration: NaNd\n", []string{"bad.yaml:4:", "NaNd"}},
		{"list for a duration", "name: bad\nphases:\n  - kind: idle\n    duration: [1s]\n", []string{"bad.yaml:4:", "not a list"}},
		{"a billion requests", burst + "    requests: 1000000000\n", []string{"bad.yaml:5:", "phases.0.requests", "1000000000"}},
		{"billion laughs", billionLaughs("phases"), []string{"bad.yaml:3:", "cannot unmarshal"}},
		{"2 MB file", "name: big\n# " + strings.Repeat("x", 2<<20) + "\nphases: []\n", []string{"bad.yaml:", "more than the 1048576 allowed"}},
		{"binary garbage", garbage(), []string{"bad.yaml:"}},
		{"empty file", "", []string{"bad.yaml:", "document is empty"}},
		{"two documents", burst + "    requests: 1\n---\nname: other\n", []string{"bad.yaml:", "more than one YAML document"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := writeFile(t, "bad.yaml", tc.yaml)
			requireQuick(t, 5*time.Second, func() {
				_, stderr, code := rl(t, "attack", "--plan", file, "--out", t.TempDir(), "--quiet")
				require.Equal(t, ExitUsage, code, stderr)
				requireInOrder(t, stderr, tc.want)
			})
		})
	}
	t.Run("missing file", func(t *testing.T) {
		_, stderr, code := rl(t, "attack", "--plan", filepath.Join(t.TempDir(), "nope.yaml"), "--quiet")
		require.Equal(t, ExitUsage, code)
		require.Contains(t, stderr, "nope.yaml")
		require.Contains(t, stderr, "no such file")
	})
	t.Run("unknown built-in", func(t *testing.T) {
		_, stderr, code := rl(t, "attack", "--plan", "no-such-plan", "--quiet")
		require.Equal(t, ExitUsage, code)
		require.Contains(t, stderr, `no built-in plan "no-such-plan"`)
	})
}

func requireInOrder(t *testing.T, s string, parts []string) {
	t.Helper()
	rest := s
	for _, p := range parts {
		i := strings.Index(rest, p)
		require.GreaterOrEqual(t, i, 0, "want %q in %q", p, s)
		rest = rest[i+len(p):]
	}
	require.NotContains(t, s, "panic")
	require.NotContains(t, s, "goroutine ")
}

func TestReliabilityBadPolicies(t *testing.T) {
	tier := "name: p\ntiers:\n  - name: free\n    key_prefix: free-\n    limits:\n"
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"wrong type", tier + "      - capacity: lots\n        rate: 1/s\n", []string{"bad.yaml:6:", "cannot unmarshal a string `lots` into int64"}},
		{"unknown field", tier + "      - capacity: 1\n        rate: 1/s\n        burst: 5\n", []string{"bad.yaml:8:", `unknown field "burst"`}},
		{"negative rate", tier + "      - capacity: 10\n        rate: -5/s\n", []string{"bad.yaml:7:", "tiers.0.limits.0.rate"}},
		{"absurd rate", tier + "      - capacity: 10\n        rate: 1e12/s\n", []string{"bad.yaml:7:", "tiers.0.limits.0.rate"}},
		{"overflowing rate", tier + "      - capacity: 10\n        rate: 1e308/1ns\n", []string{"bad.yaml:7:", "out of range"}},
		{"absurd capacity", tier + "      - capacity: 100000000000\n        rate: 1/s\n", []string{"bad.yaml:6:", "tiers.0.limits.0.capacity"}},
		{"NaN window", tier + "      - limit: 10\n        window: NaNd\n", []string{"bad.yaml:7:", "NaNd"}},
		{"list for a duration", "name: p\nclock_quantum: [1ms]\n", []string{"bad.yaml:2:", "not a list"}},
		{"billion laughs", strings.Replace(billionLaughs("tiers"), "checks:", "identity:\n  trusted_proxies:", 1), []string{"bad.yaml:4:", "cannot unmarshal a list into string"}},
		{"2 MB file", "name: big\n# " + strings.Repeat("x", 2<<20) + "\n", []string{"bad.yaml:", "more than the 1048576 allowed"}},
		{"binary garbage", garbage(), []string{"bad.yaml:"}},
		{"empty file", "\n\n", []string{"bad.yaml:", "document is empty"}},
		{"no tiers", "name: p\n", []string{"bad.yaml:1:", "tiers: at least one tier"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := writeFile(t, "bad.yaml", tc.yaml)
			requireQuick(t, 5*time.Second, func() {
				_, stderr, code := rl(t, "attack", "--plan", "concurrent-burst", "--policy", file, "--out", t.TempDir(), "--quiet")
				require.Equal(t, ExitUsage, code, stderr)
				requireInOrder(t, stderr, tc.want)
			})
		})
	}
}

var (
	goodHistoryOnce sync.Once
	goodHistory     []byte
	goodHistoryErr  error
)

// sampleHistory returns the history of a real (in-process) concurrent-burst
// run, made once.
func sampleHistory(t *testing.T) []byte {
	t.Helper()
	goodHistoryOnce.Do(func() {
		dir, err := os.MkdirTemp("", "rlverify-sample-")
		if err != nil {
			goodHistoryErr = err
			return
		}
		defer os.RemoveAll(dir)
		_, stderr, code := rl(t, "attack", "--plan", "concurrent-burst", "--out", dir, "--quiet")
		if code != 0 {
			goodHistoryErr = fmt.Errorf("sample run: exit %d: %s", code, stderr)
			return
		}
		goodHistory, goodHistoryErr = os.ReadFile(filepath.Join(dir, "latest", "history.jsonl"))
	})
	require.NoError(t, goodHistoryErr)
	return goodHistory
}

func TestReliabilityBadHistories(t *testing.T) {
	good := sampleHistory(t)
	lines := strings.SplitAfter(string(good), "\n")
	require.Greater(t, len(lines), 10)

	t.Run("truncated last line still checks, noting it", func(t *testing.T) {
		file := writeFile(t, "h.jsonl", string(good[:len(good)-15]))
		out, stderr, code := rl(t, "check", "--history", file)
		require.Equal(t, ExitInterrupted, code, "a killed run's verdicts cover only part of it: %s", stderr)
		require.Contains(t, out, "last line was cut off")
		require.Contains(t, out, "no end record")
	})
	mid := strings.Join(lines[:5], "") + `{"t":"e","id":` + "\n" + strings.Join(lines[5:], "")
	for _, tc := range []struct {
		name, content string
		dir           bool
		want          []string
	}{
		{"invalid JSON in the middle", mid, false, []string{"h.jsonl:6:", "not a valid rlverify history"}},
		{"unknown field", strings.Replace(string(good), `"status":`, `"stat":1,"status":`, 1), false, []string{"h.jsonl:", "unknown field"}},
		{"recv before sent", strings.Join(lines[:3], "") + `{"t":"e","id":9,"key":"k","inst":0,"phase":"p","intended":0,"sent":5,"recv":2,"status":200}` + "\n" + strings.Join(lines[3:], ""), false, []string{"h.jsonl:4:", "recv 2 is before sent 5"}},
		{"wrong version", strings.Replace(string(good), `"version":1`, `"version":2`, 1), false, []string{"h.jsonl:1:", "format version 2"}},
		{"no run header", strings.Join(lines[1:], ""), false, []string{"h.jsonl:1:", "run header"}},
		{"blank line then no header", "\n" + strings.Join(lines[1:], ""), false, []string{"h.jsonl:2:", "run header"}},
		{"two run headers (concatenated shards)", string(good) + string(good), false, []string{"h.jsonl:", "second run header"}},
		{"empty file", "", false, []string{"h.jsonl:", "the file is empty"}},
		{"only blank lines", "\n\n  \n", false, []string{"h.jsonl:", "the file is empty"}},
		{"binary garbage", garbage(), false, []string{"h.jsonl:", "not a valid rlverify history"}},
		{"a directory", "", true, []string{"is a directory"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "h.jsonl")
			if tc.dir {
				require.NoError(t, os.Mkdir(file, 0o755))
			} else {
				require.NoError(t, os.WriteFile(file, []byte(tc.content), 0o644))
			}
			_, stderr, code := rl(t, "check", "--history", file)
			require.Equal(t, ExitUsage, code, stderr)
			requireInOrder(t, stderr, tc.want)
		})
	}
	t.Run("missing file", func(t *testing.T) {
		_, stderr, code := rl(t, "check", "--history", filepath.Join(t.TempDir(), "nope.jsonl"))
		require.Equal(t, ExitUsage, code)
		requireInOrder(t, stderr, []string{"nope.jsonl", "no such file"})
	})
	t.Run("line longer than 1 MiB", func(t *testing.T) {
		long := strings.Join(lines[:2], "") + `{"t":"e","key":"` + strings.Repeat("k", 2<<20) + "\"}\n"
		file := writeFile(t, "h.jsonl", long)
		_, stderr, code := rl(t, "check", "--history", file)
		require.Equal(t, ExitUsage, code, stderr)
		requireInOrder(t, stderr, []string{"h.jsonl:3:", "too long"})
	})
}

// resultDoc is the part of DIR/result.json these tests read.
type resultDoc struct {
	Verdict string `json:"verdict"`
	Run     struct {
		Notes []string `json:"notes"`
	} `json:"run"`
	Interrupted bool `json:"interrupted"`
	Checks      []struct {
		Name     string            `json:"name"`
		Verdict  string            `json:"verdict"`
		Summary  string            `json:"summary"`
		Evidence []json.RawMessage `json:"evidence"`
	} `json:"checks"`
}

func readResult(t *testing.T, dir string) (resultDoc, map[string]any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "latest", "result.json"))
	require.NoError(t, err)
	var doc resultDoc
	require.NoError(t, json.Unmarshal(b, &doc))
	var raw map[string]any
	require.NoError(t, json.Unmarshal(b, &raw))
	return doc, raw
}

func (d resultDoc) check(name string) (verdict, summary string, evidence int) {
	for _, c := range d.Checks {
		if c.Name == name {
			return c.Verdict, c.Summary, len(c.Evidence)
		}
	}
	return "", "", 0
}

const headerPolicy = `name: strict
tiers:
  - name: free
    key_prefix: free-
    limits:
      - capacity: 3
        rate: 1/s
headers:
  retry_after: true
  ratelimit: true
`

// TestReliabilityNonsenseHeaders attacks a target that answers 429 with
// headers no client can use. Nothing panics; the run exits 1 with the
// retry-after or headers check failing with evidence.
func TestReliabilityNonsenseHeaders(t *testing.T) {
	pol := writeFile(t, "p.yaml", headerPolicy)
	plan := writeFile(t, "plan.yaml", "name: nonsense\nphases:\n  - kind: burst\n    key: free-n\n    requests: 10\n")
	// A date in the past advises nothing (headers.ErrDateInPast): invalid,
	// also when a probe honours it as "retry now".
	probe := writeFile(t, "probe.yaml", "name: nonsense\nphases:\n  - kind: burst\n    key: free-n\n    requests: 10\n  - kind: probe\n    key: free-n\n    at: retry-after\n")
	past := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC).Format(http.TimeFormat)
	for _, tc := range []struct {
		name    string
		hdr     map[string]string
		failing string // the check that must fail
		plan    string
	}{
		{"Retry-After -5", map[string]string{"Retry-After": "-5"}, "retry-after", ""},
		{"Retry-After abc", map[string]string{"Retry-After": "abc"}, "retry-after", ""},
		{"Retry-After 10^20", map[string]string{"Retry-After": "99999999999999999999"}, "retry-after", ""},
		{"Retry-After date in the past", map[string]string{"Retry-After": past}, "retry-after", probe},
		{"RateLimit garbage", map[string]string{"Retry-After": "1", "RateLimit": "garbage;;"}, "headers", ""},
		{"RateLimit-Policy negative quota", map[string]string{"Retry-After": "1", "RateLimit-Policy": `"x";q=-1`}, "headers", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) <= 3 {
					w.Header().Set("RateLimit-Policy", `"free";q=3;w=3`)
					w.Header().Set("RateLimit", fmt.Sprintf(`"free";r=%d;t=1`, 3-n.Load()))
					w.WriteHeader(http.StatusOK)
					return
				}
				w.Header().Set("RateLimit-Policy", `"free";q=3;w=3`)
				w.Header().Set("RateLimit", `"free";r=0;t=1`)
				for k, v := range tc.hdr {
					w.Header().Set(k, v)
				}
				w.WriteHeader(http.StatusTooManyRequests)
			}))
			defer srv.Close()
			dir := t.TempDir()
			p := plan
			if tc.plan != "" {
				p = tc.plan
			}
			out, stderr, code := rl(t, "attack", "--plan", p, "--env", "external", "--target", srv.URL,
				"--policy", pol, "--out", dir, "--quiet", "--checks", "retry-after,headers")
			require.NotContains(t, stderr, "panic")
			doc, _ := readResult(t, dir)
			require.Equal(t, ExitFail, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
			v, summary, ev := doc.check(tc.failing)
			require.Equal(t, "fail", v, "%s: %s", tc.failing, summary)
			require.Positive(t, ev, "a fail comes with evidence")
			h, err := history.ReadFile(filepath.Join(dir, "latest", "history.jsonl"))
			require.NoError(t, err)
			require.GreaterOrEqual(t, len(h.Events), 10)
		})
	}
}

// TestReliabilityHangingTarget: a target that never answers. --timeout cuts
// every request, each is recorded with status 0 and the error, and the run
// ends in bounded time with "could not run" (3), not a crash.
func TestReliabilityHangingTarget(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(30 * time.Second):
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	plan := writeFile(t, "plan.yaml", "name: hang\nphases:\n  - kind: burst\n    key: free-h\n    requests: 5\n")
	dir := t.TempDir()
	start := time.Now()
	_, stderr, code := rl(t, "attack", "--plan", plan, "--env", "external", "--target", srv.URL,
		"--timeout", "500ms", "--out", dir, "--quiet")
	require.Less(t, time.Since(start), 10*time.Second, "the run is bounded by --timeout")
	require.Equal(t, ExitRun, code, stderr)
	require.Contains(t, stderr, "no request got a response")
	h, err := history.ReadFile(filepath.Join(dir, "latest", "history.jsonl"))
	require.NoError(t, err)
	require.NotNil(t, h.End)
	require.Len(t, h.Events, 5)
	for _, e := range h.Events {
		require.Equal(t, 0, e.Status)
		require.Equal(t, history.Unknown, e.Outcome())
		require.NotEmpty(t, e.Err)
		require.Less(t, time.Duration(e.Recv-e.Sent), 5*time.Second)
	}
}

// TestReliabilityTargetGoesAway: the target is closed 0.5s into a rate
// phase. The run finishes, later requests are recorded as errors, the
// history is complete, and no check claims a violation it cannot prove.
func TestReliabilityTargetGoesAway(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	timer := time.AfterFunc(500*time.Millisecond, func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	defer timer.Stop()
	defer srv.Close()
	pol := writeFile(t, "p.yaml", "name: big\ntiers:\n  - name: free\n    key_prefix: free-\n    limits: [{capacity: 100000, rate: 10000/s}]\n")
	plan := writeFile(t, "plan.yaml", "name: away\nphases:\n  - kind: rate\n    key: free-g\n    rate: 50/s\n    duration: 2s\n")
	dir := t.TempDir()
	out, stderr, code := rl(t, "attack", "--plan", plan, "--env", "external", "--target", srv.URL,
		"--policy", pol, "--timeout", "500ms", "--out", dir, "--quiet")
	// Most requests went unanswered: no evidence, so not a pass (exit 1),
	// or the target was gone before anything answered (exit 3).
	require.Contains(t, []int{ExitFail, ExitRun}, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
	require.NotContains(t, stderr, "panic")
	h, err := history.ReadFile(filepath.Join(dir, "latest", "history.jsonl"))
	require.NoError(t, err)
	require.NotNil(t, h.End, "the history is closed properly")
	require.False(t, h.Truncated)
	st := h.Stats()
	require.Positive(t, st.Admitted, "requests before the target went away")
	require.Positive(t, st.Errors, "requests after it went away")
	for _, e := range h.Events {
		if e.Status == 0 {
			require.NotEmpty(t, e.Err)
		}
	}
	doc, _ := readResult(t, dir)
	require.Equal(t, "evidence", doc.Checks[0].Name)
	require.Equal(t, "unknown", doc.Checks[0].Verdict)
	require.Contains(t, doc.Checks[0].Summary, "got no response from "+srv.URL)
	for _, c := range doc.Checks {
		require.NotEqual(t, "fail", c.Verdict, "%s: %s", c.Name, c.Summary)
		if c.Verdict == "skip" || c.Verdict == "unknown" {
			require.NotEmpty(t, c.Summary, "%s gives its reason", c.Name)
		}
	}
}

// --- interruptions: the real binary, real signals ---

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

func rlverifyBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "rlverify-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "rlverify")
		cmd := exec.Command("go", "build", "-tags", testBuildTags(), "-o", binPath, ".")
		cmd.Env = append(os.Environ(), "PATH="+filepath.Join(runtime.GOROOT(), "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, binErr)
	return binPath
}

// testBuildTags are the build tags this test binary was built with
// (docker, gubernator under scripts/test.sh), so the binary the tests run
// has the same optional parts as the code they test in process.
func testBuildTags() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-tags" {
				return s.Value
			}
		}
	}
	return ""
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// interrupt starts `rlverify args…` in its own process group, sends sig
// after delay, and returns the exit code and stderr.
func interrupt(t *testing.T, sig syscall.Signal, delay time.Duration, args ...string) (int, string, int) {
	t.Helper()
	cmd := exec.Command(rlverifyBinary(t), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdout = &bytes.Buffer{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	pgid := cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	time.Sleep(delay)
	require.NoError(t, cmd.Process.Signal(sig))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("wait: %v", err)
		}
		return cmd.ProcessState.ExitCode(), stderr.String(), pgid
	case <-time.After(15 * time.Second):
		t.Fatalf("rlverify did not stop within 15s of %v; stderr:\n%s", sig, stderr.String())
	}
	return 0, "", 0
}

// requireCompleteInterrupted checks DIR after an interrupted run.
func requireCompleteInterrupted(t *testing.T, dir string) {
	t.Helper()
	file := filepath.Join(dir, "latest", "history.jsonl")
	h, err := history.ReadFile(file)
	require.NoError(t, err)
	require.False(t, h.Truncated, "every line is complete")
	require.NotNil(t, h.End, "the end record was written")
	require.True(t, h.End.Interrupted)
	require.Contains(t, h.End.Reason, "interrupted")
	require.NotEmpty(t, h.Events, "requests before the signal are kept")
	require.Equal(t, h.End.Requests, int64(len(h.Events)))
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	require.True(t, bytes.HasSuffix(raw, []byte("\n")), "the file ends with a complete line")
	for i, line := range bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n")) {
		require.True(t, json.Valid(line), "line %d is complete JSON: %s", i+1, line)
	}
	doc, res := readResult(t, dir)
	require.True(t, doc.Interrupted, "result.json says interrupted")
	require.Contains(t, fmt.Sprint(res["reason"]), "interrupted")
}

const longRatePlan = "name: long\nphases:\n  - kind: rate\n    key: free-long\n    rate: 50/s\n    duration: 60s\n"

func TestReliabilityInterruptBySignal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	plan := writeFile(t, "long.yaml", longRatePlan)
	rlverifyBinary(t) // build outside the timed part
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			start := time.Now()
			code, stderr, _ := interrupt(t, sig, 1500*time.Millisecond, "attack", "--plan", plan, "--out", dir, "--quiet")
			require.Less(t, time.Since(start), 20*time.Second)
			require.Equal(t, ExitInterrupted, code, stderr)
			require.Contains(t, stderr, "interrupted")
			requireCompleteInterrupted(t, dir)
		})
	}
}

func TestReliabilityInterruptWithRedisLeavesNoServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not on PATH (CI installs it)")
	}
	plan := writeFile(t, "long.yaml", longRatePlan)
	dir := t.TempDir()
	code, stderr, _ := interrupt(t, syscall.SIGINT, 2*time.Second, "attack", "--plan", plan, "--store", "redis", "--out", dir, "--quiet")
	require.Equal(t, ExitInterrupted, code, stderr)
	requireCompleteInterrupted(t, dir)
	// The header names the store: "redis-server 127.0.0.1:PORT (child
	// process)". The child runs in its own process group, so look for it by
	// its command line, not by our group.
	h, err := history.ReadFile(filepath.Join(dir, "latest", "history.jsonl"))
	require.NoError(t, err)
	store := h.Run.Store
	if !strings.HasPrefix(store, "redis-server ") {
		t.Skipf("the run did not start a redis-server child (store: %q)", store)
	}
	addr := strings.Fields(store)[1]
	deadline := time.Now().Add(3 * time.Second)
	for {
		out, _ := exec.Command("pgrep", "-f", "^redis-server "+addr).Output()
		if len(bytes.TrimSpace(out)) == 0 || zombiesOnly(out) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server %s still running after the interrupted run: pids %s", addr, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// zombiesOnly reports whether every pid in pgrep's output has exited and
// only waits to be reaped.
func zombiesOnly(pids []byte) bool {
	for _, pid := range strings.Fields(string(pids)) {
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			continue // gone
		}
		// pid (comm) STATE …
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) == 0 || f[0] != "Z" {
			return false
		}
	}
	return true
}
