package importers

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/rlverify/rlverify/headers"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// The formats Import reads.
const (
	Vegeta = "vegeta"
	K6     = "k6"
	HAR    = "har"
)

// EnvPrefix starts the Env of an imported history's run header, followed by
// the format: "import:vegeta". A history converted by other means should
// say "import:TOOL" too (docs/history.md).
const EnvPrefix = "import:"

// format describes one input format.
type format struct {
	// title names the input in messages: "vegeta results".
	title string
	// parse streams the input's records to emit, in input order, and
	// returns notes on what it found.
	parse func(in *input, o *Options, emit func(*record) error) ([]string, error)
	// keyTags are the values KeyTag may take (nil: any tag name; empty
	// non-nil: none).
	keyTags []string
	// keyTagHint explains KeyTag in messages.
	keyTagHint string
	// requestHeaders and responseHeaders: whether the format keeps them.
	requestHeaders, responseHeaders bool
	// timing says how send and receive times are derived and how precise
	// they are (a note in the run header).
	timing string
}

var formats = map[string]*format{
	Vegeta: {
		title: "vegeta results", parse: parseVegeta,
		keyTags: []string{"attack"}, keyTagHint: "Importer.KeyTag attack (the name given to vegeta attack -name)",
		responseHeaders: true,
		timing: "vegeta: sent is the result's timestamp (taken just before the request is built), recv is timestamp + latency " +
			"(taken after the response body was read); both to the nanosecond, so every decision interval holds the real decision, a little wide",
	},
	K6: {
		title: "k6 JSON output", parse: parseK6,
		keyTagHint: "Importer.KeyTag TAG (a tag the script sets on each request: tags: {key: …})",
		timing: "k6: recv is the http_req_duration point's time (the end of the response), sent is recv minus its value " +
			"(sending + waiting + receiving, in ms with fractions); both to about a nanosecond. Time blocked and connecting is left out: " +
			"the limiter cannot decide before the request is being sent",
	},
	HAR: {
		title: "HAR 1.2", parse: parseHAR,
		keyTags: []string{}, requestHeaders: true, responseHeaders: true,
		// parseHAR adds the resolution of startedDateTime it found.
		timing: "har: sent is startedDateTime plus the entry's blocked, dns and connect times, recv is startedDateTime plus time (total ms)",
	},
}

// Formats lists the formats Import reads.
func Formats() []string { return []string{Vegeta, K6, HAR} }

// Known returns an error naming the formats when name is not one of them.
func Known(name string) error {
	if _, ok := formats[name]; !ok {
		return fmt.Errorf("importers: unknown format %q: want %s", name, strings.Join(Formats(), ", "))
	}
	return nil
}

// InputError is an error about the content of the file being imported. Its
// message names the file and the line, record or entry.
type InputError struct{ msg string }

func (e *InputError) Error() string { return e.msg }

func inputErr(format string, args ...any) error {
	return &InputError{msg: fmt.Sprintf(format, args...)}
}

// Instance maps the host of request URLs to an instance index.
type Instance struct {
	// Host is host[:port] as written in the URLs (case-insensitive).
	Host  string
	Index int
}

// Options say how to read a results file. Policy is required.
type Options struct {
	// Policy is the declared policy: its identity says where each request's
	// key is, and it is recorded in the run header.
	Policy *policy.Policy
	// Instances map URL hosts to instance indexes 0…n-1. Empty: every host
	// is an instance, numbered in order of first appearance. Otherwise
	// requests to hosts not listed are skipped and counted in a note (a
	// browser's HAR also holds its CDN and analytics requests).
	Instances []Instance
	// Key is the key of requests whose record does not carry the declared
	// identity: vegeta and k6 keep no request headers.
	Key string
	// KeyTag names another place the record carries the key, used before
	// Key: a k6 tag, or "attack" for vegeta's attack name.
	KeyTag string
	// Name names the input in messages and the run header ("stdin" when
	// empty).
	Name string
	// PlainKeys keeps the keys in plain text. By default every key is
	// redacted (policy.Policy.RedactKey) in the key field and scrubbed
	// from every other recorded value, as an attack does with --keys: an
	// imported key is a real key someone sent.
	PlainKeys bool
}

// Summary says what Import wrote.
type Summary struct {
	// Run is the header written.
	Run history.Run
	// Requests written and Skipped (other hosts, non-HTTP entries).
	Requests, Skipped int
	// Keys is the number of distinct keys.
	Keys int
}

// maxLatencyMs bounds a latency read from a results file (about 11.6
// days): a larger one, like a HAR "time" of 1e308, would wrap int64
// nanoseconds.
const maxLatencyMs = 1e9

// unixNano is t in Unix nanoseconds, or an error naming where and field when
// t lies outside the instants a history can hold (before 1970, or from 2200:
// 9999 wrapped int64 into 1815).
func unixNano(where, field string, t time.Time) (int64, error) {
	if !history.InStartRange(t) {
		return 0, inputErr("%s: %s %s is out of range: want an instant from 1970-01-01 to 2200-01-01", where, field, t.Format(time.RFC3339Nano))
	}
	return t.UnixNano(), nil
}

// record is one request as a format parser sees it.
type record struct {
	// where names it in messages: "r.json:3", "r.har: log.entries[2]".
	where string
	id    uint64
	// sent and recv are Unix nanoseconds.
	sent, recv int64
	status     int
	err        string
	url        string
	// reqHeader is nil when the format keeps no request headers; cookies
	// likewise (HAR only).
	reqHeader http.Header
	cookies   map[string][]string
	// resp is nil when the format keeps no response headers.
	resp http.Header
	// label is the value under Options.KeyTag.
	label string
	phase string
}

// Import reads a results file of the named format from r and writes it to w
// as a complete history: the run header (Env "import:FORMAT", the policy
// as judged), one event per request, and an end record. It does not flush
// or close w. Errors about the input are *InputError.
func Import(formatName string, r io.Reader, w *history.Writer, o Options) (*Summary, error) {
	if err := Validate(formatName, o); err != nil {
		return nil, err
	}
	f := formats[formatName]
	if o.Name == "" {
		o.Name = "stdin"
	}
	in, empty, err := openInput(o.Name, r, MaxInputBytes)
	if err != nil {
		return nil, err
	}
	if empty {
		return nil, inputErr("%s: the file is empty: want %s", o.Name, f.title)
	}
	c := newConverter(f, &o)
	fnotes, err := f.parse(in, &o, c.add)
	if err != nil {
		return nil, err
	}
	c.timing = strings.Join(append([]string{f.timing}, fnotes...), "; ")
	evs, sum, err := c.finish()
	if err != nil {
		return nil, err
	}
	if !o.PlainKeys {
		scrubKeys(o.Policy, evs, sum.Run.Notes)
	}
	sum.Run.Env = EnvPrefix + formatName
	sum.Run.ID = formatName + "-" + digest(evs)
	judged, notes := Judgeable(o.Policy, sum.Run)
	sum.Run.Policy = o.Policy.Source
	if b, err := json.Marshal(judged); err == nil {
		sum.Run.Declared = b
	}
	sum.Run.Notes = append([]string{fmt.Sprintf("imported from %s %s (%d requests): no fault windows, sink counts or plan phases are recorded, so fail-mode, downstream and regions have nothing to judge", f.title, o.Name, sum.Requests)}, sum.Run.Notes...)
	sum.Run.Notes = append(sum.Run.Notes, notes...)
	if err := write(w, sum.Run, evs); err != nil {
		return nil, err
	}
	return sum, nil
}

// scrubKeys redacts every key of evs and scrubs it from every other value
// of evs and from notes (a key in a query string, a header that echoes it).
func scrubKeys(p *policy.Policy, evs []history.Event, notes []string) {
	var s history.Scrubber
	seen := map[string]bool{}
	for i := range evs {
		k := evs[i].Key
		if seen[k] {
			continue
		}
		seen[k] = true
		tier := ""
		if t, ok := p.TierFor(k); ok {
			tier = t.Name
		}
		s.Add(k, p.RedactKey(k, tier))
	}
	for i := range evs {
		s.Event(&evs[i])
	}
	s.Strings(notes)
}

func write(w *history.Writer, run history.Run, evs []history.Event) error {
	if err := w.WriteRun(run); err != nil {
		return err
	}
	var end int64
	for i := range evs {
		if err := w.WriteEvent(&evs[i]); err != nil {
			return err
		}
		end = max(end, evs[i].Recv)
	}
	return w.WriteEnd(history.End{Elapsed: end, Requests: int64(len(evs))})
}

// digest names a run by what it holds, whatever the input's encoding.
func digest(evs []history.Event) string {
	h := sha256.New()
	var b []byte
	for i := range evs {
		b = history.AppendEvent(b[:0], &evs[i])
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)[:4])
}

// Validate reports what is wrong with o for the named format, before any
// input is read: an unknown format, no policy, a KeyTag the format has no
// place for, instance indexes that are negative, doubly mapped or leave a
// gap.
func Validate(formatName string, o Options) error {
	f, ok := formats[formatName]
	if !ok {
		return Known(formatName)
	}
	if o.Policy == nil {
		return errors.New("importers: Options.Policy is required")
	}
	if o.KeyTag != "" && f.keyTags != nil && !contains(f.keyTags, o.KeyTag) {
		if len(f.keyTags) == 0 {
			return fmt.Errorf("importers: Importer.KeyTag does not apply to %s: it keeps the request headers, so the key comes from the declared identity (%s)", f.title, o.Policy.Identity.Describe())
		}
		return fmt.Errorf("importers: Importer.KeyTag %q: in %s the key can only be in %s", o.KeyTag, f.title, strings.Join(f.keyTags, ", "))
	}
	_, err := instanceBases(o.Instances)
	return err
}

// instanceBases checks the host mapping and returns the base URL each
// index gets until a request shows its scheme.
func instanceBases(m []Instance) ([]string, error) {
	hosts := map[string]int{}
	n := 0
	for _, in := range m {
		if in.Index < 0 {
			return nil, fmt.Errorf("importers: instance %s=%d: the index must not be negative", in.Host, in.Index)
		}
		h := strings.ToLower(in.Host)
		if j, dup := hosts[h]; dup && j != in.Index {
			return nil, fmt.Errorf("importers: host %s is mapped to instance %d and to %d", in.Host, j, in.Index)
		}
		hosts[h] = in.Index
		n = max(n, in.Index+1)
	}
	bases := make([]string, n)
	for _, in := range m {
		if bases[in.Index] == "" {
			bases[in.Index] = "http://" + in.Host
		}
	}
	for i, b := range bases {
		if b == "" {
			return nil, fmt.Errorf("importers: instances are numbered 0…%d, but no host is mapped to %d", n-1, i)
		}
	}
	return bases, nil
}

// converter turns records into events as they stream in.
type converter struct {
	f *format
	o *Options
	// timing is the note on how times were derived.
	timing string

	bases        []string
	hosts        map[string]int
	mapped       bool
	seenBase     []bool
	skippedHosts map[string]int
	nonHTTP      int
	keys         map[string]bool
	fromKey      int
	fromTag      int
	evs          []history.Event
	start        int64
}

func newConverter(f *format, o *Options) *converter {
	bases, _ := instanceBases(o.Instances) // Validate checked it
	c := &converter{f: f, o: o, bases: bases, hosts: map[string]int{}, mapped: len(bases) > 0,
		seenBase: make([]bool, len(bases)), skippedHosts: map[string]int{}, keys: map[string]bool{}}
	for _, in := range o.Instances {
		c.hosts[strings.ToLower(in.Host)] = in.Index
	}
	return c
}

// add converts one record (parsers call it as they read).
func (c *converter) add(r *record) error {
	if len(c.evs) >= MaxRequests {
		return inputErr("%s: more than %d requests: import a part of the file at a time (the cap is importers.MaxRequests)", c.o.Name, MaxRequests)
	}
	u, err := url.Parse(r.url)
	if err != nil {
		return inputErr("%s: URL %q: %v", r.where, r.url, err)
	}
	switch {
	case (u.Scheme == "http" || u.Scheme == "https") && u.Host != "":
	case u.Scheme == "" || u.Scheme == "http" || u.Scheme == "https":
		return inputErr("%s: URL %q is not an absolute http(s) URL", r.where, r.url)
	default:
		c.nonHTTP++ // data:, blob:, chrome-extension:, ws: … in a browser's HAR
		return nil
	}
	host := strings.ToLower(u.Host)
	idx, ok := c.hosts[host]
	if !ok {
		if c.mapped {
			c.skippedHosts[u.Host]++
			return nil
		}
		idx = len(c.bases)
		c.hosts[host] = idx
		c.bases = append(c.bases, u.Scheme+"://"+u.Host)
		c.seenBase = append(c.seenBase, true)
	}
	if !c.seenBase[idx] {
		c.bases[idx], c.seenBase[idx] = u.Scheme+"://"+u.Host, true
	}
	k, variant, how, err := c.key(r, u)
	if err != nil {
		return err
	}
	switch how {
	case keyFromOption:
		c.fromKey++
	case keyFromTag:
		c.fromTag++
	}
	c.keys[k] = true
	if r.status < 0 || r.status > 999 {
		return inputErr("%s: status %d is not an HTTP status", r.where, r.status)
	}
	if r.recv < r.sent {
		return inputErr("%s: the response ends before the request starts (latency %s)", r.where, time.Duration(r.recv-r.sent))
	}
	ev := history.Event{ID: r.id, Key: k, Variant: variant, Instance: idx, Phase: r.phase,
		Sent: r.sent, Recv: r.recv, Status: r.status}
	if p := u.RequestURI(); p != "/" {
		ev.Path = p
	}
	if r.status == 0 {
		ev.Err = r.err
		if ev.Err == "" {
			ev.Err = "no response"
		}
	}
	setResponseHeaders(&ev, r.resp)
	if len(c.evs) == 0 || ev.Sent < c.start {
		c.start = ev.Sent
	}
	c.evs = append(c.evs, ev)
	return nil
}

// finish returns the events, relative to the first request, and the run.
func (c *converter) finish() ([]history.Event, *Summary, error) {
	evs, start, bases, skippedHosts, nonHTTP, keys, fromKey, fromTag := c.evs, c.start, c.bases, c.skippedHosts, c.nonHTTP, c.keys, c.fromKey, c.fromTag
	skipped := nonHTTP
	for _, n := range skippedHosts {
		skipped += n
	}
	if len(evs) == 0 {
		if len(skippedHosts) > 0 {
			return nil, nil, inputErr("%s: no request went to a host given in InstanceMap; the file's hosts: %s", c.o.Name, countList(skippedHosts))
		}
		return nil, nil, inputErr("%s: no HTTP request in this %s", c.o.Name, c.f.title)
	}
	if s := time.Unix(0, start).UTC(); !history.InStartRange(s) {
		return nil, nil, inputErr("%s: the first request starts at %s (its timestamp less the time resolution): want an instant from 1970-01-01 to 2200-01-01", c.o.Name, s.Format(time.RFC3339Nano))
	}
	for i := range evs {
		e := &evs[i]
		e.Sent -= start
		e.Recv -= start
		e.Intended = e.Sent
		if e.Recv > history.MaxOffset {
			return nil, nil, inputErr("%s: the requests span more than 50 years (request %d ends %s after the first starts): a history holds at most 50 years", c.o.Name, e.ID, time.Duration(e.Recv))
		}
	}
	run := history.Run{Start: time.Unix(0, start).UTC(), Instances: bases, Target: strings.Join(bases, " ")}
	run.Notes = append(run.Notes, c.timing)
	run.NoHeaders = !c.f.responseHeaders
	if len(skippedHosts) > 0 {
		run.Notes = append(run.Notes, fmt.Sprintf("skipped %s to hosts without an InstanceMap entry: %s", plural(skipped-nonHTTP, "request"), countList(skippedHosts)))
	}
	if nonHTTP > 0 {
		run.Notes = append(run.Notes, fmt.Sprintf("skipped %s: not HTTP (data:, blob:, ws: …)", plural(nonHTTP, "entry")))
	}
	if fromTag > 0 {
		run.Notes = append(run.Notes, fmt.Sprintf("%s took their key from %s, not from the declared identity (%s)", plural(fromTag, "request"), c.tagName(), c.o.Policy.Identity.Describe()))
	}
	if fromKey > 0 {
		run.Notes = append(run.Notes, fmt.Sprintf("%s given the key %q (Importer.Key): %s does not show the declared identity (%s)", plural(fromKey, "request"), c.o.Key, c.f.title, c.o.Policy.Identity.Describe()))
	}
	return evs, &Summary{Run: run, Requests: len(evs), Skipped: skipped, Keys: len(keys)}, nil
}

func (c *converter) tagName() string {
	if c.o.KeyTag == "attack" && c.f == formats[Vegeta] {
		return "the vegeta attack name"
	}
	return "the tag " + c.o.KeyTag
}

// countList writes host counts as "a.example (3), b.example (1)", most first.
func countList(m map[string]int) string {
	type hc struct {
		h string
		n int
	}
	var l []hc
	for h, n := range m {
		l = append(l, hc{h, n})
	}
	sort.Slice(l, func(i, j int) bool { return l[i].n > l[j].n || l[i].n == l[j].n && l[i].h < l[j].h })
	parts := make([]string, 0, len(l))
	for i, x := range l {
		if i == 10 {
			parts = append(parts, fmt.Sprintf("… %d more", len(l)-i))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%d)", x.h, x.n))
	}
	return strings.Join(parts, ", ")
}

// plural writes "1 request", "2 requests", "3 entries".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	if w, ok := strings.CutSuffix(word, "y"); ok {
		return fmt.Sprintf("%d %sies", n, w)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// setResponseHeaders records the rate-limit response headers raw, as the
// attack engine does (headers.FromHTTP: the lines of a Structured Field
// joined, the first line of any other field).
func setResponseHeaders(e *history.Event, h http.Header) {
	if h == nil {
		return
	}
	e.Fields = headers.FromHTTP(h)
}

// Format returns the format an imported history was converted from (the
// part of Run.Env after "import:").
func Format(run history.Run) (string, bool) {
	f, ok := strings.CutPrefix(run.Env, EnvPrefix)
	return f, ok && f != ""
}

// Complete gives an imported history that has no end record the end it
// implies (the last response, every event), and a note saying so: an
// import is complete as written, not a run cut off by a crash. It reports
// whether it changed h. Histories written by a live run are left alone.
func Complete(h *history.History) bool {
	if _, ok := Format(h.Run); !ok || h.End != nil {
		return false
	}
	end := &history.End{Requests: int64(len(h.Events))}
	for i := range h.Events {
		end.Elapsed = max(end.Elapsed, h.Events[i].Recv)
	}
	h.End = end
	h.Run.Notes = append(h.Run.Notes, "the imported history has no end record: it is judged as complete as written")
	return true
}

// Judgeable returns p as it can be judged on a history imported into run:
// a format that keeps no response headers (k6) cannot show Retry-After or
// RateLimit headers, so their declarations are dropped (else every 429
// would count as missing its Retry-After). The notes say what was dropped.
// Other histories get p itself.
func Judgeable(p *policy.Policy, run history.Run) (*policy.Policy, []string) {
	name, ok := Format(run)
	f := formats[name]
	if !ok || f == nil || f.responseHeaders {
		return p, nil
	}
	note := fmt.Sprintf("%s keeps no response headers: rate-limit headers are not in the history, and a 503 with Retry-After from a fail-closed limiter counts as an error, not a refusal", f.title)
	hd := p.Headers
	if !hd.RetryAfter && !hd.RateLimit.Declared() && !hd.XRateLimit {
		return p, []string{note}
	}
	c := p.Clone()
	c.Headers = policy.Headers{}
	return c, []string{note + "; the policy's header declarations (Retry-After, RateLimit, X-RateLimit-*) are not judged, so retry-after and headers have nothing to judge"}
}
