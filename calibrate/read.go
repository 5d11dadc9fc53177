package calibrate

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/importers"
	"github.com/rlverify/rlverify/policy"
)

// The formats Read understands.
const (
	// Combined is the nginx/Apache combined log format, optionally followed
	// by more fields (quoted or bare) such as "$http_x_api_key".
	Combined = "combined"
	// JSON is one JSON object per line (nginx escape=json, Caddy, Envoy,
	// most log shippers).
	JSON = "json"
	// History is an rlverify history (attack --history, import -o).
	History = "history"
)

// Formats lists every format Read takes: the access-log formats, rlverify
// histories and the importers' formats.
func Formats() []string {
	return append([]string{Combined, JSON, History}, importers.Formats()...)
}

// DefaultMaxDisorder is how far back in time a line may go, against the
// latest line before it in the same file, and still be sorted into place.
// Web servers write a line when the response ends, so lines are out of
// request order by up to the slowest response.
const DefaultMaxDisorder = time.Minute

// maxListed bounds the malformed lines a Traffic lists one by one (all are
// counted).
const maxListed = 20

// ReadOptions say how to read traffic. The zero value is not enough: a
// format and, for access logs, where the key is must be given.
type ReadOptions struct {
	// Format is one of Formats().
	Format string
	// KeyField is where each request's key is. Combined: ip, user, or
	// extraN (the N-th field after the user agent, from 1). JSON: a field
	// name, dotted for nested objects (headers.x-api-key). vegeta and k6:
	// the importers' key tag. HAR and histories: leave empty (the policy's
	// identity, and the history's keys, say it).
	KeyField string
	// KeyRegex, instead of KeyField, takes the key from the first capture
	// group of a regular expression matched against the raw line (combined
	// and JSON): `Bearer ([A-Za-z0-9._-]+)`.
	KeyRegex *regexp.Regexp
	// TierField, when set, is where each request's tier is (JSON: a field;
	// combined: extraN): it then decides the key's tier instead of the
	// policy's key prefixes, and must name a tier of the policy. A key
	// logged with two tiers is an error.
	TierField string
	// TimeField, StatusField and RouteField name JSON fields (defaults
	// time, status, path).
	TimeField, StatusField, RouteField string
	// TimeUnit is the unit of numeric JSON times: s (default), ms, us, ns.
	TimeUnit string
	// SkipMalformed skips lines that cannot be read (each is counted and
	// the first 20 listed with their line numbers). Without it the first
	// one is an error.
	SkipMalformed bool
	// MaxDisorder bounds how far back a line's time may go (default
	// DefaultMaxDisorder); a line further back is an error: logs that are
	// concatenated out of order must be given as separate files or sorted.
	MaxDisorder time.Duration
	// Policy is the identity the HAR importer reads keys with (default:
	// the built-in policy).
	Policy *policy.Policy
	// Hosts, for vegeta, k6 and HAR, keeps only requests to these
	// host[:port] (a browser's HAR also holds its CDN's requests, which
	// carry no key); the importer counts the others as skipped.
	Hosts []string
}

// Malformed is one line that could not be read.
type Malformed struct {
	File   string `json:"file"`
	Line   int    `json:"line"`
	Reason string `json:"reason"`
}

// FileSummary says what was read from one input.
type FileSummary struct {
	Name      string `json:"name"`
	Format    string `json:"format"`
	Gzip      bool   `json:"gzip,omitempty"`
	Lines     int    `json:"lines"`
	Requests  int    `json:"requests"`
	Malformed int    `json:"malformed"`
	// Keyless counts requests without a key (an empty value or "-"): they
	// are not replayed, since no per-key limit would see them as one key.
	Keyless int `json:"keyless"`
	// Reordered counts lines earlier than a line before them (within
	// MaxDisorder), sorted into place.
	Reordered int `json:"reordered"`
}

// Traffic is the arrivals of every key, held compactly: per key its
// arrival times (Unix ns, ascending) and statuses. Build it with Read.
type Traffic struct {
	Files     []FileSummary `json:"files"`
	Malformed []Malformed   `json:"malformed,omitempty"`

	keys  []string
	index map[string]int32
	// tiers[k] is key k's tier from the log ("" without a tier field)
	// and tierLine the line it was first seen on.
	tiers    []string
	tierLine []string
	times    [][]int64
	status   [][]uint16
	routes   map[string]int // requests per route (at most maxRoutes)
}

// maxRoutes bounds the distinct routes counted.
const maxRoutes = 1000

// Keys is the number of distinct keys.
func (t *Traffic) Keys() int { return len(t.keys) }

// Requests is the number of keyed requests.
func (t *Traffic) Requests() int {
	n := 0
	for _, ts := range t.times {
		n += len(ts)
	}
	return n
}

// Span returns the first and last arrival (Unix ns).
func (t *Traffic) Span() (first, last int64) {
	first, last = 1<<62, -1<<62
	for _, ts := range t.times {
		if len(ts) > 0 {
			first, last = min(first, ts[0]), max(last, ts[len(ts)-1])
		}
	}
	return first, last
}

// Input is one source of traffic.
type Input struct {
	// Name names it in messages ("access.log", "stdin").
	Name string
	R    io.Reader
}

// InputError is an error about the content of an input; its message names
// the file and line.
type InputError struct{ msg string }

func (e *InputError) Error() string { return e.msg }

func inputErr(format string, args ...any) error {
	return &InputError{msg: fmt.Sprintf(format, args...)}
}

// Read reads every input in o.Format into one Traffic. A gzip stream
// (recognised by its magic bytes, whatever the name) is decompressed as it
// is read. Lines that cannot be read are an error naming the file and line,
// or, with SkipMalformed, counted and listed; lines out of order by at most
// MaxDisorder are sorted into place, further back is an error.
func Read(inputs []Input, o ReadOptions) (*Traffic, error) {
	if !slices.Contains(Formats(), o.Format) {
		return nil, fmt.Errorf("calibrate: unknown format %q: want %s", o.Format, strings.Join(Formats(), ", "))
	}
	if o.MaxDisorder == 0 {
		o.MaxDisorder = DefaultMaxDisorder
	}
	if o.MaxDisorder < 0 {
		return nil, fmt.Errorf("calibrate: max disorder %s is negative", o.MaxDisorder)
	}
	if len(inputs) == 0 {
		return nil, errors.New("calibrate: no traffic given")
	}
	var lp lineParser
	switch o.Format {
	case Combined, JSON:
		var err error
		if lp, err = newLineParser(&o); err != nil {
			return nil, err
		}
	case History:
		if o.KeyField != "" || o.KeyRegex != nil {
			return nil, fmt.Errorf("calibrate: a history carries its keys: drop the key field %q", o.KeyField)
		}
	}
	if o.TierField != "" && o.Format != Combined && o.Format != JSON {
		return nil, fmt.Errorf("calibrate: a tier field is read from combined and JSON logs only, not %s", o.Format)
	}
	t := &Traffic{index: map[string]int32{}, routes: map[string]int{}}
	for _, in := range inputs {
		br := bufio.NewReaderSize(in.R, 1<<20)
		fs := FileSummary{Name: in.Name, Format: o.Format}
		var r io.Reader = br
		if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
			zr, err := gzip.NewReader(br)
			if err != nil {
				return nil, inputErr("%s: gzip: %v", in.Name, err)
			}
			fs.Gzip = true
			r = failFast{zr}
		}
		var err error
		switch o.Format {
		case Combined, JSON:
			err = t.readLines(in.Name, r, lp, &o, &fs)
		default:
			err = t.readHistory(in.Name, r, &o, &fs)
		}
		if err != nil {
			return nil, err
		}
		if fs.Requests == 0 {
			if fs.Keyless > 0 {
				return nil, inputErr("%s: none of its %d requests has a key in %s (every value was empty or \"-\"): give the field or regex that holds the API key, bearer token or address", in.Name, fs.Keyless, o.keyWhere())
			}
			return nil, inputErr("%s: no requests in %d lines", in.Name, fs.Lines)
		}
		t.Files = append(t.Files, fs)
	}
	t.sortArrivals()
	return t, nil
}

func (o *ReadOptions) keyWhere() string {
	if o.KeyRegex != nil {
		return fmt.Sprintf("the key regex %q", o.KeyRegex.String())
	}
	if o.KeyField == "" {
		return "the policy's identity"
	}
	return fmt.Sprintf("the key field %q", o.KeyField)
}

// add records one arrival and returns the key's index.
func (t *Traffic) add(key []byte, at int64, status int, route []byte) int32 {
	i, ok := t.index[string(key)]
	if !ok {
		i = int32(len(t.keys))
		k := string(key)
		t.index[k] = i
		t.keys = append(t.keys, k)
		t.times = append(t.times, nil)
		t.status = append(t.status, nil)
		t.tiers = append(t.tiers, "")
		t.tierLine = append(t.tierLine, "")
	}
	t.times[i] = append(t.times[i], at)
	t.status[i] = append(t.status[i], uint16(min(max(status, 0), 65535)))
	if len(route) > 0 {
		if n, ok := t.routes[string(route)]; ok {
			t.routes[string(route)] = n + 1
		} else if len(t.routes) < maxRoutes {
			t.routes[string(route)] = 1
		}
	}
	return i
}

// setTier records key k's tier from the log, where names the line.
func (t *Traffic) setTier(k int32, tier []byte, where string) error {
	switch {
	case len(tier) == 0 || len(tier) == 1 && tier[0] == '-':
		return inputErr("%s: no tier in the tier field for key %q", where, safe(t.keys[k]))
	case t.tiers[k] == "":
		t.tiers[k], t.tierLine[k] = string(tier), where
	case t.tiers[k] != string(tier):
		return inputErr("%s: key %q has tier %q, but tier %q at %s: one key, one tier", where, safe(t.keys[k]), safe(string(tier)), safe(t.tiers[k]), t.tierLine[k])
	}
	return nil
}

// sortArrivals puts every key's arrivals in time order (stable: equal
// times keep their order in the input).
func (t *Traffic) sortArrivals() {
	for i, ts := range t.times {
		if slices.IsSorted(ts) {
			continue
		}
		sort.Stable(byTime{ts, t.status[i]})
	}
}

type byTime struct {
	t []int64
	s []uint16
}

func (b byTime) Len() int           { return len(b.t) }
func (b byTime) Less(i, j int) bool { return b.t[i] < b.t[j] }
func (b byTime) Swap(i, j int) {
	b.t[i], b.t[j] = b.t[j], b.t[i]
	b.s[i], b.s[j] = b.s[j], b.s[i]
}

func (t *Traffic) malformed(o *ReadOptions, fs *FileSummary, line int, reason string) error {
	if !o.SkipMalformed {
		return inputErr("%s:%d: %s (Read.SkipMalformed skips such lines, counted and listed)", fs.Name, line, reason)
	}
	fs.Malformed++
	if len(t.Malformed) < maxListed {
		t.Malformed = append(t.Malformed, Malformed{File: fs.Name, Line: line, Reason: reason})
	}
	return nil
}

// readLines reads an access log line by line. Parsing runs in a goroutine
// of its own, a batch of lines ahead of the bookkeeping (order checks,
// the key table, the per-key arrivals), so the two use both CPUs.
func (t *Traffic) readLines(name string, r io.Reader, lp lineParser, o *ReadOptions, fs *FileSummary) error {
	batches, free := make(chan *lineBatch, 2), make(chan *lineBatch, 4)
	for i := 0; i < 4; i++ {
		free <- &lineBatch{}
	}
	done := make(chan struct{})
	defer close(done)
	go parseLines(r, lp, o.Format, batches, free, done)
	var latest int64
	latestLine := 0
	first := true
	for b := range batches {
		for i := range b.items {
			it := &b.items[i]
			fs.Lines = it.line
			if it.reason != "" {
				if it.other && first {
					return inputErr("%s:%d: %s", name, it.line, it.reason)
				}
				if err := t.malformed(o, fs, it.line, it.reason); err != nil {
					return err
				}
				continue
			}
			first = false
			key := b.buf[it.key[0]:it.key[1]]
			if len(key) == 0 || (len(key) == 1 && key[0] == '-') {
				fs.Keyless++
				continue
			}
			if it.at < latest-int64(o.MaxDisorder) {
				return inputErr("%s:%d: time %s is %s before line %d's %s, more than the %s disorder allowed: sort the log, give rotated files separately, or raise Read.MaxDisorder",
					name, it.line, fmtTime(it.at), time.Duration(latest-it.at), latestLine, fmtTime(latest), o.MaxDisorder)
			}
			if it.at < latest {
				fs.Reordered++
			} else {
				latest, latestLine = it.at, it.line
			}
			k := t.add(key, it.at, it.status, b.buf[it.route[0]:it.route[1]])
			if o.TierField != "" {
				if err := t.setTier(k, b.buf[it.tier[0]:it.tier[1]], fmt.Sprintf("%s:%d", name, it.line)); err != nil {
					return err
				}
			}
			fs.Requests++
		}
		fs.Lines = b.lines
		if err := b.err; err != nil {
			if errors.Is(err, bufio.ErrTooLong) {
				return inputErr("%s:%d: a line longer than 1 MiB", name, fs.Lines+1)
			}
			return inputErr("%s: after line %d: %v", name, fs.Lines, err)
		}
		free <- b
	}
	return nil
}

// lineBatch is parsed lines on their way from parseLines to readLines;
// keys and routes are copied into buf.
type lineBatch struct {
	items []lineItem
	buf   []byte
	lines int   // lines read so far
	err   error // the read error after the last item
}

type lineItem struct {
	line int
	// reason says why the line is malformed ("" when it is not); other
	// that it looks like another format.
	reason           string
	other            bool
	at               int64
	status           int
	key, route, tier [2]int
}

const batchLines = 4096

// parseLines scans r and parses every non-blank line, in order, into
// batches; it stops when done is closed.
func parseLines(r io.Reader, lp lineParser, format string, out chan<- *lineBatch, free chan *lineBatch, done <-chan struct{}) {
	defer close(out)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 1<<20)
	var b *lineBatch
	take := func() bool {
		select {
		case b = <-free:
			b.items, b.buf, b.err = b.items[:0], b.buf[:0], nil
			return true
		case <-done:
			return false
		}
	}
	send := func() bool {
		select {
		case out <- b:
			return true
		case <-done:
			return false
		}
	}
	if !take() {
		return
	}
	line := 0
	for sc.Scan() {
		line++
		raw := sc.Bytes()
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		var rec parsed
		it := lineItem{line: line}
		if reason := lp.parse(raw, &rec); reason != "" {
			if other := looksLike(raw); other != "" && other != format {
				reason += fmt.Sprintf("; the line looks like %s, not %s (mixed formats? read each file in a run of its own, with its format)", other, format)
				it.other = true
			}
			it.reason = reason
		} else {
			it.at, it.status = rec.at, rec.status
			it.key[0] = len(b.buf)
			b.buf = append(b.buf, rec.key...)
			it.key[1], it.route[0] = len(b.buf), len(b.buf)
			b.buf = append(b.buf, rec.route...)
			it.route[1], it.tier[0] = len(b.buf), len(b.buf)
			b.buf = append(b.buf, rec.tier...)
			it.tier[1] = len(b.buf)
		}
		b.items = append(b.items, it)
		if len(b.items) == batchLines {
			b.lines = line
			if !send() || !take() {
				return
			}
		}
	}
	b.lines, b.err = line, sc.Err()
	send()
}

// readHistory reads an rlverify history, or another tool's results through
// importers, and takes each request's key, send time and status.
func (t *Traffic) readHistory(name string, r io.Reader, o *ReadOptions, fs *FileSummary) error {
	var h *history.History
	if o.Format == History {
		var err error
		if h, err = history.Read(name, r); err != nil {
			return err
		}
	} else {
		p := o.Policy
		if p == nil {
			p = policy.Default()
		}
		var buf bytes.Buffer
		w := history.NewWriter(&buf)
		// The history is an intermediate kept in memory: keys stay as the
		// access-log readers show them (an import saved to a file redacts
		// them by default).
		io := importers.Options{Policy: p, KeyTag: o.KeyField, Name: name, PlainKeys: true}
		for i, h := range o.Hosts {
			io.Instances = append(io.Instances, importers.Instance{Host: h, Index: i})
		}
		if _, err := importers.Import(o.Format, r, w, io); err != nil {
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
		var err error
		if h, err = history.Read(name, &buf); err != nil {
			return err
		}
	}
	start := h.Run.Start.UnixNano()
	for i := range h.Events {
		e := &h.Events[i]
		fs.Lines++
		if e.Key == "" {
			fs.Keyless++
			continue
		}
		_ = t.add([]byte(e.Key), start+e.Sent, e.Status, []byte(e.Path))
		fs.Requests++
	}
	return nil
}

// looksLike names the format a line that failed to parse seems to be in.
func looksLike(b []byte) string {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.HasPrefix(b, []byte(`{"t":"run"`)) || bytes.HasPrefix(b, []byte(`{"t":"e"`)):
		return History
	case len(b) > 0 && b[0] == '{':
		return JSON
	case combinedShape.Match(b):
		return Combined
	}
	return ""
}

var combinedShape = regexp.MustCompile(`^\S+ \S+ \S+ \[[^\]]+\] "`)

func fmtTime(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }

// failFast drops the bytes of a read that ends in an error other than EOF:
// a truncated gzip stream is reported as such, not as a malformed last
// line.
type failFast struct{ r io.Reader }

func (f failFast) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err != nil && err != io.EOF {
		return 0, err
	}
	return n, err
}
