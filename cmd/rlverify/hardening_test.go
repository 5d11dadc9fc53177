package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rlverify/rlverify/history"

	"github.com/stretchr/testify/require"
)

// Issue 17, item 7: the control endpoint beyond loopback needs a token.
func TestServeControlBeyondLoopbackNeedsAToken(t *testing.T) {
	_, stderr, code := rl(t, "serve", "--control", "--addr", "0.0.0.0:0")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, stderr, "give --control-token TOKEN")
}

// Issue 17, item 7: every address rlverify dials for the run stays on
// loopback without --allow-remote (192.0.2.1 is a documentation address:
// nothing is dialled, the flag is refused first).
func TestLoopbackGuardCoversRedisAndSink(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"redis", []string{"--plan", "concurrent-burst", "--store", "redis", "--redis", "192.0.2.1:6379"}, "--redis 192.0.2.1:6379 is not a loopback address"},
		{"redis URL", []string{"--plan", "concurrent-burst", "--store", "redis", "--redis", "redis://192.0.2.1:6379/2"}, "--redis 192.0.2.1:6379 is not a loopback address"},
		{"sink", []string{"--plan", "concurrent-burst", "--policy", "default", "--target", "http://127.0.0.1:1/", "--sink", "http://192.0.2.1:9/sink"}, "--sink http://192.0.2.1:9/sink is not a loopback address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := rl(t, append([]string{"attack", "--out", t.TempDir()}, tc.args...)...)
			require.Equal(t, ExitUsage, code, stderr)
			require.Contains(t, stderr, tc.want)
			require.Contains(t, stderr, "--allow-remote")
		})
	}
}

// Issue 17, item 3: a target's oversized or countless headers are cut off
// and counted as errors, within the caps a user can move.
func TestResponseHeaderCaps(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			w.Header().Set("X-Junk", big)
		case "/many":
			for i := range 300 {
				w.Header().Add(fmt.Sprintf("X-Junk-%d", i), "1")
			}
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	plan := writeFile(t, "tiny.yaml", "name: tiny\nphases:\n  - name: burst\n    kind: burst\n    key: free-tiny\n    requests: 4\n")
	for _, tc := range []struct {
		name, path string
		flags      []string
		wantErr    string // "" when the answers are within the caps
	}{
		{"1 MiB header", "/big", nil, "response headers larger than 65536 bytes (--max-header-bytes)"},
		{"1 MiB header, cap raised", "/big", []string{"--max-header-bytes", "2000000"}, ""},
		{"300 fields", "/many", nil, "header fields, more than 100 (--max-headers)"},
		{"300 fields, cap raised", "/many", []string{"--max-headers", "400"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := append([]string{"attack", "--plan", plan, "--policy", "default", "--target", srv.URL + tc.path, "--out", dir, "--fail-on", "none", "--quiet", "--format", "json"}, tc.flags...)
			_, stderr, code := rl(t, args...)
			if tc.wantErr == "" {
				require.Equal(t, ExitPass, code, stderr)
			} else {
				require.Equal(t, ExitRun, code, "every answer past the caps: no response to judge")
				require.Contains(t, stderr, "no request got a response (4 of 4: ")
				require.Contains(t, stderr, tc.wantErr)
			}
			h, err := history.ReadFile(filepath.Join(dir, "latest", "history.jsonl"))
			require.NoError(t, err)
			require.Len(t, h.Events, 4)
			for _, e := range h.Events {
				if tc.wantErr == "" {
					require.Equal(t, 200, e.Status, e.Err)
					continue
				}
				require.Equal(t, 0, e.Status, "an answer past the caps is not a 200")
				// The history keeps the library's words: the option's field.
				require.Contains(t, e.Err, strings.NewReplacer("--max-header-bytes", "MaxHeaderBytes", "--max-headers", "MaxHeaders").Replace(tc.wantErr))
			}
		})
	}
	_, stderr, code := rl(t, "attack", "--plan", plan, "--policy", "default", "--target", srv.URL, "--max-headers", "0", "--out", t.TempDir())
	require.Equal(t, ExitUsage, code)
	require.Contains(t, stderr, "--max-headers 0: want at least 1")
}

// Issue 17, item 9: a rate phase whose first gap is longer than the phase
// ends on time, sends nothing, and says why.
func TestRatePhaseLongerGapThanPhaseEndsOnTime(t *testing.T) {
	plan := writeFile(t, "slow.yaml", "name: slow\nphases:\n  - name: slow\n    kind: rate\n    key: free-slow\n    rate: 1/min\n    duration: 2s\n")
	dir := t.TempDir()
	start := time.Now()
	_, stderr, code := rl(t, "attack", "--plan", plan, "--out", dir, "--quiet", "--format", "json", "--max-duration", "60s")
	require.Less(t, time.Since(start), 30*time.Second, "the phase lasts 2s, not --max-duration")
	require.NotEqual(t, ExitPass, code, "no requests: no verdict without evidence")
	h, err := history.ReadFile(filepath.Join(dir, "latest", "history.jsonl"))
	require.NoError(t, err, stderr)
	require.Empty(t, h.Events)
	require.NotNil(t, h.End, "the history is complete")
	var notes []string
	for _, p := range h.Phases {
		notes = append(notes, p.Notes...)
	}
	require.NotEmpty(t, notes, "the phase says why it sent nothing")
}

// Issue 17, item 12: a history that cannot be written (a full disk) stops
// the run at once, tears the environment down and draws no verdict.
func TestFullDiskStopsTheRun(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full on this system")
	}
	plan := writeFile(t, "long.yaml", longRatePlan)
	start := time.Now()
	_, stderr, code := rl(t, "attack", "--plan", plan, "--history", "/dev/full", "--out", t.TempDir(), "--quiet")
	require.Less(t, time.Since(start), 20*time.Second, "the 60s plan stops when nothing can be recorded")
	require.Equal(t, ExitRun, code, stderr)
	require.Contains(t, stderr, "the history cannot be written, so the run stopped after")
	require.Contains(t, stderr, "no space left on device")
	require.NotContains(t, stderr, "PASS")
}

// Issue 17, item 12: check --out creates a missing directory, so the exit
// status is the verdict's; a directory that cannot be made fails before
// any verdict is printed.
func TestCheckOutMissingDirectory(t *testing.T) {
	hist := filepath.Join(t.TempDir(), "h.jsonl")
	_, stderr, code := rl(t, "import", "--from", "vegeta", importSamples+"vegeta-bad.json", "--policy", importSamples+"policy-query.yaml", "-o", hist)
	require.Equal(t, 0, code, stderr)
	out := filepath.Join(t.TempDir(), "not", "yet")
	stdout, stderr, code := rl(t, "check", "--history", hist, "--out", out)
	require.Equal(t, ExitFail, code, stderr)
	require.True(t, strings.HasPrefix(stdout, "FAIL"), stdout)
	_, err := os.Stat(filepath.Join(out, "latest", "result.json"))
	require.NoError(t, err)

	file := writeFile(t, "a-file", "")
	stdout, stderr, code = rl(t, "check", "--history", hist, "--out", filepath.Join(file, "x"))
	require.Equal(t, ExitRun, code, stderr)
	require.Empty(t, stdout, "no verdict printed for a run whose reports cannot be written")
	require.Contains(t, stderr, "--out")
}

// hangingTarget answers no request until the request is cancelled.
func hangingTarget(t *testing.T) string {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	return srv.URL
}

// requireCancelled checks that the run in dir kept its requests in flight
// as cancelled, each cut off well before its --timeout.
func requireCancelled(t *testing.T, dir string, timeout time.Duration) {
	t.Helper()
	h, err := history.ReadFile(filepath.Join(dir, "latest", "history.jsonl"))
	require.NoError(t, err)
	require.NotNil(t, h.End)
	require.NotEmpty(t, h.Events)
	cancelled := 0
	for _, e := range h.Events {
		require.Equal(t, 0, e.Status)
		require.Less(t, time.Duration(e.Recv-e.Sent), timeout/2, "event %d waited for its timeout", e.ID)
		if e.Err == history.ErrCancelled {
			cancelled++
		}
	}
	require.Positive(t, cancelled, "requests in flight at the stop are recorded as cancelled")
}

// Issue 17, item 1: a stop cuts off the requests in flight at once instead
// of waiting for their --timeout.
func TestStopCutsOffRequestsInFlight(t *testing.T) {
	plan := writeFile(t, "hang.yaml", "name: hang\nphases:\n  - kind: rate\n    key: free-h\n    rate: 20/s\n    duration: 30s\n")
	t.Run("--max-duration", func(t *testing.T) {
		dir := t.TempDir()
		start := time.Now()
		_, stderr, code := rl(t, "attack", "--plan", plan, "--env", "external", "--policy", "default", "--target", hangingTarget(t),
			"--timeout", "40s", "--max-duration", "2s", "--out", dir, "--quiet")
		require.Less(t, time.Since(start), 15*time.Second, "the run ends at --max-duration, not after --timeout")
		require.Equal(t, ExitRun, code, stderr)
		requireCancelled(t, dir, 40*time.Second)
	})
	t.Run("SIGINT", func(t *testing.T) {
		if testing.Short() {
			t.Skip("builds the binary")
		}
		rlverifyBinary(t)
		dir := t.TempDir()
		code, stderr, _ := interrupt(t, syscall.SIGINT, 1500*time.Millisecond, "attack", "--plan", plan, "--env", "external",
			"--policy", "default", "--target", hangingTarget(t), "--timeout", "10m", "--out", dir, "--quiet")
		require.Equal(t, ExitInterrupted, code, stderr)
		requireCancelled(t, dir, 10*time.Minute)
	})
}

// Issue 17, item 2: --max-requests is a ceiling over the whole plan: a
// later rate phase does not read a spent budget as "unlimited".
func TestMaxRequestsIsACeilingAcrossPhases(t *testing.T) {
	plan := writeFile(t, "two.yaml", "name: two\nphases:\n  - kind: rate\n    key: free-m\n    rate: 100/s\n    duration: 1s\n  - kind: rate\n    key: free-n\n    rate: 100/s\n    duration: 1s\n  - kind: burst\n    key: free-o\n    requests: 20\n")
	dir := t.TempDir()
	stdout, stderr, _ := rl(t, "attack", "--plan", plan, "--max-requests", "50", "--out", dir, "--quiet", "--fail-on", "none")
	h, err := history.ReadFile(filepath.Join(dir, "latest", "history.jsonl"))
	require.NoError(t, err, stderr)
	require.LessOrEqual(t, len(h.Events), 50)
	require.GreaterOrEqual(t, len(h.Events), 40, "the budget is spent, not skipped")
	require.NotNil(t, h.End)
	// The history names the option's field; the command's report, its flag.
	require.Equal(t, history.ReasonBound+"MaxRequests 50", h.End.Reason)
	require.Contains(t, stdout, "--max-requests 50", "the report says the flag")
	require.NotContains(t, stdout, "MaxRequests")
}
