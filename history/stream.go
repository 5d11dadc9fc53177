package history

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
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
// been read, or until it holds MaxHeld events, then passes it on; an
// event that comes further out of order than that (its send time before
// one already passed on) ends the read with a *ReorderError instead of
// being passed on out of order. The events held stay where they were
// decoded, in the windows of the file, and the stream hands a window back
// to be decoded into once it has passed all its events on, or once the
// windows held have room for more than twice MaxHeld events (then the
// few events held of the earliest are copied out: a file far out of
// order can hold one event of each of many windows). So the memory is at
// most the windows that hold the events sent within one ReorderBound or
// MaxHeld events (about 70 MB by default, twice that at worst), as many
// spare, and one window being decoded, whatever the length of the run.
//
// Every line is judged as Read judges it (the same lineState): the same
// errors on the same lines, a cut last line tolerated, the digest checked.
// The run header, faults, sinks, phases, samples and end record are kept
// (they are few) and given by History once the events are exhausted.

// DefaultMaxHeld bounds the events a Stream holds back when none is given:
// about 70 MB of events, what a run at 50,000 requests/s has in flight
// within the engine's default 5 s timeout. (Every event held is written
// once and read once much later: a larger bound costs cache misses too.)
const DefaultMaxHeld = 1 << 18

// DefaultReorderBound is the reorder bound of a Stream when none is given:
// twice the engine's default request timeout (5 s), since an event is
// written at most its own latency (the timeout at worst) after events sent
// after it, plus the writer's buffering.
const DefaultReorderBound = 10 * time.Second

// ReorderError says an event came later in the file than the reorder
// bound allows: events sent after it had already been passed on.
type ReorderError struct {
	Source string
	ID     uint64
	// Sent is the event's send time; Passed the send time of the latest
	// event already passed on; Bound the stream's reorder bound.
	Sent, Passed int64
	Bound        time.Duration
}

func (e *ReorderError) Error() string {
	return fmt.Sprintf("%s: event %d (sent at %s) comes after events sent up to %s later (at %s) were passed on: it is further out of send order than the reorder bound %s allows; give a larger bound or read the whole history into memory",
		e.Source, e.ID, time.Duration(e.Sent), time.Duration(e.Passed-e.Sent), time.Duration(e.Passed), e.Bound)
}

// StreamOptions tune a Stream. The zero value is ready to use.
type StreamOptions struct {
	// ReorderBound is how far (by send time) an event may come after
	// events sent later; DefaultReorderBound when zero.
	ReorderBound time.Duration
	// MaxHeld is the most events held back at once, DefaultMaxHeld when
	// zero: past it the earliest held event is passed on even before its
	// ReorderBound has passed, so the memory stays bounded at any rate.
	MaxHeld int
	// Decoders is how many goroutines decode a window, each its own chunk
	// of ChunkBytes; WindowLines bounds the lines of a window. Zero: one
	// per CPU (at most 8), 4 MB and 65,536 lines, the fastest read. The
	// windows (the one being decoded, those holding events not passed on
	// yet, as many spare) are most of a stream's memory: tens of MB on two
	// CPUs (about 15 MB a window). A caller short of memory gives one
	// decoder, a smaller chunk and fewer lines (LeanStreamOptions).
	Decoders, ChunkBytes, WindowLines int
}

// LeanStreamOptions read with one decoder and windows of at most 256 KB
// and 2,048 lines: a few MB for the windows, where the default's are
// tens of MB; one decoder is slower where other CPUs are idle (10^6 events
// read alone: 0.37 s against 0.26 s at best for the default on two CPUs).
// The attack judges its own history with them (its memory while judging
// stays near its memory while sending).
func LeanStreamOptions(reorder time.Duration) StreamOptions {
	return StreamOptions{ReorderBound: reorder, Decoders: 1, ChunkBytes: 256 << 10, WindowLines: 2048}
}

// Stream reads a history's events one at a time, in send order (equal
// send times by receive time, then in file order: the order of the
// checks' decision intervals). Use it as a bufio.Scanner: Next, Event, and
// Err when Next returns false; History then holds everything but the
// events. Close it when abandoning it before the end. A Stream is not
// safe for concurrent use.
//
// The file is decoded on all CPUs (the chunked reader's windows) in a
// goroutine of its own, one window ahead of the events handed out, so the
// caller's work on the events overlaps the reading.
type Stream struct {
	name    string
	bound   int64
	maxHeld int
	win     windowing
	eof     bool
	err     error
	h       *History // set at the end

	// batches brings the decoded events of each window; back returns the
	// buffer; done ends the reading goroutine early; result is its end.
	batches chan []Event
	back    chan []Event
	done    chan struct{}
	result  chan streamEnd
	closed  bool

	// Events in send order so far are queued in fifo, where they were
	// decoded: in the windows of wins, which go back to the decoder
	// (through spare) once the fifo has passed their events on. The spare
	// windows are at most as many as those held, and one: as many as the
	// events held span (then the decoder rarely needs a new one), but not
	// those of a moment that held many more. The other events are copied
	// into slots, ordered by (Sent, Recv, seq) in heap.
	fifo  queue
	wins  []heldWindow
	spare [][]Event
	// pinned is the room (in events) of the windows in wins; past
	// pinLimit the events the fifo holds of the earliest are copied into
	// slots and the window let go (see unpin).
	pinned, pinLimit int
	unpinned         int // windows let go so (for tests)
	slots            []Event
	seq              []uint64
	free             []int32
	heap             []int32
	next             uint64
	// cur is the event last passed on: slots[cur] (-1: none, or the
	// fifo's, curFifo).
	cur     int32
	curFifo *Event
	// maxSent is the latest send time read; passed and passedRecv the
	// send and receive times of the last event passed on, curSeq its
	// position among the file's events.
	maxSent, passed, passedRecv int64
	curSeq                      uint64
	started                     bool
	n                           int64
	ids                         idSet
}

// heldWindow is a window of decoded events some of which the fifo holds:
// its events up to the fifo's end-th push.
type heldWindow struct {
	evs []Event
	end uint64
}

type streamEnd struct {
	h   *History
	err error
}

// NewStream reads the history in r (name is used in messages).
func NewStream(name string, r io.Reader, o StreamOptions) *Stream {
	b := o.ReorderBound
	if b <= 0 {
		b = DefaultReorderBound
	}
	mh := o.MaxHeld
	if mh <= 0 {
		mh = DefaultMaxHeld
	}
	st := &Stream{name: name, bound: int64(b), maxHeld: mh, cur: -1, win: windowing{chunk: chunkBytes, procs: min(runtime.GOMAXPROCS(0), maxProcs), lines: maxWindowLines}, ids: idSet{pages: map[uint64]*[idPage / 64]uint64{}},
		batches: make(chan []Event), back: make(chan []Event, 1), done: make(chan struct{}), result: make(chan streamEnd, 1)}
	if o.Decoders > 0 {
		st.win.procs = min(o.Decoders, maxProcs)
	}
	if o.ChunkBytes > 0 {
		st.win.chunk = o.ChunkBytes
	}
	if o.WindowLines > 0 {
		st.win.lines = o.WindowLines
	}
	// The fifo's events, dense in their windows, take about MaxHeld
	// events' room and the window they end in (each with a quarter more
	// room, reserve's); twice that is never reached in order.
	st.pinLimit = 2*mh + 3*st.win.lines
	st.back <- nil
	go st.read(r)
	return st
}

// read decodes r window by window, handing each window's events over.
func (st *Stream) read(r io.Reader) {
	s := newLineState(st.name)
	ok, err := s.readWindows(r, st.win, func() error {
		select {
		case st.batches <- s.h.Events:
		case <-st.done:
			return errStreamClosed
		}
		select {
		case b := <-st.back:
			s.h.Events = b[:0]
		case <-st.done:
			return errStreamClosed
		}
		return nil
	})
	var h *History
	switch {
	case err != nil:
	case !ok:
		// readChunked's caller would let Read report the line exactly;
		// the events before it are passed on already.
		err = fmt.Errorf("%s:%d: %w: a line of %d bytes or more", st.name, s.line+1, bufio.ErrTooLong, MaxLine)
	default:
		if len(s.h.Events) > 0 { // none: each took them
			err = fmt.Errorf("%s: events left after the last window", st.name)
			break
		}
		h, err = s.finish()
	}
	st.result <- streamEnd{h, err}
	close(st.batches)
}

var errStreamClosed = errors.New("history: the stream was closed")

// Close stops the reading when the stream is abandoned before its end,
// and returns once the reading goroutine has ended.
func (st *Stream) Close() {
	if st.closed {
		return
	}
	st.closed = true
	close(st.done)
	if !st.eof {
		for range st.batches {
		}
		<-st.result
		st.eof = true
	}
}

// Next advances to the next event in send order; false at the end of the
// events or on an error (see Err).
func (st *Stream) Next() bool {
	if st.cur >= 0 {
		st.free = append(st.free, st.cur)
		st.cur = -1
	}
	st.curFifo = nil
	for st.err == nil && !st.closed {
		st.recycle()
		if ok, fromHeap := st.ready(); ok {
			if fromHeap {
				st.cur = st.pop()
				e := &st.slots[st.cur]
				st.passed, st.passedRecv, st.curSeq = e.Sent, e.Recv, st.seq[st.cur]
			} else {
				st.curFifo, st.curSeq = st.fifo.pop()
				st.passed, st.passedRecv = st.curFifo.Sent, st.curFifo.Recv
			}
			st.started = true
			return true
		}
		if st.eof {
			return false
		}
		st.fill()
	}
	return false
}

// recycle makes spare the windows whose events are all passed on (none is
// in use between Next's start and its return): they can be decoded into
// again.
func (st *Stream) recycle() {
	for len(st.wins) > 0 && st.wins[0].end <= st.fifo.popped {
		if len(st.spare) <= len(st.wins) {
			st.spare = append(st.spare, st.wins[0].evs)
		}
		st.pinned -= cap(st.wins[0].evs)
		st.wins[0] = heldWindow{}
		st.wins = st.wins[1:]
	}
}

// unpin bounds the windows held whatever the order of the file. The fifo
// holds events in the windows they were decoded into, and it can hold a
// few events of each of many windows: a file where one event in each
// window was sent ahead of the rest, the others a moment earlier (copied
// into slots and passed on first), would otherwise keep every window
// until the MaxHeld-th: gigabytes. Past pinLimit, the fifo's events of
// the earliest window go into slots, as copies, and the window goes back
// to be decoded into. In order, or as the engine writes, that never
// happens (TestStreamLetsSparseWindowsGo).
func (st *Stream) unpin() {
	for st.pinned > st.pinLimit && len(st.wins) > 1 {
		for st.fifo.popped < st.wins[0].end {
			e, q := st.fifo.pop()
			st.push(st.slot(e, q))
		}
		st.unpinned++
		st.recycle()
	}
}

// slot copies e, the seq-th event of the file, into a free slot.
func (st *Stream) slot(e *Event, seq uint64) int32 {
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
	st.seq[i] = seq
	return i
}

// ready says whether the earliest event held may be passed on, and
// whether it is the heap's.
func (st *Stream) ready() (ok, fromHeap bool) {
	hasF, hasH := st.fifo.n > 0, len(st.heap) > 0
	if !hasF && !hasH {
		return false, false
	}
	var sent int64
	if hasF {
		f, q := st.fifo.front()
		sent = f.Sent
		fromHeap = hasH && st.less(&st.slots[st.heap[0]], st.seq[st.heap[0]], f, q)
	} else {
		fromHeap = true
	}
	if fromHeap {
		sent = st.slots[st.heap[0]].Sent
	}
	return st.eof || sent <= st.maxSent-st.bound || st.Held() > st.maxHeld, fromHeap
}

// fill takes the next window's events, or the end of the file.
func (st *Stream) fill() {
	evs, more := <-st.batches
	if !more {
		st.eof = true
		end := <-st.result
		if end.err != nil {
			st.err = end.err
			return
		}
		if st.ids.ndups > 0 {
			st.err = fmt.Errorf("%s: %w: %s", st.name, ErrFormat, describeDuplicatesN(st.ids.dups, st.ids.ndups))
			return
		}
		end.h.Events = nil
		st.h = end.h
		return
	}
	pushed := st.fifo.pushed
	for i := range evs {
		e := &evs[i]
		if st.started && (e.Sent < st.passed || e.Sent == st.passed && e.Recv < st.passedRecv) {
			st.err = &ReorderError{Source: st.name, ID: e.ID, Sent: e.Sent, Passed: st.passed, Bound: time.Duration(st.bound)}
			break
		}
		st.ids.add(e.ID)
		st.n++
		st.maxSent = max(st.maxSent, e.Sent)
		if st.fifo.n == 0 || e.Sent > st.fifo.lastSent || e.Sent == st.fifo.lastSent && e.Recv >= st.fifo.lastRecv {
			st.fifo.push(e, st.next)
		} else {
			st.push(st.slot(e, st.next))
		}
		st.next++
	}
	// The decoder decodes the next window into a window whose events are
	// all passed on, or into a new one (nil): evs is held until the fifo
	// has passed its events on. The decoder zeroes each event before
	// decoding into it.
	var next []Event
	switch {
	case st.fifo.pushed == pushed:
		// The fifo holds none of its events (blank lines, junk, events
		// out of order, copied): decode into it again at once.
		next = evs
	default:
		st.wins = append(st.wins, heldWindow{evs, st.fifo.pushed})
		st.pinned += cap(evs)
		st.unpin()
		if n := len(st.spare); n > 0 {
			next, st.spare = st.spare[n-1], st.spare[:n-1]
		}
	}
	st.back <- next
	if st.err != nil {
		st.Close()
	}
}

// Seq is the position of the current event among the file's events (0
// for the first event line): the file order the in-memory checks keep.
func (st *Stream) Seq() uint64 { return st.curSeq }

// Event is the event Next moved to, valid until the next call of Next.
func (st *Stream) Event() *Event {
	if st.curFifo != nil {
		return st.curFifo
	}
	return &st.slots[st.cur]
}

// Err is the error that ended the read, nil at a clean end. Events passed
// on before an error are part of a history that turned out unreadable:
// judge nothing from them.
func (st *Stream) Err() error { return st.err }

// Events is how many events have been read so far.
func (st *Stream) Events() int64 { return st.n }

// Held is how many events the stream holds back now (for tests and
// benchmarks of its memory).
func (st *Stream) Held() int { return st.fifo.n + len(st.heap) }

// History is the history without its events, once Next has returned
// false without an error (nil before).
func (st *Stream) History() *History { return st.h }

// less orders events by send time, then receive time (as the checks order
// decision intervals), then file order.
func (st *Stream) less(a *Event, qa uint64, b *Event, qb uint64) bool {
	if a.Sent != b.Sent {
		return a.Sent < b.Sent
	}
	if a.Recv != b.Recv {
		return a.Recv < b.Recv
	}
	return qa < qb
}

func (st *Stream) lessSlot(a, b int32) bool {
	return st.less(&st.slots[a], st.seq[a], &st.slots[b], st.seq[b])
}

func (st *Stream) push(i int32) {
	h := append(st.heap, i)
	for j := len(h) - 1; j > 0; {
		p := (j - 1) / 2
		if !st.lessSlot(h[j], h[p]) {
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
		if r := l + 1; r < len(h) && st.lessSlot(h[r], h[l]) {
			m = r
		}
		if !st.lessSlot(h[m], h[j]) {
			break
		}
		h[j], h[m] = h[m], h[j]
		j = m
	}
	st.heap = h
	return top
}

// queue is a FIFO of events in send order, as pointers to where they were
// decoded (the windows the stream holds): copying each event into the
// queue took a tenth of the judging goroutine's time. The pointers are
// in a ring that grows to the most events held at once.
type queue struct {
	ring []queued // a power of two long
	head int
	n    int
	// pushed and popped count the events ever pushed and popped.
	pushed, popped uint64
	// lastSent and lastRecv are the times of the last event pushed.
	lastSent, lastRecv int64
}

type queued struct {
	e   *Event
	seq uint64
}

func (q *queue) push(e *Event, seq uint64) {
	if q.n == len(q.ring) {
		ring := make([]queued, max(1024, 2*len(q.ring)))
		for i := range q.n {
			ring[i] = q.ring[(q.head+i)&(len(q.ring)-1)]
		}
		q.ring, q.head = ring, 0
	}
	q.ring[(q.head+q.n)&(len(q.ring)-1)] = queued{e, seq}
	q.n++
	q.pushed++
	q.lastSent, q.lastRecv = e.Sent, e.Recv
}

func (q *queue) front() (*Event, uint64) {
	it := &q.ring[q.head]
	return it.e, it.seq
}

// pop takes the front event; it stays valid until its window goes back
// to the decoder (Next).
func (q *queue) pop() (*Event, uint64) {
	it := q.ring[q.head]
	q.ring[q.head] = queued{}
	q.head = (q.head + 1) & (len(q.ring) - 1)
	q.n--
	q.popped++
	return it.e, it.seq
}

// idSet is the set of event ids seen, as a bitmap in pages of idPage ids:
// the engine numbers events from 1, so 10^8 events take about 12 MB. The
// ids seen twice are a second such set; dups are the least of them (as
// many as a message names) and ndups how many there are, as Read says.
type idSet struct {
	pages map[uint64]*[idPage / 64]uint64
	// last is the page of lastID (the ids of a file mostly follow on).
	last   *[idPage / 64]uint64
	lastID uint64
	twice  map[uint64]*[idPage / 64]uint64
	dups   []uint64
	ndups  int
}

const idPage = 1 << 16

func (s *idSet) add(id uint64) {
	p := s.last
	if p == nil || id/idPage != s.lastID {
		if p = s.pages[id/idPage]; p == nil {
			p = new([idPage / 64]uint64)
			s.pages[id/idPage] = p
		}
		s.last, s.lastID = p, id/idPage
	}
	w, bit := (id%idPage)/64, uint64(1)<<(id%64)
	if p[w]&bit != 0 {
		s.addTwice(id, w, bit)
	}
	p[w] |= bit
}

func (s *idSet) addTwice(id, w, bit uint64) {
	if s.twice == nil {
		s.twice = map[uint64]*[idPage / 64]uint64{}
	}
	p := s.twice[id/idPage]
	if p == nil {
		p = new([idPage / 64]uint64)
		s.twice[id/idPage] = p
	}
	if p[w]&bit != 0 {
		return // a third time: counted already
	}
	p[w] |= bit
	s.ndups++
	i, _ := slices.BinarySearch(s.dups, id)
	if i < shownDuplicates {
		s.dups = slices.Insert(s.dups, i, id)
		s.dups = s.dups[:min(len(s.dups), shownDuplicates)]
	}
}

// ReadRecords reads everything of a history but its events, which it
// counts without decoding them (a Stream judges their lines): the faults,
// phases and sinks a streaming check needs before the first event, at the
// speed of the disk. n is the number of event lines.
func ReadRecords(name string, r io.Reader) (h *History, n int64, err error) {
	return readRecords(name, r, true)
}

// ScanRecords is ReadRecords without the digest: the History's Integrity
// is left empty (and ModifiedShards nil), for a caller that only decides
// from the records and then reads the events through a Stream, whose
// History says it. It saves hashing the file (about a quarter of
// ReadRecords' time).
func ScanRecords(name string, r io.Reader) (h *History, n int64, err error) {
	return readRecords(name, r, false)
}

func readRecords(name string, r io.Reader, digest bool) (h *History, n int64, err error) {
	s := newLineState(name)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), MaxLine+1)
	for sc.Scan() {
		b := sc.Bytes()
		if digest {
			s.digest.line(b)
		}
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
	if !digest {
		h.Integrity, h.ModifiedShards = "", nil
	}
	return h, n, nil
}
