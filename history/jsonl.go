package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"unicode/utf8"
)

// Writer streams a history as JSON lines. It is safe for concurrent use.
// Nothing reaches the file until Flush or Close, or until its buffer fills:
// the engine flushes regularly so an interrupted run loses at most the
// requests of the last flush interval, and on SIGINT it flushes everything.
type Writer struct {
	mu     sync.Mutex
	w      *bufio.Writer
	closer io.Closer
	buf    []byte
	n      int64
	err    error
}

// NewWriter writes to w; Close closes w when it is an io.Closer.
func NewWriter(w io.Writer) *Writer {
	hw := &Writer{w: bufio.NewWriterSize(w, 256<<10)}
	if c, ok := w.(io.Closer); ok {
		hw.closer = c
	}
	return hw
}

// Create makes (or truncates) file and returns a Writer on it.
func Create(file string) (*Writer, error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return NewWriter(f), nil
}

func (w *Writer) writeJSON(v any) error {
	// Not HTML-escaped: a history is read back as JSON, and the declared
	// policy must come back byte for byte ("<" stays "<").
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("history: encode %T: %w", v, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writeLocked(buf.Bytes())
}

func (w *Writer) writeLocked(b []byte) error {
	if w.err != nil {
		return w.err
	}
	if _, err := w.w.Write(b); err != nil {
		w.err = fmt.Errorf("history: write: %w", err)
	}
	return w.err
}

// WriteRun writes the header line; call it first.
func (w *Writer) WriteRun(r Run) error {
	r.T = TypeRun
	if r.Version == 0 {
		r.Version = Version
	}
	return w.writeJSON(r)
}

// WriteEvent appends one event.
func (w *Writer) WriteEvent(e *Event) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = AppendEvent(w.buf[:0], e)
	w.buf = append(w.buf, '\n')
	w.n++
	return w.writeLocked(w.buf)
}

// WriteFault appends a fault window.
func (w *Writer) WriteFault(f Fault) error { f.T = TypeFault; return w.writeJSON(f) }

// WriteSink appends a sink observation.
func (w *Writer) WriteSink(s Sink) error { s.T = TypeSink; return w.writeJSON(s) }

// WritePhase appends a phase record.
func (w *Writer) WritePhase(p Phase) error { p.T = TypePhase; return w.writeJSON(p) }

// WriteSample appends a resource sample.
func (w *Writer) WriteSample(x Sample) error { x.T = TypeSample; return w.writeJSON(x) }

// WriteEnd appends the end record.
func (w *Writer) WriteEnd(e End) error { e.T = TypeEnd; return w.writeJSON(e) }

// Events returns how many events were written.
func (w *Writer) Events() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// Flush pushes buffered lines to the file.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if err := w.w.Flush(); err != nil {
		w.err = fmt.Errorf("history: flush: %w", err)
	}
	return w.err
}

// Close flushes and closes the underlying file.
func (w *Writer) Close() error {
	err := w.Flush()
	if w.closer != nil {
		if cerr := w.closer.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("history: close: %w", cerr)
		}
	}
	return err
}

// AppendEvent appends e as one JSON object (no newline) to b. It writes the
// same document encoding/json would, without reflection.
func AppendEvent(b []byte, e *Event) []byte {
	b = append(b, `{"t":"e","id":`...)
	b = strconv.AppendUint(b, e.ID, 10)
	b = append(b, `,"key":`...)
	b = appendString(b, e.Key)
	if e.Variant != "" {
		b = append(b, `,"variant":`...)
		b = appendString(b, e.Variant)
	}
	if e.Tier != "" {
		b = append(b, `,"tier":`...)
		b = appendString(b, e.Tier)
	}
	b = append(b, `,"inst":`...)
	b = strconv.AppendInt(b, int64(e.Instance), 10)
	b = append(b, `,"phase":`...)
	b = appendString(b, e.Phase)
	if e.Path != "" {
		b = append(b, `,"path":`...)
		b = appendString(b, e.Path)
	}
	b = append(b, `,"intended":`...)
	b = strconv.AppendInt(b, e.Intended, 10)
	b = append(b, `,"sent":`...)
	b = strconv.AppendInt(b, e.Sent, 10)
	b = append(b, `,"recv":`...)
	b = strconv.AppendInt(b, e.Recv, 10)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(e.Status), 10)
	for _, f := range [...]struct {
		name, v string
	}{
		{`,"retry_after":`, e.RetryAfter},
		{`,"ratelimit":`, e.RateLimit},
		{`,"ratelimit_policy":`, e.RateLimitPolicy},
		{`,"x_limit":`, e.XLimit},
		{`,"x_remaining":`, e.XRemaining},
		{`,"x_reset":`, e.XReset},
		{`,"rl_limit":`, e.RLLimit},
		{`,"rl_remaining":`, e.RLRemaining},
		{`,"rl_reset":`, e.RLReset},
		{`,"fallback":`, e.Fallback},
		{`,"scope":`, e.Scope},
		{`,"err":`, e.Err},
	} {
		if f.v != "" {
			b = append(b, f.name...)
			b = appendString(b, f.v)
		}
	}
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaping as encoding/json does
// (including <, > and & so the output is byte-identical).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// ErrFormat is wrapped by every error about the content of a history file.
var ErrFormat = errors.New("not a valid rlverify history")

// MaxLine bounds one JSON line.
const MaxLine = 1 << 20

// Read decodes a whole history. A last line cut off by a crash is skipped
// and recorded in Truncated; any other bad line is an error naming the line.
// name is used in messages.
func Read(name string, r io.Reader) (*History, error) {
	s := &lineState{name: name, h: &History{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), MaxLine)
	for sc.Scan() {
		if err := s.feed(sc.Bytes()); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, s.line+1, err)
	}
	return s.finish()
}

// lineState is Read's state between lines. Read and the chunked reader
// (chunked.go) both go through it, so they judge every line alike.
type lineState struct {
	name       string
	h          *History
	line       int   // lines seen
	records    int   // non-blank lines seen
	pendingErr error // a bad line: an error unless it turns out to be the last
	pendingCut bool  // the bad line is not valid JSON: maybe cut off
	err        error // the chunked reader's error that ends the read
}

// feed takes the next line (without its line ending). A non-nil error ends
// the read with that error.
func (s *lineState) feed(b []byte) error {
	s.line++
	if s.pendingErr != nil {
		// The bad line was not the last one: it is corruption, not a cut.
		return s.pendingErr
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	s.records++
	if err := s.h.decodeLine(b); err != nil {
		s.pendingErr = fmt.Errorf("%s:%d: %w: %v", s.name, s.line, ErrFormat, err)
		s.pendingCut = !json.Valid(b)
		return nil
	}
	if s.records == 1 && s.h.Run.T != TypeRun {
		// Blank lines before it do not excuse a missing header.
		return s.headerErr()
	}
	return nil
}

// events accounts for n consecutive event lines that decode without error
// (the caller appends the events), exactly as n calls of feed would.
func (s *lineState) events(n int) error {
	if n == 0 {
		return nil
	}
	if s.pendingErr != nil {
		s.line++
		return s.pendingErr
	}
	if s.records == 0 {
		s.line++
		return s.headerErr()
	}
	s.line += n
	s.records += n
	return nil
}

func (s *lineState) headerErr() error {
	return fmt.Errorf("%s:%d: %w: the first line must be the run header {\"t\":\"run\",…}", s.name, s.line, ErrFormat)
}

// finish ends the read after the last line.
func (s *lineState) finish() (*History, error) {
	if s.records == 0 {
		return nil, fmt.Errorf("%s: %w: the file is empty", s.name, ErrFormat)
	}
	if s.pendingErr != nil {
		if s.records == 1 || s.h.End != nil || !s.pendingCut {
			return nil, s.pendingErr
		}
		s.h.Truncated = true
	}
	return s.h, nil
}

// ReadFile reads the history in file. It reads the same histories as Read,
// and fails on the same lines with the same errors, but decodes event lines
// on all CPUs (see readChunked).
func ReadFile(file string) (*History, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err == nil && st.IsDir() {
		return nil, fmt.Errorf("history: %s is a directory, not a history file (give DIR/history.jsonl)", file)
	}
	size := int64(0)
	if err == nil && st.Mode().IsRegular() {
		size = st.Size()
	}
	h, ok, err := readChunked(file, f, size, chunkBytes, runtime.GOMAXPROCS(0))
	if ok {
		return h, err
	}
	// A line too long for Read: let Read say so, exactly.
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return Read(file, f)
}

var eventPrefix = []byte(`{"t":"e",`)

func (h *History) decodeLine(b []byte) error {
	if bytes.HasPrefix(b, eventPrefix) {
		h.Events = append(h.Events, Event{})
		e := &h.Events[len(h.Events)-1]
		if err := decodeEvent(b, e); err != nil {
			h.Events = h.Events[:len(h.Events)-1]
			return err
		}
		return nil
	}
	var probe struct {
		T       string `json:"t"`
		Version int    `json:"version"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return fmt.Errorf("invalid JSON: %v", err)
	}
	switch probe.T {
	case TypeRun:
		if h.Run.T != "" {
			return errors.New("a second run header (merge shards with several --history flags instead of concatenating files)")
		}
		if probe.Version != Version {
			return fmt.Errorf("format version %d; this rlverify reads version %d", probe.Version, Version)
		}
		return strict(b, &h.Run)
	case TypeEvent:
		h.Events = append(h.Events, Event{})
		if err := decodeEvent(b, &h.Events[len(h.Events)-1]); err != nil {
			h.Events = h.Events[:len(h.Events)-1]
			return err
		}
	case TypeFault:
		var f Fault
		if err := strict(b, &f); err != nil {
			return err
		}
		h.Faults = append(h.Faults, f)
	case TypeSink:
		var s Sink
		if err := strict(b, &s); err != nil {
			return err
		}
		h.Sink = append(h.Sink, s)
	case TypePhase:
		var p Phase
		if err := strict(b, &p); err != nil {
			return err
		}
		h.Phases = append(h.Phases, p)
	case TypeSample:
		var x Sample
		if err := strict(b, &x); err != nil {
			return err
		}
		h.Samples = append(h.Samples, x)
	case TypeEnd:
		var e End
		if err := strict(b, &e); err != nil {
			return err
		}
		h.End = &e
	default:
		return fmt.Errorf("unknown record type %q (want run, e, phase, fault, sink, sample or end)", probe.T)
	}
	return nil
}

func strict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid record: %v", err)
	}
	return nil
}

func decodeEvent(b []byte, e *Event) error {
	c := internPool.Get().(*internCache)
	err := decodeEventWith(c, b, e)
	internPool.Put(c)
	return err
}

// decodeEventWith is decodeEvent with the caller's intern cache.
func decodeEventWith(c *internCache, b []byte, e *Event) error {
	if !c.decode(b, e) { // see decode.go: anything unusual goes to encoding/json
		*e = Event{}
		if err := strict(b, e); err != nil {
			return err
		}
	}
	if e.Recv < e.Sent {
		return fmt.Errorf("event %d: recv %d is before sent %d", e.ID, e.Recv, e.Sent)
	}
	if e.Status < 0 || e.Status > 999 {
		return fmt.Errorf("event %d: status %d is not an HTTP status", e.ID, e.Status)
	}
	return nil
}

// Merge combines shard histories into one: offsets are rebased to the
// earliest run start, events sorted by send time. The first header is kept,
// with the shards' instances and notes appended.
func Merge(hs ...*History) (*History, error) {
	if len(hs) == 0 {
		return nil, errors.New("history: nothing to merge")
	}
	if len(hs) == 1 {
		return hs[0], nil
	}
	base := hs[0].Run.Start
	for _, h := range hs[1:] {
		if h.Run.Start.Before(base) {
			base = h.Run.Start
		}
	}
	out := &History{Run: hs[0].Run}
	out.Run.Start = base
	out.Run.Shard = ""
	seen := map[uint64]int{}
	var end End
	for i, h := range hs {
		shift := h.Run.Start.Sub(base).Nanoseconds()
		for _, e := range h.Events {
			if j, dup := seen[e.ID]; dup && j != i {
				return nil, fmt.Errorf("history: event id %d appears in shard %d and shard %d: were they produced by one --shard split of the same plan?", e.ID, j+1, i+1)
			}
			seen[e.ID] = i
			e.Intended += shift
			e.Sent += shift
			e.Recv += shift
			out.Events = append(out.Events, e)
		}
		for _, f := range h.Faults {
			f.Start += shift
			if f.End != 0 {
				f.End += shift
			}
			out.Faults = append(out.Faults, f)
		}
		out.Sink = append(out.Sink, h.Sink...)
		for _, p := range h.Phases {
			p.Start += shift
			p.End += shift
			if p.Target != 0 {
				p.Target += shift
			}
			out.Phases = append(out.Phases, p)
		}
		for _, x := range h.Samples {
			x.At += shift
			out.Samples = append(out.Samples, x)
		}
		if i > 0 {
			out.Run.Instances = append(out.Run.Instances, h.Run.Instances...)
			out.Run.Notes = append(out.Run.Notes, h.Run.Notes...)
		}
		if h.End == nil {
			end.Interrupted = true
			end.Reason = "a shard has no end record"
		} else {
			end.Requests += h.End.Requests
			end.Late += h.End.Late
			end.Dropped += h.End.Dropped
			end.Interrupted = end.Interrupted || h.End.Interrupted
			if e := h.End.Elapsed + shift; e > end.Elapsed {
				end.Elapsed = e
			}
		}
		out.Truncated = out.Truncated || h.Truncated
	}
	sort.SliceStable(out.Events, func(a, b int) bool { return out.Events[a].Sent < out.Events[b].Sent })
	out.End = &end
	return out, nil
}
