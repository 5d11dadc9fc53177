package envtest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rlverify/rlverify/envs/redisproc"
	"github.com/rlverify/rlverify/internal/childproc"
)

// EnvoyRateLimitBin is envoyproxy/ratelimit's binary: $RLVERIFY_ENVOY_RATELIMIT,
// else $(go env GOPATH)/bin/envoy-ratelimit as scripts/envoy-ratelimit.sh
// builds it; "" when neither exists.
func EnvoyRateLimitBin() string {
	if p := os.Getenv("RLVERIFY_ENVOY_RATELIMIT"); p != "" {
		return p
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
			gopath = string(bytes.TrimSpace(out))
		}
	}
	p := filepath.Join(gopath, "bin", "envoy-ratelimit")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// EnvoyRateLimit is envoyproxy/ratelimit running as child processes: its
// instances share one local redis-server.
type EnvoyRateLimit struct {
	// Targets are the instances' grpc://127.0.0.1:PORT.
	Targets []string
	// HTTP are the instances' HTTP listeners (127.0.0.1:PORT; /json,
	// /healthcheck): not the protocol.
	HTTP []string
	// Redis is the store every instance uses.
	Redis *redisproc.Server
	// Dir is RUNTIME_ROOT; the configuration is Dir/rl/config/config.yaml.
	Dir string
}

// StartEnvoyRateLimit starts n instances of envoyproxy/ratelimit with the
// configuration config (its YAML) against one new redis-server, every
// listener on 127.0.0.1 (it listens on all addresses by default), statsd off
// and extra settings (NAME=VALUE) added. Everything stops at the test's
// end. It skips locally, and fails in CI, when the binary or redis-server is
// missing.
func StartEnvoyRateLimit(t testing.TB, config string, n int, extra ...string) *EnvoyRateLimit {
	t.Helper()
	bin := EnvoyRateLimitBin()
	if bin == "" {
		skipOrFail(t, "envoyproxy/ratelimit is not built: run scripts/envoy-ratelimit.sh (install.sh --test does)")
	}
	if err := redisproc.Available(); err != nil {
		skipOrFail(t, "%v", err)
	}
	rs, err := redisproc.Start()
	if err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	t.Cleanup(rs.Stop)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "rl", "config")
	if err := os.MkdirAll(cfg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg, "config.yaml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &EnvoyRateLimit{Redis: rs, Dir: dir}
	for i := 0; i < n; i++ {
		target, http := startEnvoyRateLimit(t, bin, dir, rs.Addr, extra)
		e.Targets, e.HTTP = append(e.Targets, target), append(e.HTTP, http)
	}
	return e
}

func skipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		t.Fatalf("CI=true: %s", msg)
	}
	t.Skip(msg)
}

// startEnvoyRateLimit starts one instance and waits until its gRPC port
// accepts connections; it returns the gRPC target and the HTTP address.
func startEnvoyRateLimit(t testing.TB, bin, dir, redisAddr string, extra []string) (string, string) {
	t.Helper()
	var last string
	for attempt := 0; attempt < 3; attempt++ {
		var ports [3]int
		for i := range ports {
			p, err := redisproc.FreePort()
			if err != nil {
				t.Fatal(err)
			}
			ports[i] = p
		}
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(),
			"RUNTIME_ROOT="+dir, "RUNTIME_SUBDIRECTORY=rl", "RUNTIME_WATCH_ROOT=false",
			"USE_STATSD=false", "LOG_LEVEL=warn",
			"REDIS_SOCKET_TYPE=tcp", "REDIS_URL="+redisAddr,
			"HOST=127.0.0.1", "PORT="+strconv.Itoa(ports[0]),
			"GRPC_HOST=127.0.0.1", "GRPC_PORT="+strconv.Itoa(ports[1]),
			"DEBUG_HOST=127.0.0.1", "DEBUG_PORT="+strconv.Itoa(ports[2]))
		cmd.Env = append(cmd.Env, extra...)
		out := &lockedBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		childproc.SetProcAttr(cmd)
		if err := cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", bin, err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		stop := func() { childproc.KillGroup(cmd); <-done }
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))
		deadline := time.Now().Add(15 * time.Second)
		for {
			select {
			case <-done:
				last = "exited: " + out.String()
			default:
				if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
					c.Close()
					t.Cleanup(stop)
					return "grpc://" + addr, net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
				}
				if time.Now().Before(deadline) {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				last = "its gRPC port did not open within 15s: " + out.String()
				stop()
			}
			break
		}
	}
	t.Fatalf("envoyproxy/ratelimit did not start: %s", last)
	return "", ""
}

// lockedBuffer collects a child's output, written from two pipes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 64<<10 {
		return len(p), nil
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
