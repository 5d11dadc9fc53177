// Package faultproxy is a TCP proxy that breaks on command: the store
// faults of the embedded and local environments, the store proxy a user
// puts in front of their own service's store (envs.StoreProxy) and the
// inter-region latency of a standalone instance. It imports only the standard library.
package faultproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy is a TCP proxy between the limiter instances and their store.
// It forwards bytes untouched until told to break, with the four faults of
// toxiproxy that matter to a limiter: down (every connection closed, new
// ones closed at once: a dead store), reset (the same with TCP resets: a
// crashed store or a middlebox), latency (every chunk delayed in both
// directions: a slow store) and stall (connections stay open but nothing
// gets through: a hung store, every call runs into its timeout). It is our
// own small proxy rather than toxiproxy: these faults are all the harness
// needs, and it keeps a large dependency tree out of the binary.
type Proxy struct {
	ln      net.Listener
	backend string
	down    atomic.Bool
	reset   atomic.Bool
	stall   atomic.Bool
	latency atomic.Int64 // ns
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
	closed  atomic.Bool
	// served counts the client connections that reached the backend.
	served atomic.Int64
}

// New listens on 127.0.0.1 with an ephemeral port and forwards to
// backend.
func New(backend string) (*Proxy, error) { return Listen("127.0.0.1:0", backend) }

// Listen listens on listen (host:port; port 0 picks one) and forwards to
// backend. A backend that is the proxy's own address is refused: every
// connection would dial the proxy again, for ever, at full CPU
// (`--store-proxy A=A` did that).
func Listen(listen, backend string) (*Proxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("fault proxy: listen on %s: %w", listen, err)
	}
	if SameEndpoint(ln.Addr().String(), backend) {
		ln.Close()
		return nil, fmt.Errorf("fault proxy: backend %s is the proxy's own address %s: it would forward to itself", backend, ln.Addr())
	}
	p := &Proxy{ln: ln, backend: backend, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Served is how many client connections have reached the backend since
// the proxy started: a store client that has connected through it shows.
func (p *Proxy) Served() int64 { return p.served.Load() }

// Addr is where clients connect.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetDown breaks (true) or mends (false) the store connection.
func (p *Proxy) SetDown(down bool) {
	p.down.Store(down)
	if down {
		p.mu.Lock()
		for c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
	}
}

// SetReset resets every connection and every new one (true) or mends
// (false).
func (p *Proxy) SetReset(on bool) {
	p.reset.Store(on)
	if on {
		p.mu.Lock()
		for c := range p.conns {
			abort(c)
		}
		p.mu.Unlock()
	}
}

// SetStall stops (true) or resumes (false) forwarding; connections stay
// open and what is sent meanwhile is dropped.
func (p *Proxy) SetStall(on bool) { p.stall.Store(on) }

// abort closes c with a TCP reset instead of an orderly shutdown.
func abort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// SetLatency delays every forwarded chunk by d (0 mends).
func (p *Proxy) SetLatency(d time.Duration) { p.latency.Store(int64(d)) }

// Close stops the proxy and cuts every connection.
func (p *Proxy) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	err := p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) track(c net.Conn, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

// SameEndpoint reports whether a connection to b would reach a listener on
// a (both host:port): the same port, and hosts that resolve to a common
// address, or a listener on every interface (0.0.0.0, ::, "") and a
// backend on this machine (loopback, or one of its interfaces' addresses).
// Names are resolved; an address that does not resolve is not the same.
func SameEndpoint(a, b string) bool {
	ah, ap, err1 := net.SplitHostPort(a)
	bh, bp, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || ap != bp {
		return false
	}
	aips, bips := resolve(ah), resolve(bh)
	for _, x := range aips {
		for _, y := range bips {
			if x.Equal(y) || (x.IsUnspecified() && local(y)) || (y.IsUnspecified() && local(x)) {
				return true
			}
		}
	}
	return false
}

func resolve(host string) []net.IP {
	if host == "" {
		return []net.IP{net.IPv4zero, net.IPv6unspecified}
	}
	if ip := net.ParseIP(host); ip != nil {
		return []net.IP{ip}
	}
	ips, _ := net.LookupIP(host)
	return ips
}

// local reports whether ip is this machine's: loopback, unspecified, or an
// interface's address.
func local(ip net.IP) bool {
	if ip.IsLoopback() || ip.IsUnspecified() {
		return true
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	var backoff time.Duration
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || p.closed.Load() {
				return
			}
			// Out of file descriptors and the like: wait before trying
			// again instead of spinning at full CPU (as net/http does).
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		if p.reset.Load() {
			abort(c)
			continue
		}
		if p.down.Load() {
			c.Close()
			continue
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	backend, err := net.DialTimeout("tcp", p.backend, 2*time.Second)
	if err != nil {
		client.Close()
		return
	}
	p.served.Add(1)
	p.track(client, true)
	p.track(backend, true)
	defer func() {
		p.track(client, false)
		p.track(backend, false)
		client.Close()
		backend.Close()
	}()
	done := make(chan struct{}, 2)
	go func() { p.pipe(backend, client); done <- struct{}{} }()
	go func() { p.pipe(client, backend); done <- struct{}{} }()
	<-done
}

// pipe copies src to dst, delaying each chunk by the current latency.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if d := time.Duration(p.latency.Load()); d > 0 {
				time.Sleep(d)
			}
			if p.down.Load() || p.reset.Load() {
				return
			}
			if p.stall.Load() {
				continue
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return
			}
			return
		}
	}
}
