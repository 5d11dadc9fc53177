package history

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"sync"
)

// The chunked reader behind ReadFile.
//
// Read decodes line by line through a bufio.Scanner, growing h.Events by
// append. For a large file most of the time goes to decoding event lines,
// and each line is independent of the others once it is known to be a plain
// event, so readChunked reads the file in windows of GOMAXPROCS chunks cut
// at line ends, decodes the event lines of each chunk on its own goroutine
// straight into their final place in h.Events (pre-sized from the file size
// and the line length of the first window), and then replays the window in
// order through lineState: runs of decoded events are taken as they are,
// and every other line (the run header, other records, blank lines, lines
// the decoders reject) goes through lineState.feed exactly as in Read. So
// the header must still come first, errors name the same line, and a cut
// last line is tolerated as before.
//
// Event i of a chunk is decoded into the slot of its line (len(h.Events) at
// the start of the window + its line number in the window): slots of other
// lines stay empty, and the replay moves later events down over them. Lines
// fed to decodeLine append at len(h.Events), which is never past the slot
// of the line being replayed, so they never overwrite an event not yet
// moved.

// chunkBytes is the size of one goroutine's chunk (a window is GOMAXPROCS
// chunks). Tests make it small to put chunk and window edges everywhere.
var chunkBytes = 4 << 20

// special is a line of a chunk that is not a plainly decoded event.
type special struct {
	line int // within the chunk, from 0
	b    []byte
}

// chunk is one goroutine's share of a window.
type chunk struct {
	data     []byte
	lines    int // lines in data
	first    int // line number of data's first line within the window
	specials []special
	tooLong  bool
	cache    *internCache
}

// readChunked reads r (of size bytes, 0 when unknown) as Read would. ok is
// false, and nothing is returned, when a line may be too long for Read's
// scanner: the caller then reads again with Read, which reports it exactly.
func readChunked(name string, r io.Reader, size int64, chunkSize, procs int) (h *History, ok bool, err error) {
	bufSize := max(1, procs*chunkSize)
	if size > 0 && size < int64(bufSize) {
		bufSize = int(size) + 1 // a small file: one window, read to EOF at once
	}
	buf := make([]byte, bufSize)
	s := &lineState{name: name, h: &History{}}
	chunks := make([]chunk, procs)
	for i := range chunks {
		chunks[i].cache = internPool.Get().(*internCache)
		defer internPool.Put(chunks[i].cache)
	}
	carry := 0
	sized := false
	for eof := false; !eof; {
		n, rerr := io.ReadFull(r, buf[carry:])
		data := buf[:carry+n]
		switch rerr {
		case nil:
		case io.EOF, io.ErrUnexpectedEOF:
			eof = true
		default:
			return nil, true, fmt.Errorf("%s:%d: %w", name, s.line+1, rerr)
		}
		end := len(data)
		if !eof {
			end = bytes.LastIndexByte(data, '\n') + 1
			if end == 0 {
				if len(buf) > MaxLine {
					return nil, false, nil // a line too long for Read
				}
				// A line longer than the window: widen it.
				buf = append(buf, make([]byte, len(buf))...)
				carry = len(data)
				continue
			}
		}
		if !sized {
			sized = true
			if size > int64(len(data)) && end > 0 {
				// Events in the file ≈ size / bytes per line of this window.
				per := float64(end) / float64(max(1, bytes.Count(data[:end], []byte{'\n'})))
				s.h.Events = make([]Event, 0, int(float64(size)/per*1.02)+64)
			}
		}
		if !s.window(data[:end], chunks) {
			return nil, false, nil
		}
		if s.err != nil {
			return nil, true, s.err
		}
		carry = copy(buf, data[end:])
	}
	if len(s.h.Events) == 0 {
		s.h.Events = nil // as Read
	}
	h, err = s.finish()
	return h, true, err
}

// window decodes and replays the complete lines in data (every line ends in
// '\n' except perhaps the last line of the file). It returns false when a
// line may be too long for Read; an error ending the read is left in s.err.
func (s *lineState) window(data []byte, chunks []chunk) bool {
	if len(data) == 0 {
		return true
	}
	// Cut data into chunks at line ends.
	nc := 0
	lines := 0
	for start := 0; start < len(data); nc++ {
		end := len(data)
		if nc < len(chunks)-1 {
			if cut := start + (len(data)-start)/(len(chunks)-nc); cut < len(data) {
				if i := bytes.IndexByte(data[cut:], '\n'); i >= 0 {
					end = cut + i + 1
				}
			}
		}
		c := &chunks[nc]
		c.data, c.first, c.specials, c.tooLong = data[start:end], lines, c.specials[:0], false
		c.lines = bytes.Count(c.data, []byte{'\n'})
		if c.data[len(c.data)-1] != '\n' {
			c.lines++
		}
		lines += c.lines
		start = end
	}
	n0 := len(s.h.Events)
	if cap(s.h.Events) < n0+lines {
		s.h.Events = slices.Grow(s.h.Events, lines+lines/4)
	}
	slots := s.h.Events[n0 : n0+lines]
	var wg sync.WaitGroup
	for i := range nc {
		c := &chunks[i]
		if i == nc-1 {
			c.decode(slots[c.first : c.first+c.lines])
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.decode(slots[c.first : c.first+c.lines])
		}()
	}
	wg.Wait()
	for i := range nc {
		if chunks[i].tooLong {
			s.h.Events = s.h.Events[:n0]
			return false
		}
	}
	// Replay in order.
	all := s.h.Events[:n0+lines]
	for i := range nc {
		c := &chunks[i]
		next := 0 // first line of c not replayed yet
		for _, sp := range c.specials {
			if !s.take(all, n0+c.first+next, sp.line-next) {
				return true
			}
			if s.err = s.feed(sp.b); s.err != nil {
				return true
			}
			next = sp.line + 1
		}
		if !s.take(all, n0+c.first+next, c.lines-next) {
			return true
		}
	}
	return true
}

// take appends the n decoded events at all[from:] to h.Events, as lines;
// false when that ends the read (s.err).
func (s *lineState) take(all []Event, from, n int) bool {
	if s.err = s.events(n); s.err != nil {
		return false
	}
	at := len(s.h.Events)
	if at != from {
		copy(all[at:at+n], all[from:from+n])
	}
	s.h.Events = s.h.Events[:at+n]
	return true
}

// decode decodes the event lines of c into slots (one per line); every
// other line becomes a special.
func (c *chunk) decode(slots []Event) {
	data := c.data
	for l := 0; len(data) > 0; l++ {
		b := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			b, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if len(b) >= MaxLine-1 {
			c.tooLong = true
			return
		}
		if len(b) > 0 && b[len(b)-1] == '\r' { // as bufio.ScanLines
			b = b[:len(b)-1]
		}
		e := &slots[l]
		*e = Event{}
		if bytes.HasPrefix(b, eventPrefix) && decodeEventWith(c.cache, b, e) == nil {
			continue
		}
		c.specials = append(c.specials, special{l, b})
	}
}
