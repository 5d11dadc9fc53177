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

// spill keeps the first streaming pass's events in the few bytes the
// second pass reads of each (reports.Compact: send and receive times, the
// instance, the key's number, the outcome), in a temporary file, so that
// the second pass reads that file instead of decoding the history's JSON
// lines again. An event takes about 8–14 bytes (varints, the send time as
// the difference from the previous event's): 10^8 events, a 20 GB
// history, make a spill of about 1.2 GB. The file is removed as soon as it
// is made where the system allows (it is read through the open file), else
// when the spill is closed, so it is not left behind. A spill that cannot
// be written (no temporary directory, a full disk) is given up: the second
// pass then decodes the history again, as before.
type spill struct {
	doc  *reports.DocStream
	f    *os.File
	name string // the file's name while it is still to be removed
	buf  []byte
	n    int64
	last int64 // the previous event's send time
	err  error
	// flushAt is how many bytes it buffers before it writes (spillFlush;
	// less in tests).
	flushAt int
}

// spillFlush is how many bytes the spill buffers before it writes.
const spillFlush = 1 << 20

// spillMaxRecord is the longest record: four varints of at most 10 bytes
// and the outcome.
const spillMaxRecord = 4*binary.MaxVarintLen64 + 1

// newSpill makes a spill of doc's first pass in dir ("" for the system's
// temporary directory); its error is kept in s.err, and s then writes
// nothing.
func newSpill(dir string, doc *reports.DocStream) *spill {
	s := &spill{doc: doc, flushAt: spillFlush}
	f, err := os.CreateTemp(dir, "rlverify-pass-*.bin")
	if err != nil {
		s.err = fmt.Errorf("spill: %w", err)
		return s
	}
	s.f, s.name = f, f.Name()
	if os.Remove(f.Name()) == nil {
		s.name = ""
	}
	s.buf = make([]byte, 0, spillFlush+spillMaxRecord)
	return s
}

// add keeps e, which doc.Add has just had.
func (s *spill) add(e *history.Event, _ uint64) {
	if s.err != nil {
		return
	}
	c := s.doc.Compact(e)
	b := s.buf
	b = binary.AppendVarint(b, c.Sent-s.last)
	b = binary.AppendVarint(b, c.Recv-c.Sent)
	b = binary.AppendVarint(b, int64(c.Instance))
	b = binary.AppendVarint(b, int64(c.Key))
	b = append(b, byte(c.Outcome))
	s.last = c.Sent
	s.n++
	s.buf = b
	if len(b) >= s.flushAt {
		s.flush()
	}
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

// failed flushes the spill and says whether it could not be written
// whole: then replay would fail before it hands over any event.
func (s *spill) failed() bool {
	s.flush()
	return s.err != nil
}

// replay hands every event kept, in the order added, to add; it fails
// when the spill could not be written or read whole.
func (s *spill) replay(add func(reports.Compact)) error {
	s.flush()
	if s.err != nil {
		return s.err
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("spill: %w", err)
	}
	buf := s.buf[:min(cap(s.buf), s.flushAt+spillMaxRecord)]
	have, at := 0, 0
	eof := false
	var last int64
	for n := int64(0); n < s.n; n++ {
		if have-at < spillMaxRecord && !eof {
			have = copy(buf, buf[at:have])
			at = 0
			for have < len(buf) {
				m, err := s.f.Read(buf[have:])
				have += m
				if errors.Is(err, io.EOF) {
					eof = true
					break
				}
				if err != nil {
					return fmt.Errorf("spill: reading %s: %w", s.f.Name(), err)
				}
				if m == 0 {
					break
				}
			}
		}
		var c reports.Compact
		var v [4]int64
		for i := range v {
			x, k := binary.Varint(buf[at:have])
			if k <= 0 {
				return fmt.Errorf("spill: %s: record %d of %d is cut short", s.f.Name(), n+1, s.n)
			}
			v[i], at = x, at+k
		}
		if at >= have {
			return fmt.Errorf("spill: %s: record %d of %d is cut short", s.f.Name(), n+1, s.n)
		}
		c.Outcome = history.Outcome(int8(buf[at]))
		at++
		last += v[0]
		c.Sent, c.Recv, c.Instance, c.Key = last, last+v[1], int(v[2]), int32(v[3])
		add(c)
	}
	return nil
}

// close closes and, if it is still there, removes the spill's file.
func (s *spill) close() {
	if s.f == nil {
		return
	}
	s.f.Close()
	if s.name != "" {
		os.Remove(s.name)
	}
	s.f = nil
}
