package history

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"time"
)

// The streaming reader.
//
// ReadFile keeps every event in memory (about 260 bytes an event, and the
// checks' index on top): a soak of 10^8 requests does not fit. A Stream
// hands out one event at a time in send order and keeps only the events
// it must hold back to put them in that order.
//
// Events are written when they complete, so a file is in completion order:
// an event that took long is written after events sent later. The stream
// holds each event back until an event sent at least ReorderBound later has
// been read, then passes it on; an event that comes further out of order
// than that (its send time before one already passed on) ends the read
// with a *ReorderError instead of being passed on out of order. So the
// memory is the events sent within one ReorderBound (at 30,000 requests/s
// and the default 10 s, 300,000 events, about 80 MB), whatever the length
// of the run.
//
// Every line is judged as Read judges it (the same lineState): the same
// errors on the same lines, a cut last line tolerated, the digest checked.
// The run header, faults, sinks, phases, samples and end record are kept
// (they are few) and given by History once the events are exhausted.

// DefaultReorderBound is the reorder bound of a Stream when none is given:
// twice the engine's default request timeout (5 s), since an event is
// written at most its own latency (the timeout at worst) after events sent
// after it, plus the writer's buffering.
const DefaultReorderBound = 10 * time.Second

// ReorderError says an event came later in the file than the reorder
// bound allows: events sent after it had already been passed on.
type ReorderError struct {
	Source string
	Line   int
	ID     uint64
	// Sent is the event's send time; Passed the send time of the latest
	// event already passed on; Bound the stream's reorder bound.
	Sent, Passed int64
	Bound        time.Duration
}

func (e *ReorderError) Error() string {
	return fmt.Sprintf("%s:%d: event %d (sent at %s) comes after events sent up to %s later (%s) were passed on: it is further out of send order than the reorder bound %s allows; give a larger bound or read the whole history into memory",
		e.Source, e.Line, e.ID, time.Duration(e.Sent), time.Duration(e.Passed-e.Sent), time.Duration(e.Passed), e.Bound)
}

// StreamOptions tune a Stream. The zero value is ready to use.
type StreamOptions struct {
	// ReorderBound is how far (by send time) an event may come after
	// events sent later; DefaultReorderBound when zero.
	ReorderBound time.Duration
}

// Stream reads a history's events one at a time, in send order (equal
// send times in file order). Use it as a bufio.Scanner: Next, Event, and
// Err when Next returns false; History then holds everything but the
// events. A Stream is not safe for concurrent use.
type Stream struct {
	s     *lineState
	sc    *bufio.Scanner
	bound int64
	eof   bool
	err   error
	h     *History // set at the end

	// slots hold the events held back; free lists the unused ones and
	// heap orders the held ones by (Sent, seq).
	slots []Event
	seq   []uint64
	free  []int32
	heap  []int32
	next  uint64
	// cur is the slot of the event last passed on (-1: none).
	cur int32
	// maxSent is the latest send time read; passed the send time of the
	// last event passed on.
	maxSent, passed int64
	started         bool
	n               int64
	ids             idSet
}

// NewStream reads the history in r (name is used in messages).
func NewStream(name string, r io.Reader, o StreamOptions) *Stream {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), MaxLine+1)
	b := o.ReorderBound
	if b <= 0 {
		b = DefaultReorderBound
	}
	s := newLineState(name)
	s.h.Events = make([]Event, 0, 1)
	return &Stream{s: s, sc: sc, bound: int64(b), cur: -1, ids: idSet{pages: map[uint64]*[idPage / 64]uint64{}}}
}

// Next advances to the next event in send order; false at the end of the
// events or on an error (see Err).
func (st *Stream) Next() bool {
	if st.cur >= 0 {
		st.free = append(st.free, st.cur)
		st.cur = -1
	}
	for st.err == nil {
		if len(st.heap) > 0 && (st.eof || st.slots[st.heap[0]].Sent <= st.maxSent-st.bound) {
			st.cur = st.pop()
			st.passed, st.started = st.slots[st.cur].Sent, true
			return true
		}
		if st.eof {
			return false
		}
		st.read()
	}
	return false
}

// read takes the next line of the file.
func (st *Stream) read() {
	s := st.s
	if !st.sc.Scan() {
		st.eof = true
		if err := st.sc.Err(); err != nil {
			st.err = fmt.Errorf("%s:%d: %w", s.name, s.line+1, err)
			return
		}
		h, err := s.finish()
		if err != nil {
			st.err = err
			return
		}
		if dup, ok := st.ids.firstDup(); ok {
			st.err = fmt.Errorf("%s: %w: %s", s.name, ErrFormat, describeDuplicates([]uint64{dup}))
			return
		}
		h.Events = nil
		st.h = h
		return
	}
	b := st.sc.Bytes()
	s.digest.line(b)
	if st.err = s.feed(b); st.err != nil || len(s.h.Events) == 0 {
		return
	}
	e := &s.h.Events[0]
	if st.started && e.Sent < st.passed {
		st.err = &ReorderError{Source: s.name, Line: s.line, ID: e.ID, Sent: e.Sent, Passed: st.passed, Bound: time.Duration(st.bound)}
		return
	}
	st.ids.add(e.ID)
	st.n++
	st.maxSent = max(st.maxSent, e.Sent)
	var i int32
	if n := len(st.free); n > 0 {
		i = st.free[n-1]
		st.free = st.free[:n-1]
	} else {
		i = int32(len(st.slots))
		st.slots = append(st.slots, Event{})
		st.seq = append(st.seq, 0)
	}
	st.slots[i] = *e
	s.h.Events = s.h.Events[:0]
	st.seq[i] = st.next
	st.next++
	st.push(i)
}

// Event is the event Next moved to, valid until the next call of Next.
func (st *Stream) Event() *Event { return &st.slots[st.cur] }

// Err is the error that ended the read, nil at a clean end. Events passed
// on before an error are part of a history that turned out unreadable:
// judge nothing from them.
func (st *Stream) Err() error { return st.err }

// Events is how many events have been read so far.
func (st *Stream) Events() int64 { return st.n }

// Held is how many events the stream holds back now (for tests and
// benchmarks of its memory).
func (st *Stream) Held() int { return len(st.heap) }

// History is the history without its events, once Next has returned
// false without an error (nil before).
func (st *Stream) History() *History { return st.h }

func (st *Stream) less(a, b int32) bool {
	sa, sb := st.slots[a].Sent, st.slots[b].Sent
	return sa < sb || sa == sb && st.seq[a] < st.seq[b]
}

func (st *Stream) push(i int32) {
	h := append(st.heap, i)
	for j := len(h) - 1; j > 0; {
		p := (j - 1) / 2
		if !st.less(h[j], h[p]) {
			break
		}
		h[j], h[p] = h[p], h[j]
		j = p
	}
	st.heap = h
}

func (st *Stream) pop() int32 {
	h := st.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for j := 0; ; {
		l := 2*j + 1
		if l >= len(h) {
			break
		}
		m := l
		if r := l + 1; r < len(h) && st.less(h[r], h[l]) {
			m = r
		}
		if !st.less(h[m], h[j]) {
			break
		}
		h[j], h[m] = h[m], h[j]
		j = m
	}
	st.heap = h
	return top
}

// idSet is the set of event ids seen, as a bitmap in pages of idPage ids:
// the engine numbers events from 1, so 10^8 events take about 12 MB.
type idSet struct {
	pages map[uint64]*[idPage / 64]uint64
	dup   uint64
	dups  bool
}

const idPage = 1 << 16

func (s *idSet) add(id uint64) {
	p := s.pages[id/idPage]
	if p == nil {
		p = new([idPage / 64]uint64)
		s.pages[id/idPage] = p
	}
	w, bit := (id%idPage)/64, uint64(1)<<(id%64)
	if p[w]&bit != 0 && !s.dups {
		s.dup, s.dups = id, true
	}
	p[w] |= bit
}

func (s *idSet) firstDup() (uint64, bool) { return s.dup, s.dups }

// ReadRecords reads everything of a history but its events, which it
// counts without decoding them (a Stream judges their lines): the faults,
// phases and sinks a streaming check needs before the first event, at the
// speed of the disk. n is the number of event lines.
func ReadRecords(name string, r io.Reader) (h *History, n int64, err error) {
	s := newLineState(name)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), MaxLine+1)
	for sc.Scan() {
		b := sc.Bytes()
		s.digest.line(b)
		if bytes.HasPrefix(b, eventPrefix) && s.records > 0 && s.pendingErr == nil {
			n++
			s.line++
			s.records++
			continue
		}
		if err := s.feed(b); err != nil {
			return nil, 0, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, 0, fmt.Errorf("%s:%d: %w", name, s.line+1, err)
	}
	h, err = s.finish()
	if err != nil {
		return nil, 0, err
	}
	return h, n, nil
}
