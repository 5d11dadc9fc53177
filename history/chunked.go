package history

import (
	"bytes"
	"fmt"
	"io"
	"sync"
)

// The chunked reader behind ReadFile.
//
// Read decodes line by line through a bufio.Scanner, growing h.Events by
// append. For a large file most of the time goes to decoding event lines,
// and each line is independent of the others once it is known to be a plain
// event, so readChunked reads the file in windows of procs chunks cut at
// line ends, decodes the event lines of each chunk on its own goroutine
// straight into their final place in h.Events, and then replays the window
// in order through lineState: runs of decoded events are taken as they are,
// and every other line (the run header, other records, blank lines, lines
// the decoders reject) goes through lineState.feed exactly as in Read. So
// the header must still come first, errors name the same line, and a cut
// last line is tolerated as before.
//
// Memory follows the real events, never a guess from the first lines: a
// window holds at most maxWindowLines lines (each needs a slot in h.Events
// while it is decoded), and h.Events grows towards the file's estimated
// event count but never past four times the events actually read. So a
// file of blank lines or junk is read in the space of one window.
//
// Event i of a chunk is decoded into the slot of its line (len(h.Events) at
// the start of the window + its line number in the window): slots of other
// lines stay empty, and the replay moves later events down over them. Lines
// fed to decodeLine append at len(h.Events), which is never past the slot
// of the line being replayed, so they never overwrite an event not yet
// moved.

// chunkBytes is the size of one goroutine's chunk (a read fills procs
// chunks). Tests make it small to put chunk and window edges everywhere.
var chunkBytes = 4 << 20

// maxProcs bounds the chunks of a read, and so its buffer.
const maxProcs = 8

// maxWindowLines bounds the lines of a window: a read of blank lines is cut
// into windows of this many. Tests make it small.
var maxWindowLines = 1 << 16

// windowing is how a read cuts the file: procs chunks of chunk bytes a
// window, at most lines lines.
type windowing struct{ chunk, procs, lines int }

// special is a line of a chunk that is not a plainly decoded event, or a
// run of blank lines.
type special struct {
	line   int // within the chunk, from 0
	b      []byte
	blanks int // > 0: the blank lines line … line+blanks-1 (b unused)
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
	s := newLineState(name)
	s.size = size
	if ok, err := s.readWindows(r, windowing{chunk: chunkSize, procs: procs, lines: maxWindowLines}, nil); !ok || err != nil {
		return nil, ok, err
	}
	h, err = s.finish()
	return h, true, err
}

// readWindows reads r (of s.size bytes, 0 when unknown) window by window
// into s.h.Events, calling each (when not nil) after every window: it may
// take the window's events and leave s.h.Events empty (the streaming
// reader does). ok is false when a line may be too long for Read.
func (s *lineState) readWindows(r io.Reader, win windowing, each func() error) (ok bool, err error) {
	name, size := s.name, s.size
	chunkSize, procs := win.chunk, win.procs
	bufSize := max(1, procs*chunkSize)
	if size > 0 && size < int64(bufSize) {
		bufSize = int(size) + 1 // a small file: one window, read to EOF at once
	}
	buf := make([]byte, bufSize)
	chunks := make([]chunk, procs)
	for i := range chunks {
		chunks[i].cache = internPool.Get().(*internCache)
		defer internPool.Put(chunks[i].cache)
	}
	carry := 0
	for eof := false; !eof; {
		n, rerr := io.ReadFull(r, buf[carry:])
		data := buf[:carry+n]
		switch rerr {
		case nil:
		case io.EOF, io.ErrUnexpectedEOF:
			eof = true
		default:
			return true, fmt.Errorf("%s:%d: %w", name, s.line+1, rerr)
		}
		end := len(data)
		if !eof {
			end = bytes.LastIndexByte(data, '\n') + 1
			if end == 0 {
				if len(buf) > MaxLine {
					return false, nil // a line too long for Read
				}
				// A line longer than the window: widen it.
				buf = append(buf, make([]byte, len(buf))...)
				carry = len(data)
				continue
			}
		}
		for off := 0; off < end; {
			w := data[off:end]
			if cut := lineCut(w, win.lines); cut > 0 {
				w = w[:cut]
			}
			s.digest.lines(w)
			if !s.window(w, chunks) {
				return false, nil
			}
			if s.err != nil {
				return true, s.err
			}
			if each != nil {
				if err := each(); err != nil {
					return true, err
				}
			}
			off += len(w)
			s.consumed += int64(len(w))
		}
		carry = copy(buf, data[end:])
	}
	return true, nil
}

// lineCut returns the length of the first n lines of data when it has more
// than n, else 0.
func lineCut(data []byte, n int) int {
	nl := []byte{'\n'}
	if bytes.Count(data, nl) < n {
		return 0 // at most n lines, counting a last one without '\n'
	}
	// The next `left` bytes hold at most `left` line ends: count them in
	// blocks (fast for short lines), then step to the last few.
	at, left := 0, n
	for left > 16 {
		c := bytes.Count(data[at:at+left], nl)
		if c == left {
			at += left
			left = 0
			break
		}
		at, left = at+left, left-c
	}
	for ; left > 0; left-- {
		at += bytes.IndexByte(data[at:], '\n') + 1
	}
	if at == len(data) {
		return 0
	}
	return at
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
	s.reserve(n0+lines, int64(len(data)))
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
			if sp.blanks > 0 {
				if s.err = s.blankLines(sp.blanks); s.err != nil {
					return true
				}
				next = sp.line + sp.blanks
				continue
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

// reserve makes room for need events in h.Events before a window of
// window bytes is decoded. It grows towards the events the file holds at
// the density seen so far (so a regular file rarely moves its events), but
// never past four times the events read: a file of events and then blank
// lines or junk, or an unknown size, cannot make it take memory from a
// guess.
func (s *lineState) reserve(need int, window int64) {
	h := s.h
	if need <= cap(h.Events) {
		return
	}
	estimate := 2 * cap(h.Events)
	if s.size > 0 {
		estimate = max(estimate, int(float64(need)*float64(s.size)/float64(s.consumed+window)))
	}
	size := max(need, min(estimate, 4*len(h.Events)))
	if len(h.Events) == 0 {
		// A stream's window (or a read's first): a quarter more room, so
		// that the window, once the stream hands it back to be decoded
		// into again, holds the next window's lines too (their count
		// varies with the lines' lengths).
		size = max(size, need+need/4)
	}
	grown := make([]Event, len(h.Events), size)
	// In steps: the copy of a slice of hundreds of megabytes cannot be
	// preempted, and a garbage collection waiting for it spun in preemption
	// signals for a third of the read (pprof, 10^6 events).
	for at := 0; at < len(grown); at += copyStep {
		copy(grown[at:min(at+copyStep, len(grown))], h.Events[at:])
	}
	h.Events = grown
}

// copyStep is how many events reserve moves at once (about 5 MB).
const copyStep = 1 << 14

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
// other line becomes a special, a run of blank lines one special.
func (c *chunk) decode(slots []Event) {
	data := c.data
	for l := 0; len(data) > 0; l++ {
		if data[0] == '\n' && len(data) > 1 && data[1] == '\n' {
			// A run of empty lines, taken at once.
			k := 2
			for k < len(data) && data[k] == '\n' {
				k++
			}
			c.addBlanks(l, k)
			l += k - 1
			data = data[k:]
			continue
		}
		b := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			b, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if len(b) >= MaxLine { // Read decides
			c.tooLong = true
			return
		}
		if len(b) > 0 && b[len(b)-1] == '\r' { // as bufio.ScanLines
			b = b[:len(b)-1]
		}
		if bytes.HasPrefix(b, eventPrefix) {
			e := &slots[l]
			*e = Event{}
			if decodeEventWith(c.cache, b, e) == nil {
				continue
			}
		} else if len(bytes.TrimSpace(b)) == 0 { // blank, as lineState.feed
			c.addBlanks(l, 1)
			continue
		}
		c.specials = append(c.specials, special{line: l, b: b})
	}
}

// addBlanks records n blank lines from line l, joining them to a run of
// blank lines just before.
func (c *chunk) addBlanks(l, n int) {
	if k := len(c.specials); k > 0 && c.specials[k-1].blanks > 0 && c.specials[k-1].line+c.specials[k-1].blanks == l {
		c.specials[k-1].blanks += n
		return
	}
	c.specials = append(c.specials, special{line: l, blanks: n})
}
