package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/internal/testsvc"
	"github.com/rlverify/rlverify/policy"
)

// sectionCommands are the rlverify commands of the README section titled
// heading, each split into arguments as sh would (single quotes, line
// continuations).
func sectionCommands(t *testing.T, heading string) [][]string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	doc := string(b)
	i := strings.Index(doc, "### "+heading+"\n")
	require.GreaterOrEqual(t, i, 0, "README has a %q section", heading)
	sec := doc[i+4:]
	if j := strings.Index(sec, "\n### "); j >= 0 {
		sec = sec[:j]
	}
	var out [][]string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(sec, -1) {
		block := regexp.MustCompile(`\\\n\s*`).ReplaceAllString(m[1], " ")
		for _, line := range strings.Split(block, "\n") {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "rlverify ") {
				out = append(out, shellWords(t, strings.TrimPrefix(line, "rlverify ")))
			}
		}
	}
	return out
}

// shellWords splits s into words: blanks separate, single quotes keep.
func shellWords(t *testing.T, s string) []string {
	var words []string
	var w strings.Builder
	in, quoted := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			quoted, in = !quoted, true
		case (r == ' ' || r == '\t') && !quoted:
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteRune(r)
			in = true
		}
	}
	require.False(t, quoted, "unbalanced quote in %q", s)
	if in {
		words = append(words, w.String())
	}
	return words
}

// TestReadmeVerifyYourOwnLimiter runs the README's "Verify your own
// limiter" commands, in order, against the test service it starts: discover
// writes the policy, and attack and audit run with it as the declared one.
// The URL becomes the test's, my-policy.yaml a temporary file; runs write
// under a temporary --out, and the audit runs two of its plans.
func TestReadmeVerifyYourOwnLimiter(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	o, err := testsvc.NewOrders(testsvc.OrdersConfig{Keys: testsvc.DefaultOrdersKeys()})
	require.NoError(t, err)
	url, stop := testsvc.Serve(o)
	defer stop()
	tmp := t.TempDir()
	file := filepath.Join(tmp, "my-policy.yaml")
	cmds := sectionCommands(t, "Verify your own limiter")
	require.GreaterOrEqual(t, len(cmds), 3)
	require.Equal(t, "discover", cmds[0][0], "the section starts with rlverify discover")
	t.Chdir("../..") // the README's paths are the repository's
	for _, args := range cmds {
		for i, a := range args {
			a = strings.ReplaceAll(a, "http://127.0.0.1:8080", url)
			args[i] = strings.ReplaceAll(a, "my-policy.yaml", file)
		}
		switch args[0] {
		case "discover":
			args = append(args, "--budget", "30s", "--quiet")
		case "attack":
			args = append(args, "--out", filepath.Join(tmp, "attack"), "--quiet")
		case "audit":
			args = append(args, "--out", filepath.Join(tmp, "audit"), "--quiet", "--plans", "concurrent-burst,retry-after")
		}
		stdout, stderr, code := rl(t, args...)
		require.Equal(t, 0, code, "rlverify %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), stdout, stderr)
		if args[0] == "discover" {
			p, err := policy.Load(file)
			require.NoError(t, err)
			require.Equal(t, policy.InBearer, p.Identity.In)
		}
	}
}
