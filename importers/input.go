package importers

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
)

// Caps on what an import reads. The input is streamed, never read whole:
// memory grows with the requests kept (one event each), not with the
// input's size (a HAR's response bodies, k6's other metrics).
const (
	// MaxInputBytes bounds the input after decompression (/dev/zero, a
	// gzip bomb).
	MaxInputBytes = 16 << 30
	// MaxLineBytes bounds one line of vegeta's or k6's JSON lines.
	MaxLineBytes = 1 << 20
	// MaxRequests bounds the requests of one import (each is kept until
	// the history is written).
	MaxRequests = 5_000_000
)

// input is the stream a parser reads: decompressed, capped, with its
// leading white space skipped (and counted, so line numbers stay right).
type input struct {
	name string
	r    *bufio.Reader
	// skipped bytes and lines of leading white space.
	skipped, skippedLines int64
}

// capReader ends the stream with an error after limit bytes.
type capReader struct {
	r     io.Reader
	n     int64
	limit int64
	name  string
	what  string
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.n >= c.limit {
		return 0, inputErr("%s: more than %d bytes%s: not a results file rlverify imports (the cap is importers.MaxInputBytes)", c.name, c.limit, c.what)
	}
	if int64(len(p)) > c.limit-c.n {
		p = p[:c.limit-c.n+1]
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.limit {
		return n, inputErr("%s: more than %d bytes%s: not a results file rlverify imports (the cap is importers.MaxInputBytes)", c.name, c.limit, c.what)
	}
	return n, err
}

// openInput decompresses r as it is read when it is gzip (k6 writes
// json=FILE.gz compressed), caps it at limit bytes, and skips leading
// white space; empty reports an input of white space only.
func openInput(name string, r io.Reader, limit int64) (in *input, empty bool, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var src io.Reader = br
	what := ""
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, false, inputErr("%s: gzip: %v", name, err)
		}
		src, what = &gzipErrs{zr, name}, " after decompression"
	}
	in = &input{name: name, r: bufio.NewReaderSize(&capReader{r: src, limit: limit, name: name, what: what}, 64<<10)}
	for {
		b, err := in.r.ReadByte()
		if errors.Is(err, io.EOF) {
			return in, true, nil
		}
		if err != nil {
			return nil, false, readErr(name, err)
		}
		switch b {
		case ' ', '\t', '\r', '\n':
			in.skipped++
			if b == '\n' {
				in.skippedLines++
			}
			continue
		}
		_ = in.r.UnreadByte()
		return in, false, nil
	}
}

// gzipErrs names a decompression error as one of the input.
type gzipErrs struct {
	r    io.Reader
	name string
}

func (g *gzipErrs) Read(p []byte) (int, error) {
	n, err := g.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		var ie *InputError
		if !errors.As(err, &ie) {
			err = inputErr("%s: gzip: %v", g.name, err)
		}
	}
	return n, err
}

// readErr wraps a read error: one about the input's content stays an
// *InputError.
func readErr(name string, err error) error {
	var ie *InputError
	if errors.As(err, &ie) {
		return err
	}
	return fmt.Errorf("importers: read %s: %w", name, err)
}

// eachLine calls f with every non-blank line of in and its number (from
// 1), one line in memory at a time; a line longer than MaxLineBytes is an
// error.
func (in *input) eachLine(f func(n int, line []byte) error) error {
	var long []byte
	for n := int(in.skippedLines) + 1; ; n++ {
		chunk, err := in.r.ReadSlice('\n')
		line := chunk
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], chunk...)
			for errors.Is(err, bufio.ErrBufferFull) {
				if len(long) > MaxLineBytes {
					return inputErr("%s:%d: a line longer than %d bytes: not a results file rlverify imports", in.name, n, MaxLineBytes)
				}
				chunk, err = in.r.ReadSlice('\n')
				long = append(long, chunk...)
			}
			line = long
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return readErr(in.name, err)
		}
		if len(line) > MaxLineBytes {
			return inputErr("%s:%d: a line longer than %d bytes: not a results file rlverify imports", in.name, n, MaxLineBytes)
		}
		if t := trimSpace(line); len(t) > 0 {
			if ferr := f(n, t); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
	}
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r' || b[len(b)-1] == '\n') {
		b = b[:len(b)-1]
	}
	return b
}

// lineTracker counts the lines of what a JSON decoder reads and keeps the
// last window of it, so a decoding error at an offset can still be named
// by line and column without keeping the input.
type lineTracker struct {
	r io.Reader
	// base is the offset of window[0]; lines counts the newlines before it.
	base, lines int64
	window      []byte
}

const trackWindow = 1 << 20

func (t *lineTracker) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.window = append(t.window, p[:n]...)
	if over := len(t.window) - trackWindow; over > 2*trackWindow {
		for _, b := range t.window[:over] {
			if b == '\n' {
				t.lines++
			}
		}
		t.base += int64(over)
		t.window = append(t.window[:0], t.window[over:]...)
	}
	return n, err
}

// where names the byte just before off: "line 3, column 7", or "byte N"
// when it has left the window.
func (t *lineTracker) where(off int64) string {
	at := max(off-1, 0) - t.base
	if at < 0 || at > int64(len(t.window)) {
		return fmt.Sprintf("byte %d", off)
	}
	line, col := t.lines+1, int64(1)
	for _, b := range t.window[:at] {
		if b == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Sprintf("line %d, column %d", line, col)
}
