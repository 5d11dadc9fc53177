package console

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/internal/human"
)

// logEvery is how often a non-terminal progress log repeats the running
// phase's line.
const logEvery = 5 * time.Second

// Progress shows an attack's phases as it runs. On a terminal each phase
// gets a bar (mpb) with its own sent/admitted/rejected/errors, rate and
// ETA; finished phases keep their bar. Elsewhere (CI logs) it writes one
// line per phase when it ends and one every logEvery for the running phase,
// each with that phase's own counts. The zero value is not usable: see
// New. Its methods are safe for concurrent use.
type Progress struct {
	mu  sync.Mutex
	w   io.Writer
	tty bool
	off bool
	now func() time.Time
	// ended marks the phases whose last snapshot has been shown: a late
	// snapshot of a finished phase is ignored.
	ended map[int]bool
	// terminal
	bars map[int]*phaseBar
	mp   *mpb.Progress
	// log
	lastLine time.Time
}

// New shows progress on w: bars when w is a terminal, log lines
// elsewhere, nothing when quiet.
func New(w io.Writer, quiet bool) *Progress {
	return NewOn(w, IsTerminal(w), quiet)
}

// NewOn draws bars on w when tty, else writes log lines.
func NewOn(w io.Writer, tty, quiet bool) *Progress {
	return &Progress{w: w, tty: tty, off: quiet, now: time.Now, ended: map[int]bool{}, bars: map[int]*phaseBar{}}
}

// Update shows snapshot s (attacks.Options.Progress).
func (p *Progress) Update(s attacks.Progress) {
	if p.off {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended[s.Index] || s.Phases == 0 {
		return
	}
	if s.Done {
		p.ended[s.Index] = true
	}
	if p.tty {
		p.bar(s).show(s)
		return
	}
	if s.Done || p.now().Sub(p.lastLine) >= logEvery {
		fmt.Fprintln(p.w, phaseLine(s))
		p.lastLine = p.now()
	}
}

// Done ends the display: bars of phases that never ended (an interrupted
// or failed run) stay as they were.
func (p *Progress) Done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mp == nil {
		return
	}
	for i, b := range p.bars {
		if !p.ended[i] {
			b.bar.Abort(false)
		}
	}
	p.mp.Wait()
	p.mp = nil
}

// bar returns the bar of s's phase, creating it (and the container) on
// first sight.
func (p *Progress) bar(s attacks.Progress) *phaseBar {
	if b, ok := p.bars[s.Index]; ok {
		return b
	}
	if p.mp == nil {
		// The width applies where w is not a real terminal (tests).
		p.mp = mpb.New(mpb.WithConsoleWriter(newRedrawWriter(Raw(p.w), true)), mpb.WithAutoRefresh(),
			mpb.WithWidth(160), mpb.WithRefreshRate(200*time.Millisecond))
	}
	b := &phaseBar{}
	name := fmt.Sprintf("%d/%d %s", s.Index+1, s.Phases, OneLine(s.Phase))
	b.bar = p.mp.AddBar(barScale, mpb.BarWidth(24),
		mpb.PrependDecorators(decor.Name(name, decor.WCSyncSpaceR)),
		mpb.AppendDecorators(decor.Any(b.text)),
	)
	p.bars[s.Index] = b
	return b
}

// barScale is a bar's total: bars advance in thousandths of their phase.
const barScale = 1000

// phaseBar is one phase's bar and the snapshot its text shows.
type phaseBar struct {
	bar  *mpb.Bar
	mu   sync.Mutex
	last attacks.Progress
}

func (b *phaseBar) show(s attacks.Progress) {
	b.mu.Lock()
	b.last = s
	b.mu.Unlock()
	if s.Cut {
		// Left where it stopped: a cut phase is not complete.
		b.bar.SetCurrent(min(int64(fraction(s)*barScale), barScale-1))
		b.bar.Abort(false)
		return
	}
	if s.Done {
		b.bar.SetTotal(barScale, true)
		return
	}
	// A phase completes when it says so, not when its estimate is reached.
	b.bar.SetCurrent(min(int64(fraction(s)*barScale), barScale-1))
}

func (b *phaseBar) text(decor.Statistics) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return counts(b.last) + "  " + timing(b.last)
}

// phaseLine is the log line of a snapshot.
func phaseLine(s attacks.Progress) string {
	return fmt.Sprintf("phase %d/%d %-16s %s  %s", s.Index+1, s.Phases, OneLine(s.Phase), counts(s), timing(s))
}

// counts is the phase's own sent/admitted/rejected/errors.
func counts(s attacks.Progress) string {
	sent := human.Count(s.PhaseSent)
	if s.PlannedRequests > 0 && !s.Done {
		sent += "/" + human.Count(s.PlannedRequests)
	}
	return fmt.Sprintf("sent %s  admitted %s  rejected %s  errors %s",
		sent, human.Count(s.PhaseAdmitted), human.Count(s.PhaseRejected), human.Count(s.PhaseErrors))
}

// timing is the phase's rate and its ETA (running) or length (ended).
func timing(s attacks.Progress) string {
	var b strings.Builder
	if sec := s.PhaseElapsed.Seconds(); sec > 0 && s.PhaseSent > 0 {
		b.WriteString(human.Rate(float64(s.PhaseSent)/sec) + "  ")
	}
	if s.Cut {
		b.WriteString("cut short after " + roundDur(s.PhaseElapsed))
		return b.String()
	}
	if s.Done {
		b.WriteString("took " + roundDur(s.PhaseElapsed))
		return b.String()
	}
	if eta, ok := remaining(s); ok {
		b.WriteString("ETA " + roundDur(eta))
	} else {
		b.WriteString(roundDur(s.PhaseElapsed) + " so far")
	}
	return b.String()
}

// fraction is how much of its planned size the phase has done, in [0, 1].
func fraction(s attacks.Progress) float64 {
	f := 0.0
	if s.PlannedDuration > 0 {
		f = max(f, float64(s.PhaseElapsed)/float64(s.PlannedDuration))
	}
	if s.PlannedRequests > 0 {
		f = max(f, float64(s.PhaseSent)/float64(s.PlannedRequests))
	}
	return min(f, 1)
}

// remaining estimates the time left in the phase: the rest of its planned
// duration, else its planned requests at the rate so far.
func remaining(s attacks.Progress) (time.Duration, bool) {
	switch {
	case s.PlannedDuration > 0:
		return max(s.PlannedDuration-s.PhaseElapsed, 0), true
	case s.PlannedRequests > 0 && s.PhaseSent > 0:
		left := max(s.PlannedRequests-s.PhaseSent, 0)
		return time.Duration(float64(s.PhaseElapsed) * float64(left) / float64(s.PhaseSent)), true
	}
	return 0, false
}

func roundDur(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
