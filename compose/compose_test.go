// Package compose_test brings up compose/docker-compose.yml with the compose
// CLI (docker compose or docker-compose) and attacks it with the rlverify
// binary, as compose/README.md tells users to. The compose libraries are never
// linked: the test drives the CLI.
package compose_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func inCI() bool { return os.Getenv("CI") == "true" }

func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if inCI() {
		t.Fatalf("CI=true: %s", msg)
	}
	t.Skip(msg)
}

// composeCLI returns the command that runs compose: the docker CLI plugin
// when present, else docker-compose.
func composeCLI() ([]string, error) {
	if exec.Command("docker", "compose", "version").Run() == nil {
		return []string{"docker", "compose"}, nil
	}
	if p, err := exec.LookPath("docker-compose"); err == nil {
		return []string{p}, nil
	}
	return nil, fmt.Errorf("neither `docker compose` nor docker-compose is installed (Debian: apt-get install docker-compose)")
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		t.Fatal(err)
	}
}

func TestComposeStackAttack(t *testing.T) {
	if out, err := exec.Command("docker", "info").CombinedOutput(); err != nil {
		skipOrFail(t, "compose test needs a Docker engine (scripts/docker-up.sh starts one): %v: %s", err, lastLine(out))
	}
	cli, err := composeCLI()
	if err != nil {
		skipOrFail(t, "%v", err)
	}
	redisImage := os.Getenv("RLVERIFY_REDIS_IMAGE")
	if redisImage == "" {
		redisImage = "redis:7-alpine"
		if exec.Command("docker", "image", "inspect", "rlverify/redis:local").Run() == nil {
			redisImage = "rlverify/redis:local"
		}
	}
	if exec.Command("docker", "image", "inspect", redisImage).Run() != nil {
		skipOrFail(t, "Redis image %s is not present locally and this test never pulls: run scripts/build-images.sh and set RLVERIFY_REDIS_IMAGE=rlverify/redis:local", redisImage)
	}

	// The compose files and a fresh static binary in a scratch directory.
	dir := t.TempDir()
	for _, f := range []string{"docker-compose.yml", "Dockerfile", ".dockerignore"} {
		copyFile(t, f, filepath.Join(dir, f), 0o644)
	}
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, "rlverify"), "./cmd/rlverify")
	build.Dir = ".."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build ./cmd/rlverify: %v\n%s", err, out)
	}

	project := fmt.Sprintf("rlverify-test-%d", os.Getpid())
	ports := []string{freePort(t), freePort(t), freePort(t)}
	sinkPort, redisPort := freePort(t), freePort(t)
	env := append(os.Environ(),
		"RLVERIFY_REDIS_IMAGE="+redisImage,
		"RLVERIFY_PORT_1="+ports[0], "RLVERIFY_PORT_2="+ports[1], "RLVERIFY_PORT_3="+ports[2],
		"RLVERIFY_SINK_PORT="+sinkPort, "RLVERIFY_REDIS_PORT="+redisPort,
	)
	compose := func(ctx context.Context, args ...string) ([]byte, error) {
		full := append(append([]string{}, cli[1:]...), append([]string{"-p", project, "-f", filepath.Join(dir, "docker-compose.yml")}, args...)...)
		cmd := exec.CommandContext(ctx, cli[0], full...)
		cmd.Dir, cmd.Env = dir, env
		return cmd.CombinedOutput()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, err := compose(dctx, "down", "-v", "--remove-orphans", "-t", "2"); err != nil {
			t.Errorf("compose down: %v\n%s", err, out)
		}
		out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=com.docker.compose.project="+project).Output()
		if s := strings.TrimSpace(string(out)); s != "" {
			t.Errorf("containers left by compose project %s: %s", project, s)
		}
	})
	began := time.Now()
	if out, err := compose(ctx, "up", "-d", "--build"); err != nil {
		t.Fatalf("compose up: %v\n%s", err, out)
	}
	var targets []string
	for _, p := range ports {
		targets = append(targets, "http://127.0.0.1:"+p)
	}
	sinkURL := "http://127.0.0.1:" + sinkPort
	for _, u := range append(append([]string{}, targets...), sinkURL) {
		waitHealthy(t, u+"/healthz", 30*time.Second)
	}
	t.Logf("compose stack up in %s", time.Since(began).Round(time.Millisecond))

	// The stack's limiters enforce the built-in policy: declare it (a
	// --target is never judged against a policy it did not declare).
	declared, err := filepath.Abs(filepath.Join("..", "policy", "default.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"attack", "--env", "external", "--plan", "concurrent-burst", "--sink", sinkURL,
		"--policy", declared, "--out", filepath.Join(dir, "out"), "--quiet"}
	for _, u := range targets {
		args = append(args, "--target", u)
	}
	attack := exec.CommandContext(ctx, filepath.Join(dir, "rlverify"), args...)
	var out bytes.Buffer
	attack.Stdout, attack.Stderr = &out, &out
	err = attack.Run()
	t.Logf("rlverify %s\n%s", strings.Join(args, " "), out.String())
	if err != nil {
		t.Fatalf("the attack on the compose stack failed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "out", "latest", "history.jsonl")); err != nil {
		t.Fatalf("no history written: %v", err)
	}
}

func waitHealthy(t *testing.T, url string, d time.Duration) {
	t.Helper()
	c := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(d)
	for {
		resp, err := c.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not healthy within %s: %v", url, d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
