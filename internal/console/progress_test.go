package console

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/attacks"
)

// snapshots of a two-phase run: a burst that got 10 admitted of 30, then a
// rate phase of 200 planned over 2s; the run's counts cover both.
func snapshots() []attacks.Progress {
	burst := attacks.Progress{Phase: "drain", Index: 0, Phases: 2, PlannedRequests: 30}
	rate := attacks.Progress{Phase: "steady", Index: 1, Phases: 2, PlannedRequests: 200, PlannedDuration: 2 * time.Second}
	b1 := burst
	b1.PhaseSent, b1.PhaseAdmitted, b1.PhaseRejected, b1.PhaseElapsed = 30, 10, 20, 20*time.Millisecond
	b1.Sent, b1.Admitted, b1.Rejected = 30, 10, 20
	b1.Done = true
	r1 := rate
	r1.PhaseSent, r1.PhaseRejected, r1.PhaseElapsed = 100, 100, time.Second
	r1.Sent, r1.Admitted, r1.Rejected = 130, 10, 120
	r2 := r1
	r2.PhaseSent, r2.PhaseRejected, r2.PhaseErrors, r2.PhaseElapsed = 200, 199, 1, 2*time.Second
	r2.Sent, r2.Rejected, r2.Errors = 230, 219, 1
	r2.Done = true
	return []attacks.Progress{b1, r1, r2}
}

func TestProgressLogHasEachPhasesOwnCounts(t *testing.T) {
	var buf bytes.Buffer
	p := NewOn(&buf, false, false)
	clock := time.Unix(0, 0)
	p.now = func() time.Time { return clock }
	s := snapshots()
	p.Update(s[0])
	late := s[0]
	late.Done = false
	p.Update(late) // a stale snapshot of an ended phase shows nothing
	clock = clock.Add(time.Second)
	p.Update(s[1]) // running, within logEvery of the last line: nothing
	clock = clock.Add(logEvery)
	p.Update(s[1]) // running, logEvery later: a line
	p.Update(s[2])
	p.Done()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 3, buf.String())
	require.Regexp(t, `^phase 1/2 drain\s+sent 30  admitted 10  rejected 20  errors 0  1.5 k/s  took 20ms$`, lines[0])
	require.Regexp(t, `^phase 2/2 steady\s+sent 100/200  admitted 0  rejected 100  errors 0  100/s  ETA 1s$`, lines[1])
	require.Regexp(t, `^phase 2/2 steady\s+sent 200  admitted 0  rejected 199  errors 1  100/s  took 2s$`, lines[2],
		"the second phase's line carries its own counts, not the run's 230")
}

func TestProgressBarsOnATerminal(t *testing.T) {
	var buf bytes.Buffer
	p := NewOn(&buf, true, false)
	for _, s := range snapshots() {
		p.Update(s)
	}
	p.Done()
	out := buf.String()
	require.Contains(t, out, "1/2 drain")
	require.Contains(t, out, "2/2 steady")
	require.Contains(t, out, "sent 30  admitted 10  rejected 20  errors 0")
	require.Contains(t, out, "sent 200  admitted 0  rejected 199  errors 1")
	require.Contains(t, out, "[======", "each phase has a bar")
}

func TestProgressQuietShowsNothing(t *testing.T) {
	for _, tty := range []bool{false, true} {
		var buf bytes.Buffer
		p := NewOn(&buf, tty, true)
		for _, s := range snapshots() {
			p.Update(s)
		}
		p.Done()
		require.Empty(t, buf.String())
	}
}

func TestProgressEstimates(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    attacks.Progress
		frac float64
		eta  time.Duration
		ok   bool
	}{
		{"by duration", attacks.Progress{PlannedDuration: 4 * time.Second, PhaseElapsed: time.Second}, 0.25, 3 * time.Second, true},
		{"by requests", attacks.Progress{PlannedRequests: 100, PhaseSent: 25, PhaseElapsed: time.Second}, 0.25, 3 * time.Second, true},
		{"the larger share", attacks.Progress{PlannedRequests: 100, PhaseSent: 50, PlannedDuration: 4 * time.Second, PhaseElapsed: time.Second}, 0.5, 3 * time.Second, true},
		{"unknown size", attacks.Progress{PhaseSent: 5, PhaseElapsed: time.Second}, 0, 0, false},
		{"overdue", attacks.Progress{PlannedDuration: time.Second, PhaseElapsed: 2 * time.Second}, 1, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.InDelta(t, tc.frac, fraction(tc.s), 1e-9)
			eta, ok := remaining(tc.s)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.eta, eta)
		})
	}
}

// Issue 26 item 5: a phase cut by a signal was drawn as a full bar.
func TestProgressCutPhaseIsNotShownComplete(t *testing.T) {
	cut := attacks.Progress{Phase: "soak", Index: 0, Phases: 1, PhaseSent: 50, PlannedRequests: 3000,
		PhaseElapsed: time.Second, PlannedDuration: 60 * time.Second, Done: true, Cut: true}
	var log bytes.Buffer
	p := NewOn(&log, false, false)
	p.Update(cut)
	p.Done()
	require.Contains(t, log.String(), "cut short after 1s")
	require.NotContains(t, log.String(), "took")
	var tty bytes.Buffer
	p = NewOn(&tty, true, false)
	p.Update(cut)
	p.Done()
	require.Contains(t, tty.String(), "cut short after 1s")
	require.NotContains(t, tty.String(), "[======================]", "a cut phase's bar is not full")
}

// Text a target, plan or policy chose reaches the terminal escaped: on
// stderr as a whole, and inside one line (a phase name) newline included.
func TestTerminalTextIsEscaped(t *testing.T) {
	var b bytes.Buffer
	w := Safe(&b)
	require.Equal(t, w, Safe(w), "wrapped once")
	_, err := io.WriteString(w, "phase ph\x1b[31mRED\r\x07 took 1s\n\tsecond line\n")
	require.NoError(t, err)
	require.Equal(t, "phase ph\\x1b[31mRED\\x0d\\x07 took 1s\n\tsecond line\n", b.String())
	require.Equal(t, `ph\x1b[31mRED\nfake line\t"q"`, OneLine("ph\x1b[31mRED\nfake line\t\"q\""))
	require.Equal(t, "free 10/s — ünïcode", OneLine("free 10/s — ünïcode"))
	require.Contains(t, phaseLine(attacks.Progress{Phase: "ph\nfake", Phases: 1}), `phase 1/1 ph\nfake`)
}
