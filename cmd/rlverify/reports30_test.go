package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// deadPort is a loopback address nothing listens on.
func deadPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// hangUp accepts connections and closes them at once: the port is open but
// no request gets a response.
func hangUp(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return l.Addr().String()
}

// An audit of a target that does not answer stops at the first plan with
// exit 3 and says why, instead of running every plan into a table of
// unknowns that says "no plan of this audit applies".
func TestAuditStopsAtOnceOnAnUnreachableTarget(t *testing.T) {
	for _, tc := range []struct {
		name, addr, want string
	}{
		{"port closed", deadPort(t), "is unreachable"},
		{"no response", hangUp(t), "no request got a response"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out, stderr, code := rl(t, "audit", "--target", "http://"+tc.addr, "--policy", "default", "--out", dir, "--max-requests", "200")
			require.Equal(t, ExitRun, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
			require.Contains(t, stderr, tc.want)
			require.Contains(t, stderr, "no further plan was run")
			require.NotContains(t, stderr+out, "no plan of this audit applies")
			require.Equal(t, 1, strings.Count(stderr, " …\n"), "one plan started, then the audit stopped:\n%s", stderr)
			ents, _ := os.ReadDir(filepath.Join(dir, "latest"))
			require.LessOrEqual(t, len(ents), 1, "at most the first plan's folder")
		})
		// Without a declared policy the audit discovers first: the
		// discovery is what meets the dead target, and no plan starts.
		t.Run(tc.name+", no policy", func(t *testing.T) {
			out, stderr, code := rl(t, "audit", "--target", "http://"+tc.addr, "--out", t.TempDir(), "--max-requests", "200")
			require.Equal(t, ExitRun, code, "stdout:\n%s\nstderr:\n%s", out, stderr)
			require.Contains(t, stderr, "discovering the policy")
			require.Contains(t, stderr, "no probe got a response")
			require.Zero(t, strings.Count(stderr, " …\n"), "no plan started:\n%s", stderr)
		})
	}
}

// A run that writes its reports into a folder prints the text report on
// stdout when html is the first format (the page is in its file); without
// a folder (report without --out) the page goes to stdout, its only place.
func TestHTMLGoesToItsFileNotToStdout(t *testing.T) {
	dir := t.TempDir()
	out, stderr, code := rl(t, "attack", "--plan", "concurrent-burst", "--quiet", "--out", dir, "--format", "html,md")
	require.Equal(t, 0, code, stderr)
	require.NotContains(t, out, "<html")
	require.Contains(t, out, "verdict: PASS")
	page, err := os.ReadFile(filepath.Join(dir, "latest", "report.html"))
	require.NoError(t, err)
	require.Contains(t, string(page), "<!DOCTYPE html>")
	require.FileExists(t, filepath.Join(dir, "latest", "report.md"))
	require.FileExists(t, filepath.Join(dir, "latest", "result.json"))

	out, stderr, code = rl(t, "report", "--in", filepath.Join(dir, "latest", "result.json"), "--format", "html")
	require.Equal(t, 0, code, stderr)
	require.True(t, strings.HasPrefix(out, "<!DOCTYPE html>"), out[:min(len(out), 80)])
}

// The first line of a run says what decided it: the failed threshold by
// name, or the finding the plan exists to show when PASS is right.
func TestHeadlinesSayWhy(t *testing.T) {
	out, stderr, code := rl(t, "attack", "--plan", "boundary-burst", "--limiter", "fixed-window", "--quiet", "--out", t.TempDir())
	require.Equal(t, 0, code, stderr)
	first, _, _ := strings.Cut(out, "\n")
	require.Regexp(t, `^PASS: .*; edge effect: \d+ admitted within one window's length across a window edge, [0-9.]+× the window's count \(declared behaviour of a fixed window\)$`, first)

	dir := t.TempDir()
	out, stderr, code = rl(t, "attack", "--plan", "concurrent-burst", "--quiet", "--out", dir, "--threshold", "latency.p99<1ns", "--format", "text,md,html,junit")
	require.Equal(t, ExitFail, code, stderr)
	first, _, _ = strings.Cut(out, "\n")
	require.Regexp(t, `^FAIL: threshold latency\.p99<1ns failed: `, first)
	for file, want := range map[string]string{"report.md": "threshold latency.p99&lt;1ns failed: ", "report.html": `<p class="headline">threshold latency.p99&lt;1ns failed: `,
		"report.junit.xml": `<property name="headline" value="threshold latency.p99&lt;1ns failed: `} {
		b, err := os.ReadFile(filepath.Join(dir, "latest", file))
		require.NoError(t, err)
		require.Contains(t, string(b), want, file)
	}
}

// The progress bars in a real terminal: a run started on a tmux pane's top
// row (after clear) redraws its bars in place. mpb's writer erased below
// from the home position, which tmux takes for a screen clear, so each
// redraw pushed a copy of the screen into the scrollback (299 copies after
// 60 s). The scrollback must stay empty, and the pane must show each phase
// once.
func TestProgressBarsDoNotFillTmuxScrollback(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("tmux is missing and CI=true: bash scripts/install.sh --test installs it")
		}
		t.Skip("tmux not found: bash scripts/install.sh --test installs it")
	}
	if testing.Short() {
		t.Skip("-short: skipping the real terminal")
	}
	bin := rlverifyBinary(t)
	dir := t.TempDir()
	session := fmt.Sprintf("rlverify-test-%d", os.Getpid())
	tmux := func(args ...string) string {
		out, err := exec.Command("tmux", append([]string{"-L", session}, args...)...).CombinedOutput()
		require.NoError(t, err, "tmux %v: %s", args, out)
		return string(out)
	}
	tmux("new-session", "-d", "-s", session, "-x", "100", "-y", "24", "sh")
	t.Cleanup(func() { exec.Command("tmux", "-L", session, "kill-server").Run() })
	// overload: two phases of about 4 s, so 40 redraws at 5 a second.
	script := fmt.Sprintf("clear; %s attack --plan overload --out %s >/dev/null; echo RLV-DONE-$?", bin, dir)
	tmux("send-keys", "-t", session, script, "Enter")
	doneLine := regexp.MustCompile(`(?m)^RLV-DONE-\d+`)
	deadline := time.Now().Add(60 * time.Second)
	var screen string
	for time.Now().Before(deadline) {
		screen = tmux("capture-pane", "-p", "-t", session)
		if doneLine.MatchString(screen) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	require.Equal(t, "RLV-DONE-0", doneLine.FindString(screen), "the run ended:\n%s", screen)
	history := strings.TrimSpace(tmux("display", "-p", "-t", session, "#{history_size}"))
	require.Equal(t, "0", history, "the redraws pushed lines into the scrollback:\n%s", tmux("capture-pane", "-p", "-t", session, "-S", "-"))
	require.Equal(t, 1, strings.Count(screen, "1/2 overload"), screen)
	require.Equal(t, 1, strings.Count(screen, "2/2 retrying-clients"), screen)
}

// One set of flags across commands: version as a command, --quiet on
// check and compare, --checks-off values completed.
func TestFlagsAreConsistentAcrossCommands(t *testing.T) {
	byCommand, _, code := rl(t, "version")
	require.Equal(t, 0, code)
	byFlag, _, _ := rl(t, "--version")
	require.Equal(t, byFlag, byCommand)
	require.Regexp(t, `^rlverify \S+ \(.*\) go\S+\n$`, byCommand)

	dir := t.TempDir()
	_, stderr, code := rl(t, "attack", "--plan", "concurrent-burst", "--quiet", "--out", dir)
	require.Equal(t, 0, code, stderr)
	out, stderr, code := rl(t, "check", "--quiet", "--history", filepath.Join(dir, "latest", "history.jsonl"))
	require.Equal(t, 0, code, stderr)
	// Nothing but the line saying every check streamed.
	require.Regexp(t, `^(rlverify: judged on the streaming path: every check judged streams: [a-z, -]+\n)?$`, stderr)
	require.Contains(t, out, "verdict: PASS")

	args := []string{"compare", "--plan", "concurrent-burst", "--limiter", "token-bucket", "--limiter", "gcra", "--out", t.TempDir()}
	_, loud, code := rl(t, args...)
	require.Equal(t, 0, code, loud)
	require.Contains(t, loud, "token-bucket")
	_, quiet, code := rl(t, append(args, "--quiet")...)
	require.Equal(t, 0, code, quiet)
	require.Empty(t, quiet)

	require.Contains(t, complete(t, "audit", "--checks-off", "over"), "oversell")
	require.Contains(t, complete(t, "attack", "--checks-off", "oversell,head"), "oversell,headers")
}

// A mistyped name gets the name meant: plans, audit plans, limiters,
// phase kinds and YAML fields (by their YAML names, every problem listed).
func TestDidYouMean(t *testing.T) {
	plan := writeFile(t, "plan.yaml", "name: p\nphases:\n  - name: a\n    kind: brust\n    key: free-a\n    requests: 5\n")
	pol := writeFile(t, "policy.yaml", "name: typo\ntiers:\n  - name: free\n    key_prefix: free-\n    limits:\n      - algorithm: token-bucket\n        capacty: 10\n        rat: 5/s\n")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"attack", "--plan", "boundry-burst"}, []string{`no built-in plan "boundry-burst" (did you mean "boundary-burst"?)`}},
		{[]string{"attack", "--plan", "concurrent-burst", "--limiter", "fixed-windw"}, []string{`unknown limiter "fixed-windw" (did you mean "fixed-window"?)`}},
		{[]string{"audit", "--plans", "precison"}, []string{`--plans "precison": not a plan of the audit (did you mean "precision"?)`}},
		{[]string{"plans", "validate", plan}, []string{`unknown phase kind "brust" (did you mean "burst"?)`}},
		{[]string{"attack", "--plan", "concurrent-burst", "--policy", pol}, []string{
			`policy.yaml:7: unknown field "capacty" (did you mean "capacity"?)`,
			`policy.yaml:8: unknown field "rat" (did you mean "rate"?)`}},
	} {
		t.Run(tc.args[len(tc.args)-1], func(t *testing.T) {
			_, stderr, code := rl(t, append(tc.args, "--quiet")...)
			if tc.args[0] == "plans" {
				_, stderr, code = rl(t, tc.args...)
			}
			require.Equal(t, ExitUsage, code, stderr)
			for _, w := range tc.want {
				require.Contains(t, stderr, w)
			}
			require.NotContains(t, stderr, "policy.Limit")
		})
	}
}

// A target that refuses the method: the report shows a bounded sample of
// what it answered, and stderr says to change --method.
func TestA405ShowsTheTargetsAnswerAndSuggestsMethod(t *testing.T) {
	svc := testService(t, "orders")
	i := slices.Index(svc, "--method")
	require.GreaterOrEqual(t, i, 0)
	svc = slices.Delete(svc, i, i+2) // GET instead of POST
	dir := t.TempDir()
	out, stderr, code := rl(t, append([]string{"attack", "--plan", "concurrent-burst", "--out", dir, "--quiet"}, svc...)...)
	require.Equal(t, ExitFail, code, "no evidence: %s", stderr)
	require.Regexp(t, `errors by status: 405 ×100 \(http://127\.0\.0\.1:\d+/v1/orders: "\{\\"error\\":\\"Method Not Allowed\\",\\"message\\":\\"GET /v1/orders is not allowed; use POST\\"\}"\)`, out)
	require.Contains(t, stderr, "100 request(s) got 405 Method Not Allowed")
	require.Contains(t, stderr, "--method")
	require.Contains(t, stderr, "use POST")
	b, err := os.ReadFile(filepath.Join(dir, "latest", "history.jsonl"))
	require.NoError(t, err)
	require.Equal(t, 20, strings.Count(string(b), `"body":`), "a sample in the first 20 answers only")
}
