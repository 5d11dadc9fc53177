package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Issue 26, item 1: a policy whose name would inject a directive into the
// generated nginx config is refused at load time, naming file:line and
// the field; nothing is started, no file is created.
func TestHardeningPolicyNamesAreData(t *testing.T) {
	dir := t.TempDir()
	injected := filepath.Join(dir, "x.log")
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"policy name", "name: \"default\\nerror_log " + injected + ";\\n#\"\ntiers:\n  - name: free\n    key_prefix: free-\n    limits: [{capacity: 10, rate: 5/s}]\n",
			[]string{"hostile.yaml:1: name: policy name", "is not a safe name"}},
		{"tier name", "name: p\ntiers:\n  - name: \"free\\\" $rl_key; }\"\n    key_prefix: free-\n    limits: [{capacity: 10, rate: 5/s}]\n",
			[]string{"hostile.yaml:3: tiers.0.name: tier name", "is not a safe name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, "hostile.yaml")
			require.NoError(t, os.WriteFile(file, []byte(tc.yaml), 0o644))
			for _, lim := range []string{"nginx/nodelay", "token-bucket"} {
				_, stderr, code := rl(t, "attack", "--plan", "concurrent-burst", "--limiter", lim, "--policy", file, "--out", t.TempDir(), "--quiet")
				require.Equal(t, ExitUsage, code, stderr)
				requireInOrder(t, stderr, tc.want)
			}
			_, err := os.Stat(injected)
			require.ErrorIs(t, err, os.ErrNotExist)
		})
	}
}

// Issue 26, item 2: a plan's body "@FILE" stays inside the plan's folder
// unless --body-files-anywhere; the command line's own --body @FILE reads
// what the user named.
func TestHardeningPlanBodyFiles(t *testing.T) {
	dir := t.TempDir()
	plan := func(body string) string {
		file := filepath.Join(dir, "plan.yaml")
		require.NoError(t, os.WriteFile(file, []byte("name: b\nrequest:\n  method: POST\n  body: \""+body+"\"\nphases:\n  - kind: burst\n    key: free-a\n    requests: 2\n"), 0o644))
		return file
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "order.json"), []byte(`{"sku": "A-{i}"}`), 0o644))
	for _, body := range []string{"@/etc/hostname", "@../../../../etc/hostname", "@/proc/self/environ"} {
		t.Run(body, func(t *testing.T) {
			requireQuick(t, 5*time.Second, func() {
				_, stderr, code := rl(t, "attack", "--plan", plan(body), "--out", t.TempDir(), "--quiet")
				require.Equal(t, ExitUsage, code, stderr)
				requireInOrder(t, stderr, []string{"plan.yaml:4: request.body: body file", "a plan reads body files only inside its own folder", "--body-files-anywhere"})
			})
		})
	}
	t.Run("inside the folder", func(t *testing.T) {
		_, stderr, code := rl(t, "attack", "--plan", plan("@order.json"), "--out", t.TempDir(), "--quiet")
		require.Equal(t, 0, code, stderr)
	})
	t.Run("--body-files-anywhere", func(t *testing.T) {
		_, stderr, code := rl(t, "attack", "--plan", plan("@/etc/hostname"), "--body-files-anywhere", "--out", t.TempDir(), "--quiet")
		require.Equal(t, 0, code, stderr)
	})
	t.Run("--body @FILE over a plan is relative to the working directory", func(t *testing.T) {
		t.Chdir(t.TempDir())
		require.NoError(t, os.WriteFile("mine.json", []byte("{}"), 0o644))
		_, stderr, code := rl(t, "attack", "--plan", plan("@order.json"), "--body", "@mine.json", "--out", t.TempDir(), "--quiet")
		require.Equal(t, 0, code, stderr)
		require.False(t, strings.Contains(stderr, "body file"), stderr)
	})
}
