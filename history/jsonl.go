package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// Writer streams a history as JSON lines. It is safe for concurrent use.
// Nothing reaches the file until Flush or Close, or until its buffer fills:
// the engine flushes regularly so an interrupted run loses at most the
// requests of the last flush interval, and on SIGINT it flushes everything.
type Writer struct {
	mu      sync.Mutex
	w       *bufio.Writer
	closer  io.Closer
	buf     []byte
	n       int64
	err     error
	onEvent func(Event)
	// sum is the CRC-32C of every byte written (the end record's digest).
	sum uint32
	// maxSent is the latest send time written; behind the most an event
	// was written after one sent later (Reorder).
	maxSent, behind int64
	sentAny         bool
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

// writeJSON writes the record *v, other than an event, its strings capped
// (capRecord); a record longer than MaxRunLine is refused, so that every
// line written can be read.
func (w *Writer) writeJSON(v any, what string) error {
	capRecord(v)
	// Not HTML-escaped: a history is read back as JSON, and the declared
	// policy must come back byte for byte ("<" stays "<").
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("history: encode %T: %w", v, err)
	}
	if n := buf.Len() - 1; n > MaxRunLine {
		return fmt.Errorf("history: the %s record would be a line of %d bytes, more than the %d a history line may be", what, n, MaxRunLine)
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
	w.sum = crc32.Update(w.sum, castagnoli, b)
	return w.err
}

// WriteRun writes the header line; call it first. Its strings are capped
// (CapValue); the declared policy is kept whole, and a header that would
// still be longer than MaxRunLine is refused.
func (w *Writer) WriteRun(r Run) error {
	r.T = TypeRun
	if r.Version == 0 {
		r.Version = Version
	}
	return w.writeJSON(&r, "run header (declared policy, instances and notes)")
}

// OnEvent has f called with a copy of every event written after it, one
// call at a time, before the event is encoded; f must not block for long
// (it holds up the writer). Set it before the first WriteEvent.
func (w *Writer) OnEvent(f func(Event)) { w.onEvent = f }

// WriteEvent appends one event, its strings capped (see AppendEvent).
func (w *Writer) WriteEvent(e *Event) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.onEvent != nil {
		w.onEvent(*e)
	}
	switch {
	case !w.sentAny || e.Sent > w.maxSent:
		w.maxSent, w.sentAny = e.Sent, true
	case w.maxSent-e.Sent > w.behind:
		w.behind = w.maxSent - e.Sent
	}
	w.buf = AppendEvent(w.buf[:0], e)
	w.buf = append(w.buf, '\n')
	w.n++
	return w.writeLocked(w.buf)
}

// Reorder is how far out of send order the events written so far are: the
// most an event's send time was before that of an event written ahead of
// it. A Stream of this file with a ReorderBound above it (Reorder()+1)
// passes every event on in order while holding back only the events sent
// within that bound — a few for a run whose requests all answer quickly,
// where the default bound holds every event sent within 10 s.
func (w *Writer) Reorder() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return time.Duration(w.behind)
}

// WriteFault appends a fault window, its strings capped.
func (w *Writer) WriteFault(f Fault) error { f.T = TypeFault; return w.writeJSON(&f, TypeFault) }

// WriteSink appends a sink observation, its strings capped.
func (w *Writer) WriteSink(s Sink) error { s.T = TypeSink; return w.writeJSON(&s, TypeSink) }

// WritePhase appends a phase record, its strings capped.
func (w *Writer) WritePhase(p Phase) error { p.T = TypePhase; return w.writeJSON(&p, TypePhase) }

// WriteSample appends a resource sample.
func (w *Writer) WriteSample(x Sample) error { x.T = TypeSample; return w.writeJSON(&x, TypeSample) }

// WriteEnd appends the end record, its reason capped, with the digest of
// the history (see digest.go): the CRC-32C of every line written before
// it and of the end line itself as it reads without its digest field.
func (w *Writer) WriteEnd(e End) error {
	e.T, e.Digest = TypeEnd, ""
	capRecord(&e)
	w.mu.Lock()
	defer w.mu.Unlock()
	// The reorder of the events this writer wrote, whatever e says: a
	// reader trusts it to hold back no more than that.
	reorder := w.behind
	e.Reorder = &reorder
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&e); err != nil {
		return fmt.Errorf("history: encode %T: %w", e, err)
	}
	e.Digest = formatDigest(crc32.Update(w.sum, castagnoli, buf.Bytes()))
	buf.Reset()
	if err := enc.Encode(&e); err != nil {
		return fmt.Errorf("history: encode %T: %w", e, err)
	}
	return w.writeLocked(buf.Bytes())
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

// AppendEvent appends e as one JSON object (no newline) to b, every string
// capped by CapValue, so the line is at most MaxEventLine bytes. It writes
// the document encoding/json would write for the capped event, without
// reflection.
func AppendEvent(b []byte, e *Event) []byte {
	b = append(b, `{"t":"e","id":`...)
	b = strconv.AppendUint(b, e.ID, 10)
	b = append(b, `,"key":`...)
	b = appendString(b, CapValue(e.Key))
	if e.Variant != "" {
		b = append(b, `,"variant":`...)
		b = appendString(b, CapValue(e.Variant))
	}
	if e.Tier != "" {
		b = append(b, `,"tier":`...)
		b = appendString(b, CapValue(e.Tier))
	}
	b = append(b, `,"inst":`...)
	b = strconv.AppendInt(b, int64(e.Instance), 10)
	b = append(b, `,"phase":`...)
	b = appendString(b, CapValue(e.Phase))
	if e.Path != "" {
		b = append(b, `,"path":`...)
		b = appendString(b, CapValue(e.Path))
	}
	b = append(b, `,"intended":`...)
	b = strconv.AppendInt(b, e.Intended, 10)
	b = append(b, `,"sent":`...)
	b = strconv.AppendInt(b, e.Sent, 10)
	b = append(b, `,"recv":`...)
	b = strconv.AppendInt(b, e.Recv, 10)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(e.Status), 10)
	if e.Cost != 0 {
		b = append(b, `,"cost":`...)
		b = strconv.AppendInt(b, e.Cost.Tokens(), 10)
	}
	for _, f := range [...]struct {
		name, v string
	}{
		{`,"retry_after":`, e.RetryAfter},
		{`,"ratelimit":`, e.RateLimit},
		{`,"ratelimit_policy":`, e.RateLimitPolicy},
		{`,"x_limit":`, e.XLimit},
		{`,"x_remaining":`, e.XRemaining},
		{`,"x_reset":`, e.XReset},
		{`,"rl_limit":`, e.RateLimitLimit},
		{`,"rl_remaining":`, e.RateLimitRemaining},
		{`,"rl_reset":`, e.RateLimitReset},
		{`,"fallback":`, e.Fallback},
		{`,"scope":`, e.Scope},
		{`,"err":`, e.Err},
		{`,"date":`, e.Date},
		{`,"body":`, e.Body},
	} {
		if f.v != "" {
			b = append(b, f.name...)
			b = appendString(b, CapValue(f.v))
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

// Read decodes a whole history. A last line cut off by a crash is skipped
// and recorded in Truncated; any other bad line is an error naming the line.
// name is used in messages and kept in Source.
func Read(name string, r io.Reader) (*History, error) {
	s := newLineState(name)
	sc := bufio.NewScanner(r)
	// A line of MaxLine bytes and its newline fit.
	sc.Buffer(make([]byte, 0, 1<<16), MaxLine+1)
	for sc.Scan() {
		s.digest.line(sc.Bytes())
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
	size       int64 // the chunked reader's file size, 0 when unknown
	consumed   int64 // bytes the chunked reader has replayed
	digest     *digester
}

func newLineState(name string) *lineState {
	return &lineState{name: name, h: &History{Source: name}, digest: newDigester()}
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

// blankLines accounts for n consecutive blank lines, exactly as n calls of
// feed would.
func (s *lineState) blankLines(n int) error {
	if s.pendingErr != nil {
		s.line++
		return s.pendingErr
	}
	s.line += n
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
	if len(s.h.Events) == 0 {
		s.h.Events = nil // the same whether an event line was tried or not
	}
	if dups := duplicateIDs(s.h.Events); len(dups) > 0 {
		return nil, fmt.Errorf("%s: %w: %s", s.name, ErrFormat, describeDuplicates(dups))
	}
	s.h.Integrity = s.digest.integrity(s.h.End)
	if s.h.Integrity == Modified {
		s.h.ModifiedShards = []string{s.name}
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
	return readSeeker(file, f, size, chunkBytes, min(runtime.GOMAXPROCS(0), maxProcs))
}

// readSeeker is ReadFile on r (of size bytes, 0 when unknown), in chunks
// of chunkSize bytes on procs goroutines.
func readSeeker(name string, r io.ReadSeeker, size int64, chunkSize, procs int) (*History, error) {
	h, ok, err := readChunked(name, r, size, chunkSize, procs)
	if ok {
		return h, err
	}
	// A line too long for Read: let Read say so, exactly.
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return Read(name, r)
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
		if json.Valid(b) {
			return fmt.Errorf("not a record: a line holds one JSON object such as {\"t\":\"e\",…}, not %q", clip(b, 24))
		}
		return fmt.Errorf("invalid JSON: %v", err)
	}
	switch probe.T {
	case TypeRun:
		if h.Run.T != "" {
			return errors.New("a second run header (give each shard's history separately, to be merged, instead of concatenating files)")
		}
		if probe.Version != Version {
			return fmt.Errorf("format version %d; this rlverify reads version %d", probe.Version, Version)
		}
		if err := strict(b, &h.Run); err != nil {
			return err
		}
		return checkStart(h.Run.Start)
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
		if err := checkOffsets("fault", []string{"start", "end", "injecting", "cleared"}, f.Start, f.End, f.Injecting, f.Cleared); err != nil {
			return err
		}
		h.Faults = append(h.Faults, f)
	case TypeSink:
		var s Sink
		if err := strict(b, &s); err != nil {
			return err
		}
		if err := checkOffsets("sink", []string{"first", "last", "at"}, s.First, s.Last, s.At); err != nil {
			return err
		}
		h.Sink = append(h.Sink, s)
	case TypePhase:
		var p Phase
		if err := strict(b, &p); err != nil {
			return err
		}
		if err := checkOffsets("phase", []string{"start", "end", "target"}, p.Start, p.End, p.Target); err != nil {
			return err
		}
		h.Phases = append(h.Phases, p)
	case TypeSample:
		var x Sample
		if err := strict(b, &x); err != nil {
			return err
		}
		if err := checkOffsets("sample", []string{"at"}, x.At); err != nil {
			return err
		}
		h.Samples = append(h.Samples, x)
	case TypeEnd:
		var e End
		if err := strict(b, &e); err != nil {
			return err
		}
		if err := checkOffsets("end", []string{"elapsed"}, e.Elapsed); err != nil {
			return err
		}
		h.End = &e
	default:
		return fmt.Errorf("unknown record type %q (want run, e, phase, fault, sink, sample or end)", probe.T)
	}
	return nil
}

// strict decodes the one JSON object in b into v: unknown fields and
// anything after the object (a second record glued on) are errors.
func strict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid record: %v", err)
	}
	at := int(dec.InputOffset())
	if rest := bytes.TrimLeft(b[at:], " \t\r\n"); len(rest) > 0 {
		return fmt.Errorf("invalid record: data after the record at column %d (%q): one record per line", len(b)-len(rest)+1, clip(rest, 24))
	}
	return nil
}

// clip returns at most n bytes of b, for a message.
func clip(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
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
	return checkEvent(e)
}

// checkEvent refuses a decoded event no writer makes: what decodeEvent
// adds to decoding.
func checkEvent(e *Event) error {
	if e.T != TypeEvent { // a second "t" in the line
		return fmt.Errorf("event %d: its \"t\" is given twice, the last time as %q", e.ID, e.T)
	}
	if e.Recv < e.Sent {
		return fmt.Errorf("event %d: recv %d is before sent %d", e.ID, e.Recv, e.Sent)
	}
	if e.Sent < -MaxOffset || e.Recv > MaxOffset || e.Intended < -MaxOffset || e.Intended > MaxOffset {
		return checkOffsets(fmt.Sprintf("event %d", e.ID), []string{"intended", "sent", "recv"}, e.Intended, e.Sent, e.Recv)
	}
	if e.Status < 0 || e.Status > 999 {
		return fmt.Errorf("event %d: status %d is not an HTTP status", e.ID, e.Status)
	}
	return nil
}
