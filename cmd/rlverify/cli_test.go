package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/attacks"
)

func TestVersionFlag(t *testing.T) {
	out, _, code := rl(t, "--version")
	require.Equal(t, 0, code)
	require.Regexp(t, `^rlverify \S+ \(.*\) go\S+\n$`, out)
}

// TestVersionNamesTheCommit builds rlverify with VCS stamping from this
// work tree and expects --version to print the checked-out commit.
func TestVersionNamesTheCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git work tree: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(gitTop(t), ".git")); err != nil || !fi.IsDir() {
		t.Skip("a linked git worktree: go build stamps only a checkout whose .git is a directory")
	}
	bin := filepath.Join(t.TempDir(), "rlverify")
	build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	got, err := exec.Command(bin, "--version").Output()
	require.NoError(t, err)
	require.Contains(t, string(got), "commit "+strings.TrimSpace(string(head)))
}

func gitTop(t *testing.T) string {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

func TestMistypedFlagGetsASuggestion(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"attack", "--plan", "concurrent-burst", "--polcy", "x.yaml"}, "--policy"},
		{[]string{"check", "--histroy", "h.jsonl"}, "--history"},
		{[]string{"attack", "--max-req", "5"}, "--max-requests"},
		{[]string{"attack", "--no-colour"}, "--no-color"},
	} {
		t.Run(tc.args[1], func(t *testing.T) {
			_, stderr, code := rl(t, tc.args...)
			require.Equal(t, ExitUsage, code)
			require.Contains(t, stderr, "unknown flag")
			require.Contains(t, stderr, "Did you mean this?\n\t"+tc.want)
		})
	}
	_, stderr, code := rl(t, "attack", "--zzzzzz")
	require.Equal(t, ExitUsage, code)
	require.NotContains(t, stderr, "Did you mean")
	require.Contains(t, stderr, "rlverify attack --help")
	_, stderr, code = rl(t, "atack")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, stderr, "Did you mean this?\n\tattack", "mistyped commands get cobra's suggestion")
}

// complete asks the CLI what a shell would complete after args.
func complete(t *testing.T, args ...string) []string {
	t.Helper()
	out, stderr, code := rl(t, append([]string{cobra.ShellCompRequestCmd}, args...)...)
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.NotEmpty(t, lines)
	require.True(t, strings.HasPrefix(lines[len(lines)-1], ":"), "the last line is the directive: %q", out)
	return lines[:len(lines)-1]
}

func TestValueCompletion(t *testing.T) {
	var plans []string
	for _, p := range attacks.Builtins() {
		plans = append(plans, p.Name)
	}
	require.Equal(t, plans, complete(t, "attack", "--plan", ""))
	require.Equal(t, []string{"multi-instance", "multi-instance-20"}, complete(t, "attack", "--plan", "multi"))
	require.Contains(t, complete(t, "compare", "--limiter", "faulty/"), "faulty/racy-token-bucket")
	require.Equal(t, []string{"text,json", "text,junit"}, complete(t, "attack", "--format", "text,j"))
	require.Contains(t, complete(t, "check", "--checks", "over"), "oversell")
	require.Contains(t, complete(t, "attack", "--fail-on", "thr"), "threshold")
	require.Equal(t, []string{"seed-tiers"}, complete(t, "attack", "--policy", "seed-t"))
	require.Equal(t, []string{"vegeta"}, complete(t, "import", "--from", "v"))
	require.Equal(t, []string{"docker"}, complete(t, "audit", "--env", "d"))
	for _, shell := range []string{"bash", "zsh", "fish"} {
		out, _, code := rl(t, "completion", shell)
		require.Equal(t, 0, code)
		require.Contains(t, out, cobra.ShellCompRequestCmd, "the %s script asks rlverify for values", shell)
	}
}

// TestFlagHelpHasNoBackquotes: pflag reads `text` in a usage string as the
// value's name, which printed "--sink rlverify sink" in the help.
func TestFlagHelpHasNoBackquotes(t *testing.T) {
	root := rootForTest(t)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			require.NotContains(t, f.Usage, "`", "rlverify %s --%s", c.Name(), f.Name)
		})
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	out, _, code := rl(t, "attack", "--help")
	require.Equal(t, 0, code)
	require.Regexp(t, `--sink string\s+external env: URL of the rlverify sink`, out)
}

func TestRedisTakesOneAddressSyntaxEverywhere(t *testing.T) {
	var url, addr string
	fl := pflag.NewFlagSet("t", pflag.ContinueOnError)
	newRedisFlag(fl, &url, false, "")
	require.NoError(t, fl.Parse([]string{"--redis", "127.0.0.1:6379"}))
	require.Equal(t, "redis://127.0.0.1:6379", url, "attack keeps a URL")
	fl = pflag.NewFlagSet("t", pflag.ContinueOnError)
	newRedisFlag(fl, &addr, true, "")
	require.NoError(t, fl.Parse([]string{"--redis", "redis://127.0.0.1:6379"}))
	require.Equal(t, "127.0.0.1:6379", addr, "serve takes the address")
	require.Error(t, fl.Parse([]string{"--redis", "redis://127.0.0.1:6379/3"}), "serve has no database")

	_, stderr, code := rl(t, "serve", "--store", "redis", "--redis", "nohost")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, stderr, "want redis://HOST:PORT")
	_, stderr, code = rl(t, "attack", "--plan", "concurrent-burst", "--redis", "nohost")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, stderr, "want redis://HOST:PORT")
}

func TestNoColor(t *testing.T) {
	tty, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer tty.Close()
	t.Setenv("TERM", "xterm")
	t.Setenv("NO_COLOR", "")
	noColor.Store(false)
	require.True(t, colorOn(tty), "a terminal gets colours")
	t.Setenv("NO_COLOR", "1")
	require.False(t, colorOn(tty), "NO_COLOR turns them off")
	t.Setenv("NO_COLOR", "")
	_, _, code := rl(t, "--no-color", "plans")
	require.Equal(t, 0, code)
	require.False(t, colorOn(tty), "--no-color turns them off")
	_, _, code = rl(t, "plans")
	require.Equal(t, 0, code)
	require.True(t, colorOn(tty), "for its own invocation only")
}

// rootForTest is the command tree Run executes.
func rootForTest(t *testing.T) *cobra.Command {
	t.Helper()
	var root *cobra.Command
	testRoot = func(c *cobra.Command) { root = c }
	defer func() { testRoot = nil }()
	_, _, code := rl(t, "--help")
	require.Equal(t, 0, code)
	return root
}
