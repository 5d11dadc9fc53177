// Package redisproc starts and stops real redis-server child processes on
// loopback: a single node, or a small Redis Cluster built with
// redis-cli --cluster create. Tests and the local/embedded environments use
// it. Every process runs in its own process group and, on Linux, dies with
// its parent; Stop kills the group and waits, so no server outlives Stop.
//
// redisproc imports only the standard library; it must not import other
// rlverify packages.
package redisproc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rlverify/rlverify/internal/childproc"
)

// Binaries looked up on PATH.
var (
	ServerBin = "redis-server"
	CLIBin    = "redis-cli"
)

// StartTimeout bounds the wait for a server to answer PING, and for a cluster
// to reach cluster_state:ok.
var StartTimeout = 10 * time.Second

// Available returns nil when redis-server (and redis-cli) are on PATH, else an
// error saying what is missing.
func Available() error {
	for _, b := range []string{ServerBin, CLIBin} {
		if _, err := exec.LookPath(b); err != nil {
			return fmt.Errorf("redisproc: %s not found on PATH (install redis-server / redis-tools): %w", b, err)
		}
	}
	return nil
}

// Server is one redis-server child process. The zero value is not usable;
// build it with Start. Its methods are safe for concurrent use.
type Server struct {
	// Addr is 127.0.0.1:Port.
	Addr string
	Port int

	extra []string
	mu    sync.Mutex
	cmd   *exec.Cmd
	out   *bytes.Buffer
	done  chan struct{}
}

// Start launches redis-server on a free loopback port with persistence off
// and waits until it answers PING. extra arguments are appended to the
// command line (e.g. "--maxmemory", "10mb").
func Start(extra ...string) (*Server, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Port: port, extra: extra}
		if last = s.start(); last == nil {
			return s, nil
		}
	}
	return nil, last
}

func (s *Server) start() error {
	args := append([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(s.Port), "--save", "", "--appendonly", "no"}, s.extra...)
	cmd := exec.Command(ServerBin, args...)
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = &lockedWriter{w: out}, &lockedWriter{w: out}
	childproc.SetProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redisproc: start %s: %w", ServerBin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.out, s.done = cmd, out, done
	s.mu.Unlock()
	deadline := time.Now().Add(StartTimeout)
	for {
		select {
		case <-done:
			return fmt.Errorf("redisproc: redis-server on port %d exited: %s", s.Port, tail(out))
		default:
		}
		if r, err := Do(s.Addr, "PING"); err == nil && r == "PONG" {
			return nil
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("redisproc: redis-server on port %d did not answer PING within %s: %s", s.Port, StartTimeout, tail(out))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Stop kills the server's process group and waits for it to exit. It is
// idempotent.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	childproc.KillGroup(cmd)
	<-done
}

// Restart starts the server again on the same port (state is lost: the
// "store came back empty" case). It stops a running one first.
func (s *Server) Restart() error {
	s.Stop()
	return s.start()
}

// Cluster is a Redis Cluster of local nodes without replicas.
type Cluster struct {
	Nodes []*Server
	dir   string
}

// Addrs returns the nodes' addresses.
func (c *Cluster) Addrs() []string {
	a := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		a[i] = n.Addr
	}
	return a
}

// StartCluster starts n (≥ 3) cluster-enabled nodes with their config in a
// temporary directory, joins them with redis-cli --cluster create, and waits
// until every node reports cluster_state:ok.
func StartCluster(n int) (*Cluster, error) {
	if n < 3 {
		return nil, fmt.Errorf("redisproc: StartCluster(%d): a cluster needs at least 3 masters", n)
	}
	if err := Available(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redisproc-cluster-")
	if err != nil {
		return nil, fmt.Errorf("redisproc: %w", err)
	}
	c := &Cluster{dir: dir}
	for i := 0; i < n; i++ {
		ndir := fmt.Sprintf("%s/node%d", dir, i)
		if err := os.Mkdir(ndir, 0o700); err != nil {
			c.Stop()
			return nil, fmt.Errorf("redisproc: %w", err)
		}
		s, err := Start("--cluster-enabled", "yes", "--cluster-config-file", ndir+"/nodes.conf",
			"--dir", ndir, "--cluster-node-timeout", "2000")
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.Nodes = append(c.Nodes, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	cmd := exec.CommandContext(ctx, CLIBin, args...)
	childproc.SetProcAttr(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		c.Stop()
		return nil, fmt.Errorf("redisproc: redis-cli --cluster create: %w: %s", err, lastLines(string(out), 10))
	}
	deadline := time.Now().Add(StartTimeout)
	for _, s := range c.Nodes {
		for {
			info, err := Do(s.Addr, "CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				c.Stop()
				return nil, fmt.Errorf("redisproc: cluster node %s not ok within %s: %v %s", s.Addr, StartTimeout, err, lastLines(info, 3))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return c, nil
}

// Stop stops every node and removes the cluster's directory.
func (c *Cluster) Stop() {
	for _, s := range c.Nodes {
		s.Stop()
	}
	if c.dir != "" {
		_ = os.RemoveAll(c.dir)
	}
}

// Do sends one command to addr over a fresh connection and returns a simple
// or bulk string reply (integers as decimal text). An error reply is an error.
func Do(addr string, args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("redisproc: empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("redisproc: %s", line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("redisproc: bad bulk reply %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("redisproc: unsupported reply %q", line)
}

// FreePort returns a TCP port free on 127.0.0.1 right now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port on 127.0.0.1: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w.Len() > 1<<20 {
		l.w.Reset()
	}
	return l.w.Write(p)
}

func tail(b *bytes.Buffer) string { return lastLines(b.String(), 5) }

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
