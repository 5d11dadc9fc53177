package attacks

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// bodyPlan writes a plan whose body is body into dir and loads it.
func bodyPlan(t *testing.T, dir, body string, opts ...LoadOption) (*Plan, error) {
	t.Helper()
	file := filepath.Join(dir, "plan.yaml")
	require.NoError(t, os.WriteFile(file, []byte("name: b\nrequest:\n  method: POST\n  body: \""+body+"\"\nphases:\n  - kind: burst\n    key: free-a\n    requests: 1\n"), 0o644))
	return Load(file, opts...)
}

// A plan's body: "@FILE" reads only files inside the plan's folder (the
// issue's @/etc/hostname, @../../../../etc/hostname and
// @/proc/self/environ, which sent an environment secret to the target),
// unless the plan is loaded with BodyFilesAnywhere.
func TestPlanBodyFilesStayInThePlanFolder(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	require.NoError(t, os.WriteFile(secret, []byte("SECRET"), 0o644))
	dir := filepath.Join(t.TempDir(), "plans")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "order.json"), []byte(`{"sku": "A-{i}"}`), 0o644))
	require.NoError(t, os.Symlink(secret, filepath.Join(dir, "link-out.json")))
	require.NoError(t, os.Symlink("order.json", filepath.Join(dir, "link-in.json")))
	rel, err := filepath.Rel(dir, secret)
	require.NoError(t, err)
	for _, tc := range []struct {
		body, want string
	}{
		{"@order.json", ""},
		{"@sub/../order.json", ""},
		{"@link-in.json", ""},
		{"@/etc/hostname", "is an absolute path"},
		{"@" + secret, "is an absolute path"},
		{"@/proc/self/environ", "is an absolute path"},
		{"@../../../../etc/hostname", "leads out of the folder"},
		{"@" + rel, "leads out of the folder"},
		{"@link-out.json", "leads out of the folder"},
		{"@sub", "is not a regular file"},
		{"@missing.json", "no such file"},
	} {
		t.Run(tc.body, func(t *testing.T) {
			_, err := bodyPlan(t, dir, tc.body)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, "plan.yaml:4: request.body: ")
			require.ErrorContains(t, err, tc.want)
			if tc.want != "no such file" {
				require.ErrorContains(t, err, "BodyFilesAnywhere")
			}
		})
	}
	t.Run("anywhere", func(t *testing.T) {
		for _, b := range []string{"@" + secret, "@" + rel, "@link-out.json"} {
			p, err := bodyPlan(t, dir, b, BodyFilesAnywhere())
			require.NoError(t, err, b)
			sh, _, err := p.Request.compile(p.bodyFiles())
			require.NoError(t, err)
			require.Equal(t, "SECRET", sh.body.render(&vars{}))
		}
	})
	// The caller's own --body @FILE is any file, relative to the working
	// directory (as documented: the user typed it), also over a plan.
	t.Run("caller's body", func(t *testing.T) {
		p, err := bodyPlan(t, dir, "@order.json")
		require.NoError(t, err)
		require.NoError(t, CheckRequest(p, Request{Body: "@" + secret}))
		t.Chdir(outside)
		require.NoError(t, CheckRequest(p, Request{Body: "@secret.txt"}), "relative to the working directory, not the plan")
		sh, _, err := p.Request.merge(Request{Body: "@secret.txt"}.fromCaller()).compile(p.bodyFiles())
		require.NoError(t, err)
		require.Equal(t, "SECRET", sh.body.render(&vars{}))
	})
}

// Whatever a plan's "@FILE" says, a confined read returns a file of the
// plan's folder or an error: never the secret beside it.
func FuzzPlanBodyFile(f *testing.F) {
	for _, s := range []string{"order.json", "../secret.txt", "/etc/hostname", "/proc/self/environ", "sub/../../secret.txt",
		"link-out.json", "link-in.json", "./order.json", "sub//..//order.json", "..", "", "\x00", "sub/../link-out.json"} {
		f.Add(s)
	}
	base := f.TempDir()
	dir := filepath.Join(base, "plans")
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		f.Fatal(err)
	}
	for file, text := range map[string]string{filepath.Join(base, "secret.txt"): "SECRET", filepath.Join(dir, "order.json"): "order"} {
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(base, "secret.txt"), filepath.Join(dir, "link-out.json")); err != nil {
		f.Fatal(err)
	}
	_ = os.Symlink("order.json", filepath.Join(dir, "link-in.json"))
	files := bodyFiles{dir: dir}
	f.Fuzz(func(t *testing.T, name string) {
		b, err := files.read(name)
		if err != nil {
			return
		}
		if strings.Contains(string(b), "SECRET") || string(b) != "order" {
			t.Fatalf("@%s read %q", name, b)
		}
	})
}
