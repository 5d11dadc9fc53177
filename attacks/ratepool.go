package attacks

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/rlverify/rlverify/history"
)

// pool runs an open-model rate phase: one scheduler goroutine paces hits
// with a vegeta Pacer and hands hit numbers to up to conc workers; each
// worker sends on its own keep-alive connections and records its events
// straight to the history writer.
type pool struct {
	e          *Engine
	ctx        context.Context // requests in flight are not cancelled by the phase's ctx
	ph         *Phase
	keys       []weighted
	total      float64
	tiers      []string
	phaseStart int64
	per        time.Duration
	r0, slope  float64

	// raw: plain http:// targets without a caller-supplied client.
	raw   bool
	hosts []string
	shape *shape
	// perRequest: each request is rendered on its own (a shape with {i},
	// or weighted requests, whose cost header or parameter changes).
	perRequest bool
	// reqs[inst][key] is the request as bytes (raw), wires the rendered
	// request (client) and paths its recorded path, unless the shape
	// differs per request.
	reqs  [][][]byte
	wires [][]wireReq
	paths [][]string

	sentN, late, lastSent atomic.Int64

	// spent is closed when a worker finds the request budget spent.
	spent     chan struct{}
	spentOnce sync.Once
	// open are the workers' connections, closed at once when the run
	// stops (aborted).
	openMu  sync.Mutex
	open    map[*rawConn]bool
	aborted bool
}

// track registers rc to be aborted when the run stops; a connection a
// worker makes after the stop is aborted at once (it took its hit before).
func (p *pool) track(rc *rawConn) {
	p.openMu.Lock()
	defer p.openMu.Unlock()
	p.open[rc] = true
	if p.aborted {
		rc.abort()
	}
}

// abortAll closes every worker's connection: requests in flight fail now.
func (p *pool) abortAll() {
	p.openMu.Lock()
	defer p.openMu.Unlock()
	p.aborted = true
	for rc := range p.open {
		rc.abort()
	}
}

// newPool prepares the requests of a rate phase.
func (e *Engine) newPool(ctx context.Context, ph *Phase, keys []weighted) *pool {
	p := &pool{e: e, ctx: ctx, ph: ph, keys: keys, raw: e.o.Client == nil, shape: e.shapes[ph.Name],
		spent: make(chan struct{}), open: map[*rawConn]bool{}}
	if p.shape == nil {
		p.shape = e.defShape
	}
	_, weightedPhase := e.costs.m.Load(ph.Name)
	p.perRequest = p.shape.perRequest || weightedPhase
	for _, k := range keys {
		p.total += k.w
		p.tiers = append(p.tiers, e.keys.tier(k.key))
	}
	p.hosts = make([]string, len(e.bases))
	for i, b := range e.bases {
		if b.scheme != "http" {
			p.raw = false
		}
		p.hosts[i] = b.host
	}
	// Requests that are the same every time are rendered once per instance
	// and key; a shape with {i} is rendered per request.
	p.reqs = make([][][]byte, len(e.bases))
	p.paths = make([][]string, len(e.bases))
	p.wires = make([][]wireReq, len(e.bases))
	for i := range e.bases {
		p.reqs[i] = make([][]byte, len(keys))
		p.paths[i] = make([]string, len(keys))
		p.wires[i] = make([]wireReq, len(keys))
		if p.perRequest {
			continue
		}
		for j, k := range keys {
			r := &req{key: k.key, tenant: k.tenant, inst: i, phase: ph.Name, shape: p.shape}
			p.wires[i][j] = e.wire(r)
			if p.raw {
				p.reqs[i][j] = p.wires[i][j].raw(p.hosts[i], false)
			}
			if path := e.pathOf(r); path != e.plain[i] {
				p.paths[i][j] = e.recordedPath(r, path)
			}
		}
	}
	return p
}

// schedule paces hits until the pacer stops, dur passes or ctx ends, and
// returns how many hits it handed out and whether ctx stopped it.
func (p *pool) schedule(ctx context.Context, pacer vegeta.Pacer, dur time.Duration, conc int) (handed uint64, stopped bool) {
	e := p.e
	hits := make(chan uint64)
	var wg sync.WaitGroup
	workers := 0
	spawn := func() {
		workers++
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.work(hits)
		}()
	}
	for range min(conc, 16) {
		spawn()
	}
	done := ctx.Done()
	// In-flight requests are cut off at once when the run stops: their
	// connections are closed, and they are recorded as cancelled.
	watch := make(chan struct{})
	defer close(watch)
	go func() {
		select {
		case <-done:
			p.abortAll()
		case <-watch:
		}
	}()
	var count uint64
loop:
	for {
		if ctx.Err() != nil {
			stopped = true
			break
		}
		select {
		case <-p.spent:
			break loop // the request budget is spent
		default:
		}
		elapsed := time.Duration(e.off() - p.phaseStart)
		if dur > 0 && elapsed > dur {
			break
		}
		wait, stop := pacer.Pace(elapsed, count)
		if stop {
			break
		}
		if dur > 0 && elapsed+wait > dur {
			// The next hit is due after the phase's end: do not wait for it.
			e.o.Sleep(ctx, dur-elapsed)
			break
		}
		if wait > 0 {
			if wait < 5*time.Millisecond {
				time.Sleep(wait)
			} else {
				e.o.Sleep(ctx, wait)
				if ctx.Err() != nil {
					stopped = true
					break
				}
			}
		}
		if workers < conc {
			select {
			case hits <- count:
				count++
				continue
			default:
				spawn() // every worker is busy
			}
		}
		select {
		case hits <- count:
			count++
		case <-p.spent:
			break loop
		case <-done:
			stopped = true
			break loop
		}
	}
	close(hits)
	wg.Wait()
	return count, stopped
}

// work sends the hits it receives until hits is closed.
func (p *pool) work(hits <-chan uint64) {
	e := p.e
	ev := new(history.Event)
	used := make([]bool, len(p.keys))
	var conns []*rawConn
	var hreqs [][]*http.Request
	if p.raw {
		conns = make([]*rawConn, len(e.o.Instances))
		defer func() {
			for _, c := range conns {
				if c != nil {
					c.close()
				}
			}
		}()
	} else {
		hreqs = make([][]*http.Request, len(e.o.Instances))
	}
	tol := int64(e.o.LateTolerance)
	for k := range hits {
		ki := 0
		if len(p.keys) > 1 {
			e.rngMu.Lock()
			x := e.rng.Float64() * p.total
			e.rngMu.Unlock()
			ki = len(p.keys) - 1
			for j, w := range p.keys {
				if x < w.w {
					ki = j
					break
				}
				x -= w.w
			}
		}
		key := p.keys[ki].key
		if !used[ki] {
			used[ki] = true
			e.keysUsed.Store(key, struct{}{})
		}
		inst := e.pickInstance(p.ph, int(k))
		if !e.reserve(1) {
			p.spentOnce.Do(func() { close(p.spent) })
			return
		}
		*ev = history.Event{ID: e.newID(), Key: key, Instance: inst, Phase: p.ph.Name, Tier: p.tiers[ki],
			Intended: p.phaseStart + intendedOffset(k, p.per, p.r0, p.slope), Path: p.paths[inst][ki]}
		w, raw := &p.wires[inst][ki], p.reqs[inst][ki]
		if p.perRequest {
			r := &req{key: key, tenant: p.keys[ki].tenant, inst: inst, phase: p.ph.Name, shape: p.shape, id: ev.ID}
			if c := e.costs.of(r.phase, key); c != nil {
				r.cost = c.take()
				ev.Cost = r.cost
			}
			one := e.wire(r)
			w = &one
			if p.raw {
				raw = one.raw(p.hosts[inst], false)
			}
			if path := e.pathOf(r); path != e.plain[inst] {
				ev.Path = e.recordedPath(r, path)
			}
		}
		var resp *http.Response
		var err error
		if p.raw {
			if conns[inst] == nil {
				conns[inst] = &rawConn{addr: p.hosts[inst], maxHeaderBytes: e.maxHeaderBytes(), maxHeaders: e.maxHeaders()}
				p.track(conns[inst])
			}
			ev.Sent = e.off()
			resp, err = conns[inst].roundTrip(raw, e.o.Timeout)
		} else {
			if hreqs[inst] == nil {
				hreqs[inst] = make([]*http.Request, len(p.keys))
			}
			// A request without a body can be sent again as it is.
			hr := hreqs[inst][ki]
			if hr == nil || len(w.body) > 0 || p.perRequest {
				hr, err = w.http(p.ctx, e.bases[inst])
				if err == nil && len(w.body) == 0 && !p.perRequest {
					hreqs[inst][ki] = hr
				}
			}
			ev.Sent = e.off()
			if err == nil {
				resp, err = e.client.Do(hr)
				if err == nil {
					if err = checkHeaderCount(resp, e.maxHeaders()); err == nil {
						_, err = drain(resp)
					} else {
						resp.Body.Close()
					}
				}
			}
		}
		ev.Recv = e.off()
		if err != nil && p.ctx.Err() != nil {
			err = errCancelled
		}
		p.sentN.Add(1)
		if ev.Sent-ev.Intended > tol {
			p.late.Add(1)
		}
		for {
			old := p.lastSent.Load()
			if ev.Sent <= old || p.lastSent.CompareAndSwap(old, ev.Sent) {
				break
			}
		}
		e.record(ev, resp, err)
	}
}

// rawConn is one persistent HTTP/1.1 connection of a worker.
type rawConn struct {
	addr   string
	c      net.Conn
	br     *bufio.Reader
	reused bool
	// mu guards c against abort from another goroutine.
	mu sync.Mutex
	// aborted: the run stopped; no new connection is dialled.
	aborted bool
	// guard bounds what one response may make us read.
	guard *byteGuard
	// maxHeaderBytes and maxHeaders bound a response's header section.
	maxHeaderBytes int64
	maxHeaders     int
}

// abort closes the connection from another goroutine (the run stopped).
func (rc *rawConn) abort() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.aborted = true
	if rc.c != nil {
		rc.c.Close()
	}
}

func (rc *rawConn) close() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.c != nil {
		rc.c.Close()
		rc.c = nil
	}
}

func (rc *rawConn) dial(timeout time.Duration) error {
	rc.mu.Lock()
	aborted := rc.aborted
	rc.mu.Unlock()
	if aborted {
		return errCancelled
	}
	c, err := net.DialTimeout("tcp", rc.addr, timeout)
	if err != nil {
		return err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	rc.mu.Lock()
	if rc.aborted {
		// The run stopped while this connection was being dialled.
		rc.mu.Unlock()
		c.Close()
		return errCancelled
	}
	rc.c = c
	rc.mu.Unlock()
	rc.reused = false
	rc.guard = &byteGuard{r: c}
	if rc.br == nil {
		rc.br = bufio.NewReaderSize(rc.guard, 4096)
	} else {
		rc.br.Reset(rc.guard)
	}
	return nil
}

// maxDrain is how much of a response body is read to keep a connection;
// a longer body closes it.
const maxDrain = 1 << 20

// roundTrip writes b and reads the response (its body drained). A request
// on a reused connection that the server had closed before reading it (EOF
// or reset before any byte of a response) is sent once more on a new one.
func (rc *rawConn) roundTrip(b []byte, timeout time.Duration) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		if rc.c == nil {
			if err := rc.dial(timeout); err != nil {
				return nil, err
			}
		}
		reused := rc.reused
		_ = rc.c.SetDeadline(time.Now().Add(timeout))
		resp, err := rc.exchange(b)
		if err == nil {
			rc.reused = true
			return resp, nil
		}
		rc.close()
		if attempt == 0 && reused && staleConn(err) {
			continue
		}
		return nil, err
	}
}

func (rc *rawConn) exchange(b []byte) (*http.Response, error) {
	if _, err := rc.c.Write(b); err != nil {
		return nil, err
	}
	// The header section may take at most maxHeaderBytes (plus what the
	// reader buffers ahead); the body is drained up to maxDrain after it.
	rc.guard.allow(rc.maxHeaderBytes+int64(rc.br.Size()), errHeadersTooLarge(rc.maxHeaderBytes))
	// A connection the server closed reads EOF before any byte (which
	// ReadResponse would report as an unexpected EOF).
	if _, err := rc.br.Peek(1); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(rc.br, nil)
	if err == nil {
		if err = checkHeaderCount(resp, rc.maxHeaders); err != nil {
			resp.Body.Close()
			return nil, err
		}
		rc.guard.allow(maxDrain+int64(rc.br.Size())+1, nil)
	}
	if err != nil {
		return nil, err
	}
	n, err := drainKeep(resp, maxDrain+1)
	if err != nil {
		return nil, err
	}
	if n > maxDrain || resp.Close {
		rc.close()
	}
	return resp, nil
}

// staleConn: the error a request gets when the server closed an idle
// keep-alive connection before reading it.
func staleConn(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return err == io.EOF || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// byteGuard is a reader that lets through at most left bytes, then fails
// with err: a hostile target cannot make a response take unbounded memory.
type byteGuard struct {
	r    io.Reader
	left int64
	err  error
}

// allow resets the budget to n bytes, failing with err past it (nil: EOF).
func (g *byteGuard) allow(n int64, err error) { g.left, g.err = n, err }

func (g *byteGuard) Read(p []byte) (int, error) {
	if g.left <= 0 {
		if g.err != nil {
			return 0, g.err
		}
		return 0, io.EOF
	}
	if int64(len(p)) > g.left {
		p = p[:g.left]
	}
	n, err := g.r.Read(p)
	g.left -= int64(n)
	return n, err
}
