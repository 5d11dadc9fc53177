package rlverify

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/reports"
)

// spill keeps the first streaming pass's events in a temporary file for
// the second pass to read instead of decoding the history's JSON lines
// again, in one of two forms:
//   - compact (newSpill): the few fields the document's second pass reads
//     of each event (reports.Compact: send and receive times, the
//     instance, the key's number, the outcome), about 9–15 bytes an event
//     (varints, the send time as the difference from the previous
//     event's): 10^8 events, a 20 GB history, make about 1.3 GB;
//   - events (newEventSpill): whole events in history's binary form, for
//     checks that read the events a second time (checks.Streamer.Again),
//     about 20–31 bytes an event (one key; 10^5 keys), 2–3 GB for 10^8,
//     read back three to four times faster than their JSON lines are
//     decoded.
//
// Each record is its length and its bytes. The file is removed as soon as
// it is made where the system allows (it is read through the open file),
// else when the spill is closed, so it is not left behind. A spill that
// cannot be written (no temporary directory, a full disk) is given up: the
// second pass then decodes the history again, as before.
type spill struct {
	enc  *history.EventEncoder // whole events; nil: compact records
	f    *os.File
	name string // the file's name while it is still to be removed
	buf  []byte
	rec  []byte // a record being made
	n    int64
	last int64 // the previous event's send time
	err  error
	// flushAt is how many bytes it buffers before it writes (spillFlush;
	// less in tests).
	flushAt int
	// The records are made and written on a goroutine of their own
	// (write), which add hands copies of the events through a relay: the
	// first pass's own goroutine, which judges, is what the pass waits
	// on, and encoding and writing there made it about a tenth slower.
	// beside, if not nil, has each event there too, before its record is
	// made. The writer owns enc, buf, rec, last and err until join.
	events  *relay[seqEvent]
	written chan struct{}
	beside  func(*history.Event, uint64)
}

// seqEvent is an event with its file position.
type seqEvent struct {
	e   history.Event
	seq uint64
}

// spillFlush is how many bytes the spill buffers before it writes.
const spillFlush = 1 << 20

// newSpill makes a spill of doc's first pass, in compact records, in dir
// ("" for the system's temporary directory): the spill hands every event
// to doc.Add itself, on its writer, then keeps its compact form. Its
// error is kept in s.err, and s then writes nothing (and hands each event
// to doc.Add at add).
func newSpill(dir string, doc *reports.DocStream) *spill {
	s := openSpill(dir, doc.Add)
	s.start(func(it *seqEvent) []byte {
		c := doc.Compact(&it.e)
		r := s.rec[:0]
		r = binary.AppendVarint(r, c.Sent-s.last)
		r = binary.AppendVarint(r, c.Recv-c.Sent)
		r = binary.AppendVarint(r, int64(c.Instance))
		r = binary.AppendVarint(r, int64(c.Key))
		r = append(r, byte(c.Outcome))
		s.last = c.Sent
		return r
	})
	return s
}

// newEventSpill makes a spill of whole events in dir, as newSpill.
// beside, if not nil, has every event added too, in the same order: on
// the spill's writer, off the judging goroutine, or at add when the spill
// could not be opened. (The document's first pass goes there: the writer
// has its copy of the event anyway.)
func newEventSpill(dir string, beside func(*history.Event, uint64)) *spill {
	s := openSpill(dir, beside)
	s.enc = new(history.EventEncoder)
	s.start(func(it *seqEvent) []byte { return s.enc.AppendEvent(s.rec[:0], &it.e, it.seq) })
	return s
}

// start starts the writer of an open spill: for each event add hands
// over, beside, then the record record makes of it.
func (s *spill) start(record func(*seqEvent) []byte) {
	if s.err != nil {
		return
	}
	s.events = newRelay[seqEvent]()
	s.written = make(chan struct{})
	go func() {
		defer close(s.written)
		s.events.each(func(it *seqEvent) {
			if s.beside != nil {
				s.beside(&it.e, it.seq)
			}
			s.keep(record(it))
		})
		s.flush()
	}()
}

func openSpill(dir string, beside func(*history.Event, uint64)) *spill {
	s := &spill{flushAt: spillFlush, beside: beside}
	f, err := os.CreateTemp(dir, "rlverify-pass-*.bin")
	if err != nil {
		s.err = fmt.Errorf("spill: %w", err)
		return s
	}
	s.f, s.name = f, f.Name()
	if os.Remove(f.Name()) == nil {
		s.name = ""
	}
	s.buf = make([]byte, 0, 2*spillFlush)
	return s
}

// keepsEvents says whether the spill keeps whole events (replayEvents) rather
// than compact records (replay).
func (s *spill) keepsEvents() bool { return s.enc != nil }

// add keeps e, the event at file position seq.
func (s *spill) add(e *history.Event, seq uint64) {
	if s.events == nil { // not written
		if s.beside != nil {
			s.beside(e, seq)
		}
		return
	}
	*s.events.slot() = seqEvent{*e, seq}
	s.n++
}

// keep buffers the record r, and writes the buffer once it is full; after
// an error it keeps nothing.
func (s *spill) keep(r []byte) {
	s.rec = r
	if s.err != nil {
		return
	}
	s.buf = append(binary.AppendUvarint(s.buf, uint64(len(r))), r...)
	if len(s.buf) >= s.flushAt {
		s.flush()
	}
}

// join hands the writer what add has not handed over yet and waits until
// it has written everything.
func (s *spill) join() {
	if s.written == nil {
		return
	}
	s.events.close()
	<-s.written
	s.events, s.written = nil, nil
}

// flush writes what add has buffered.
func (s *spill) flush() {
	if s.err != nil || len(s.buf) == 0 {
		return
	}
	if _, err := s.f.Write(s.buf); err != nil {
		s.err = fmt.Errorf("spill: writing %s: %w", s.f.Name(), err)
	}
	s.buf = s.buf[:0]
}

// failed writes everything kept and says whether the spill could not be
// written whole: then replay would fail before it hands over any event.
func (s *spill) failed() bool {
	s.join()
	s.flush()
	return s.err != nil
}

// replay hands every event kept in a compact spill, in the order added,
// to add; it fails when the spill could not be written or read whole
// (after handing over the events before the fault). The records are read
// and decoded on a goroutine of their own, a batch ahead of add.
func (s *spill) replay(add func(reports.Compact)) error {
	if s.enc != nil {
		return errors.New("spill: replay of a spill of whole events")
	}
	var last int64
	return readBack(s, func(n int64, r []byte, c *reports.Compact) error {
		var v [4]int64
		at := 0
		for i := range v {
			x, k := binary.Varint(r[at:])
			if k <= 0 {
				return fmt.Errorf("spill: %s: record %d of %d is cut short", s.f.Name(), n+1, s.n)
			}
			v[i], at = x, at+k
		}
		if at != len(r)-1 {
			return fmt.Errorf("spill: %s: record %d of %d is not a compact event", s.f.Name(), n+1, s.n)
		}
		last += v[0]
		*c = reports.Compact{Sent: last, Recv: last + v[1], Instance: int(v[2]), Key: int32(v[3]), Outcome: history.Outcome(int8(r[at]))}
		return nil
	}, func(c *reports.Compact) { add(*c) })
}

// replayEvents hands every event kept in a spill of whole events, with
// its file position, in the order added, to each of add, as replay;
// beside, if not nil, has each event first, on the goroutine that reads
// and decodes them (the document's second pass goes there, beside the
// checks').
func (s *spill) replayEvents(beside func(*history.Event, uint64), add ...func(*history.Event, uint64)) error {
	if s.enc == nil {
		return errors.New("spill: replayEvents of a compact spill")
	}
	d := history.NewEventDecoder()
	return readBack(s, func(n int64, r []byte, it *seqEvent) (err error) {
		if it.seq, err = d.DecodeEvent(r, &it.e); err != nil {
			return fmt.Errorf("spill: %s: record %d of %d: %w", s.f.Name(), n+1, s.n, err)
		}
		if beside != nil {
			beside(&it.e, it.seq)
		}
		return nil
	}, func(it *seqEvent) {
		for _, a := range add {
			a(&it.e, it.seq)
		}
	})
}

// readBack reads s's records on a goroutine of its own, decoding each
// into a slot of a relay, and hands every slot to use in order; it
// returns the error that ended the reading, after the slots before it.
func readBack[T any](s *spill, decode func(n int64, rec []byte, slot *T) error, use func(*T)) error {
	r := newRelay[T]()
	var err error
	go func() {
		defer r.close()
		err = s.records(func(n int64, rec []byte) error {
			if err := decode(n, rec, r.slot()); err != nil {
				r.unslot()
				return err
			}
			return nil
		})
	}()
	r.each(use)
	return err
}

// records reads back every record kept, in the order added.
func (s *spill) records(each func(n int64, rec []byte) error) error {
	s.join()
	s.flush()
	if s.err != nil {
		return s.err
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("spill: %w", err)
	}
	buf := s.buf[:cap(s.buf)]
	have, at := 0, 0
	eof := false
	// more reads until buf[at:have] holds at least need bytes or the file
	// ends, moving what is left to the front (and growing buf for a
	// record longer than it).
	more := func(need int) error {
		if have-at >= need || eof {
			return nil
		}
		have = copy(buf, buf[at:have])
		at = 0
		if need > len(buf) {
			buf = append(buf[:have], make([]byte, need-have)...)
			buf = buf[:cap(buf)]
		}
		for have < len(buf) && have < need+s.flushAt {
			m, err := s.f.Read(buf[have:])
			have += m
			if errors.Is(err, io.EOF) {
				eof = true
				return nil
			}
			if err != nil {
				return fmt.Errorf("spill: reading %s: %w", s.f.Name(), err)
			}
			if m == 0 {
				return nil
			}
		}
		return nil
	}
	for n := int64(0); n < s.n; n++ {
		if err := more(binary.MaxVarintLen64); err != nil {
			return err
		}
		size, k := binary.Uvarint(buf[at:have])
		if k <= 0 || size > uint64(1<<31) {
			return fmt.Errorf("spill: %s: record %d of %d is cut short", s.f.Name(), n+1, s.n)
		}
		at += k
		if err := more(int(size)); err != nil {
			return err
		}
		if have-at < int(size) {
			return fmt.Errorf("spill: %s: record %d of %d is cut short", s.f.Name(), n+1, s.n)
		}
		if err := each(n, buf[at:at+int(size)]); err != nil {
			return err
		}
		at += int(size)
	}
	return nil
}

// close closes and, if it is still there, removes the spill's file.
func (s *spill) close() {
	s.join()
	if s.f == nil {
		return
	}
	s.f.Close()
	if s.name != "" {
		os.Remove(s.name)
	}
	s.f = nil
}
