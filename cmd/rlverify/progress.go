package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/rlverify/rlverify/attacks"
)

// progress shows a one-line live status on a terminal and a plain line per
// phase (and every 5 s) otherwise, so CI logs stay readable.
type progress struct {
	mu       sync.Mutex
	w        io.Writer
	tty      bool
	off      bool
	phase    string
	lastLine time.Time
	drawn    bool
}

func newProgress(w io.Writer, quiet bool) *progress {
	return &progress{w: w, tty: isTerminal(w), off: quiet}
}

func (p *progress) update(s attacks.Progress) {
	if p.off {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	line := fmt.Sprintf("phase %-14s sent %7d  admitted %7d  rejected %7d  errors %5d  %6.1fs",
		s.Phase, s.Sent, s.Admitted, s.Rejected, s.Errors, s.Elapsed.Seconds())
	if p.tty {
		fmt.Fprintf(p.w, "\r\x1b[K%s", line)
		p.drawn = true
		return
	}
	if s.Phase != p.phase || time.Since(p.lastLine) > 5*time.Second {
		fmt.Fprintln(p.w, line)
		p.phase = s.Phase
		p.lastLine = time.Now()
	}
}

func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.drawn {
		fmt.Fprintln(p.w)
	}
}
