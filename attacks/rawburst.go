package attacks

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rlverify/rlverify/history"
)

// rawBurst releases a burst with last-byte synchronisation: every request is
// written on its own connection except its final byte; at the release
// instant one loop writes the missing bytes back to back. A server cannot
// parse a request before its last byte, so each request's decision lies in
// [the instant its last byte was written, its response], and the send times
// spread over only the few microseconds of that loop. Plain http:// targets
// only; it returns ok=false to fall back to net/http otherwise.
// StageLead bounds how long before its send time a burst released by
// last-byte synchronisation is staged on its connections: 3 s, time enough
// to dial and stage a burst of a thousand on a loaded machine (a bound of
// 1 s made boundary bursts miss their window edge there).
const StageLead = 3 * time.Second

// ProbeLead is the staging lead of a single request (a probe): 250 ms, far
// inside the header-read timeouts servers use (Go's ReadHeaderTimeout and
// nginx's client_header_timeout are often lowered to a second or two),
// which answer 400 to a request held longer, so a probe aimed at advice of
// several seconds tests the advice instead of becoming an error.
const ProbeLead = 250 * time.Millisecond

// stageLeadPer is the staging lead each further request of a burst adds.
const stageLeadPer = 25 * time.Millisecond

// stageLeadFor is how long before its send time a burst of n requests is
// staged: ProbeLead for one, growing by stageLeadPer per request, at most
// StageLead (a burst of 111 or more).
func stageLeadFor(n int) time.Duration {
	return min(StageLead, ProbeLead+time.Duration(max(n-1, 0))*stageLeadPer)
}

// staged is the offset at which staging began (the first dial).
func (e *Engine) rawBurst(ctx context.Context, rs []*req, at int64) (sent []int64, release, staged int64, ok bool, err error) {
	hosts := make([]string, len(e.bases))
	for i, b := range e.bases {
		if b.scheme != "http" {
			return nil, 0, 0, false, nil
		}
		hosts[i] = b.host
	}
	// Stage (dial, write all but the last byte) at most stageLeadFor(n)
	// before the send time: a server with a header-read timeout (Go's
	// ReadHeaderTimeout, nginx's client_header_timeout) answers 400 to a
	// request held longer, and a probe aimed at advice of 6 s would become
	// an error instead of a test of the advice.
	n := len(rs)
	if at >= 0 {
		if d := time.Duration(at-e.off()) - stageLeadFor(n); d > 0 {
			e.o.Sleep(ctx, d) // a stop ends it; the dials then fail as cut off
		}
	}
	staged = e.off()
	conns := make([]net.Conn, n)
	evs := make([]*history.Event, n)
	wires := make([][]byte, n)
	for i, r := range rs {
		var w wireReq
		evs[i], w = e.prepare(r)
		wires[i] = w.raw(hosts[r.inst], true)
	}
	lasts := make([]byte, n)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	// Dial and write everything but the last byte, a few at a time.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, 64)
	dialer := net.Dialer{Timeout: e.o.Timeout}
	for i, r := range rs {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int, r *req) {
			defer wg.Done()
			defer func() { <-sem }()
			c, derr := dialer.DialContext(ctx, "tcp", hosts[r.inst])
			if derr != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = derr
				}
				mu.Unlock()
				return
			}
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetNoDelay(true)
			}
			b := wires[i]
			lasts[i] = b[len(b)-1]
			_ = c.SetDeadline(time.Now().Add(e.o.Timeout + 10*time.Second))
			if _, werr := c.Write(b[:len(b)-1]); werr != nil {
				c.Close()
				mu.Lock()
				if firstErr == nil {
					firstErr = werr
				}
				mu.Unlock()
				return
			}
			conns[i] = c
		}(i, r)
	}
	wg.Wait()
	// The run stopping cuts off requests in flight: their connections close.
	watch := make(chan struct{})
	defer close(watch)
	var connMu sync.Mutex
	go func() {
		select {
		case <-ctx.Done():
			connMu.Lock()
			for _, c := range conns {
				if c != nil {
					c.Close()
				}
			}
			connMu.Unlock()
		case <-watch:
		}
	}()
	// Readers wait for the responses.
	sent = make([]int64, n)
	var done sync.WaitGroup
	gate := make(chan struct{})
	for i := range rs {
		done.Add(1)
		go func(i int) {
			defer done.Done()
			ev := evs[i]
			<-gate
			if conns[i] == nil {
				ev.Sent, ev.Recv = sent[i], sent[i]
				msg := "connect failed"
				if firstErr != nil {
					msg = firstErr.Error()
				}
				e.record(ev, nil, fmt.Errorf("%s", msg))
				return
			}
			c := conns[i]
			_ = c.SetReadDeadline(time.Now().Add(e.o.Timeout))
			guard := &byteGuard{r: c}
			br := bufio.NewReaderSize(guard, 4096)
			guard.allow(e.maxHeaderBytes()+int64(br.Size()), errHeadersTooLarge(e.maxHeaderBytes()))
			resp, rerr := http.ReadResponse(br, nil)
			if rerr == nil {
				if rerr = checkHeaderCount(resp, e.maxHeaders()); rerr == nil {
					guard.allow(1<<20+int64(br.Size()), nil)
					_, rerr = drainKeep(resp, 1<<20)
				} else {
					resp.Body.Close()
				}
			}
			if rerr != nil && ctx.Err() != nil {
				rerr = errCancelled
			}
			ev.Sent = sent[i]
			ev.Recv = e.off()
			e.record(ev, resp, rerr)
		}(i)
	}
	if at >= 0 {
		e.sleepUntil(ctx, at)
	}
	// Release: one tight loop, no allocation.
	release = e.off()
	intended := at
	if at < 0 {
		intended = release
	}
	for _, ev := range evs {
		ev.Intended = intended
	}
	e.release(conns, lasts, sent)
	close(gate)
	done.Wait()
	return sent, release, staged, true, nil
}

// sanitizeHeader drops CR and LF so a plan cannot inject headers.
func sanitizeHeader(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.NewReplacer("\r", "", "\n", "").Replace(s)
}

// release writes the held-back last byte of every request back to back,
// recording each send time. One loop on one goroutine: splitting it over two
// goroutines released together was measured and was no better for 100
// requests and worse for 1,000 on two shared vCPUs (the helper competes with
// the server's goroutines that the writes wake up).
func (e *Engine) release(conns []net.Conn, lasts []byte, sent []int64) {
	var one [1]byte
	for i, c := range conns {
		sent[i] = e.off()
		if c != nil {
			one[0] = lasts[i]
			_, _ = c.Write(one[:])
		}
	}
}
