package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rlverify/rlverify/internal/childproc"
)

// StartTimeout bounds the wait for a child gateway to accept connections.
var StartTimeout = 10 * time.Second

// stopGrace is how long a child gets to exit after SIGTERM before its whole
// process group is killed.
const stopGrace = 3 * time.Second

// child is one gateway process (nginx master and its workers, or haproxy)
// started in its own process group, so that neither a terminal's Ctrl-C
// reaches it before rlverify has flushed its history nor any worker outlives
// stop. The zero value is not usable; build it with startChild.
type child struct {
	name string
	cmd  *exec.Cmd
	out  *capped
	done chan struct{}
	once sync.Once
}

// startChild runs prog with args and waits until addr accepts TCP
// connections. It fails, with the child's last output, if the child exits
// first or StartTimeout (or ctx) ends the wait; the child is then stopped.
func startChild(ctx context.Context, name, prog string, args []string, addr string) (*child, error) {
	return startChildEnv(ctx, name, prog, args, nil, addr, StartTimeout)
}

// startChildEnv is startChild with the child's environment (nil: this
// process's) and its own bound on the wait.
func startChildEnv(ctx context.Context, name, prog string, args, env []string, addr string, timeout time.Duration) (*child, error) {
	cmd := exec.Command(prog, args...)
	cmd.Env = env
	out := &capped{}
	cmd.Stdout, cmd.Stderr = out, out
	childproc.SetProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("gateway: start %s (%s): %w", name, prog, err)
	}
	c := &child{name: name, cmd: cmd, out: out, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(c.done) }()
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-c.done:
			return nil, fmt.Errorf("gateway: %s exited during start-up: %s", name, c.output())
		default:
		}
		conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			conn.Close()
			return c, nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			c.stop()
			why := fmt.Sprintf("did not accept connections on %s within %s", addr, timeout)
			if ctx.Err() != nil {
				why = "start-up interrupted: " + ctx.Err().Error()
			}
			return nil, fmt.Errorf("gateway: %s %s: %s", name, why, c.output())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop asks the child to exit (SIGTERM: fast shutdown for nginx and haproxy),
// then kills its process group after stopGrace, and waits. It is idempotent
// and returns an error only if the child had died on its own before.
func (c *child) stop() error {
	var err error
	c.once.Do(func() {
		select {
		case <-c.done:
			err = fmt.Errorf("gateway: %s had exited before the end of the run: %s", c.name, c.output())
			childproc.KillGroup(c.cmd)
			return
		default:
		}
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(stopGrace):
		}
		// Workers that outlive their master, or a child that ignored SIGTERM.
		childproc.KillGroup(c.cmd)
		<-c.done
	})
	return err
}

// output returns the last lines the child wrote.
func (c *child) output() string {
	s := strings.TrimSpace(c.out.String())
	if s == "" {
		return "(no output)"
	}
	lines := strings.Split(s, "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	return strings.Join(lines, " | ")
}

// capped is a concurrency-safe buffer that keeps the last 64 KiB written.
type capped struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.b.Len() > 64<<10 {
		rest := c.b.Bytes()[c.b.Len()-32<<10:]
		c.b = *bytes.NewBuffer(append([]byte(nil), rest...))
	}
	return c.b.Write(p)
}

func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.String()
}

// tempDir makes the private directory of one child's configuration, pid file
// and logs. Its parent is $TMPDIR; remove it with os.RemoveAll after stop.
// nginx workers drop privileges when started as root, so the directory is
// searchable by them.
func tempDir(kind string) (string, error) {
	dir, err := os.MkdirTemp("", "rlverify-"+kind+"-*")
	if err != nil {
		return "", fmt.Errorf("gateway: temporary directory for %s: %w", kind, err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("gateway: %w", err)
	}
	return dir, nil
}

// errNotInstalled says which program is missing and how to get it.
func errNotInstalled(prog string, err error) error {
	return fmt.Errorf("%s is not installed (apt-get install nginx haproxy, or bash scripts/install.sh --test): %w", prog, errors.Join(ErrUnavailable, err))
}
