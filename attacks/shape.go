package attacks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/rlverify/rlverify/policy"
)

// Request is the shape of the requests a plan (or one phase) sends. Every
// string may hold templates: {key} (the key sent), {tenant} (the plan's
// logical key), {tier}, {i} (the request's event id) and {run} (the run id).
// Other text in braces, such as JSON, is left as it is.
type Request struct {
	// Method defaults to GET.
	Method string `yaml:"method,omitempty"`
	// Path is appended to the target URL's path ("/orders" after
	// http://host/v1 asks for /v1/orders); it may carry a query.
	Path string `yaml:"path,omitempty"`
	// Headers are sent with every request (the identity header is added
	// as the policy declares).
	Headers map[string]string `yaml:"headers,omitempty"`
	// Body is sent as is; "@FILE" reads it from FILE, relative to the plan
	// and inside the plan's folder (see BodyFilesAnywhere). In
	// Options.Request, the caller's own, "@FILE" is any file, relative to
	// the working directory (as curl -d @FILE).
	Body string `yaml:"body,omitempty"`

	// bodyFromCaller marks a Body that came from Options.Request.
	bodyFromCaller bool
}

// fromCaller marks r as the caller's own request (Options.Request).
func (r Request) fromCaller() Request {
	r.bodyFromCaller = r.Body != ""
	return r
}

// bodyFiles says where a plan's "@FILE" bodies may be read from.
type bodyFiles struct {
	// dir resolves a relative FILE: the plan file's folder ("" the
	// working directory).
	dir string
	// anywhere lifts the confinement to dir (BodyFilesAnywhere).
	anywhere bool
}

// Template variables.
var templateVars = []string{"key", "tenant", "tier", "i", "run"}

// MaxBodyBytes bounds a request body.
const MaxBodyBytes = 1 << 20

// tmpl is a compiled template: literal text and variables in turn.
type tmpl struct {
	parts []tpart
	// hasIndex is set when {i} appears (the text differs per request).
	hasIndex bool
}

type tpart struct {
	lit string
	v   string // variable name, or "" for a literal
}

// compileTemplate splits s into literals and variables. A brace followed by
// letters and a closing brace is a variable and must be a known one; a
// brace followed by letters that never closes is an error; any other brace
// is literal text.
func compileTemplate(s string) (tmpl, error) {
	var t tmpl
	lit := strings.Builder{}
	for i := 0; i < len(s); {
		if s[i] != '{' {
			lit.WriteByte(s[i])
			i++
			continue
		}
		j := i + 1
		for j < len(s) && (s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] == '_') {
			j++
		}
		if j == i+1 {
			lit.WriteByte('{')
			i++
			continue
		}
		if j >= len(s) {
			return tmpl{}, fmt.Errorf("template %q: %q is not closed (want e.g. {key})", s, s[i:])
		}
		if s[j] != '}' {
			lit.WriteString(s[i:j])
			i = j
			continue
		}
		name := s[i+1 : j]
		known := false
		for _, v := range templateVars {
			known = known || v == name
		}
		if !known {
			return tmpl{}, fmt.Errorf("template %q: unknown variable {%s} (known: {key}, {tenant}, {tier}, {i}, {run})", s, name)
		}
		if lit.Len() > 0 {
			t.parts = append(t.parts, tpart{lit: lit.String()})
			lit.Reset()
		}
		t.parts = append(t.parts, tpart{v: name})
		t.hasIndex = t.hasIndex || name == "i"
		i = j + 1
	}
	if lit.Len() > 0 {
		t.parts = append(t.parts, tpart{lit: lit.String()})
	}
	return t, nil
}

// vars are the values of one request's templates.
type vars struct {
	key, tenant, tier, run string
	i                      uint64
}

func (t *tmpl) render(v *vars) string {
	if len(t.parts) == 1 && t.parts[0].v == "" {
		return t.parts[0].lit
	}
	var b strings.Builder
	for _, p := range t.parts {
		switch p.v {
		case "":
			b.WriteString(p.lit)
		case "key":
			b.WriteString(v.key)
		case "tenant":
			b.WriteString(v.tenant)
		case "tier":
			b.WriteString(v.tier)
		case "run":
			b.WriteString(v.run)
		case "i":
			b.WriteString(strconv.FormatUint(v.i, 10))
		}
	}
	return b.String()
}

func (t *tmpl) empty() bool { return len(t.parts) == 0 }

// shape is a compiled Request.
type shape struct {
	method  string
	path    tmpl
	headers []hdrTmpl
	body    tmpl
	// perRequest is set when some part holds {i}.
	perRequest bool
}

type hdrTmpl struct {
	name string
	val  tmpl
}

// merge returns r with the fields set in over taking precedence (headers
// are merged by name).
func (r Request) merge(over Request) Request {
	out := r
	if over.Method != "" {
		out.Method = over.Method
	}
	if over.Path != "" {
		out.Path = over.Path
	}
	if over.Body != "" {
		out.Body, out.bodyFromCaller = over.Body, over.bodyFromCaller
	}
	if len(over.Headers) > 0 {
		out.Headers = map[string]string{}
		for k, v := range r.Headers {
			out.Headers[k] = v
		}
		for k, v := range over.Headers {
			out.Headers[k] = v
		}
	}
	return out
}

// reservedHeaders are set by the engine itself.
var reservedHeaders = map[string]bool{"Host": true, "Content-Length": true, "Connection": true, "Transfer-Encoding": true}

// compile checks r and compiles its templates; files says where "@FILE"
// bodies of a plan may be read. Errors name the field (method, path,
// headers.NAME, body).
func (r Request) compile(files bodyFiles) (*shape, string, error) {
	s := &shape{method: strings.ToUpper(strings.TrimSpace(r.Method))}
	if s.method == "" {
		s.method = http.MethodGet
	}
	if !validMethod(s.method) {
		return nil, "method", fmt.Errorf("%q is not an HTTP method (want e.g. GET, POST)", r.Method)
	}
	var err error
	if r.Path != "" {
		if !strings.HasPrefix(r.Path, "/") {
			return nil, "path", fmt.Errorf("%q: a path starts with /", r.Path)
		}
		if strings.ContainsAny(r.Path, " \r\n\t#") {
			return nil, "path", fmt.Errorf("%q: a path must not contain spaces, control characters or a fragment (#)", r.Path)
		}
	}
	if s.path, err = compileTemplate(r.Path); err != nil {
		return nil, "path", err
	}
	names := make([]string, 0, len(r.Headers))
	for k := range r.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		ck := http.CanonicalHeaderKey(strings.TrimSpace(k))
		if !validHeaderName(ck) {
			return nil, "headers." + k, fmt.Errorf("%q is not a valid header name", k)
		}
		if reservedHeaders[ck] {
			return nil, "headers." + k, fmt.Errorf("%s is set by rlverify itself", ck)
		}
		v := r.Headers[k]
		if strings.ContainsAny(v, "\r\n") {
			return nil, "headers." + k, fmt.Errorf("a header value must not contain CR or LF")
		}
		t, err := compileTemplate(v)
		if err != nil {
			return nil, "headers." + k, err
		}
		s.headers = append(s.headers, hdrTmpl{name: ck, val: t})
		s.perRequest = s.perRequest || t.hasIndex
	}
	body := r.Body
	if strings.HasPrefix(body, "@") {
		var b []byte
		if r.bodyFromCaller {
			b, err = readLimited(body[1:], MaxBodyBytes)
		} else {
			b, err = files.read(body[1:])
		}
		if err != nil {
			return nil, "body", err
		}
		body = string(b)
	} else if len(body) > MaxBodyBytes {
		return nil, "body", fmt.Errorf("%d bytes; at most %d", len(body), MaxBodyBytes)
	}
	if s.body, err = compileTemplate(body); err != nil {
		return nil, "body", err
	}
	s.perRequest = s.perRequest || s.path.hasIndex || s.body.hasIndex
	return s, "", nil
}

// read reads a plan's body file name. A plan is text someone else may have
// written: unless anywhere, name must stay inside the plan's folder — no
// absolute path, no ".." out of it, no symbolic link leading out (os.Root
// resolves them), nothing under /proc — so a plan cannot send a local
// file such as /proc/self/environ to its target.
func (f bodyFiles) read(name string) ([]byte, error) {
	if f.anywhere {
		if !filepath.IsAbs(name) && f.dir != "" {
			name = filepath.Join(f.dir, name)
		}
		return readLimited(name, MaxBodyBytes)
	}
	dir := f.dir
	if dir == "" {
		dir = "."
	}
	refuse := func(why string) error {
		return fmt.Errorf("body file %q %s: a plan reads body files only inside its own folder %s (the load option BodyFilesAnywhere allows any file)", name, why, dir)
	}
	if name == "" {
		return nil, fmt.Errorf("body file: \"@\" names no file")
	}
	if filepath.IsAbs(name) || filepath.VolumeName(name) != "" {
		return nil, refuse("is an absolute path")
	}
	abs, err := filepath.Abs(dir)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return nil, fmt.Errorf("body file %q: the plan's folder: %w", name, err)
	}
	if abs == "/proc" || strings.HasPrefix(abs, "/proc/") {
		return nil, refuse("is under /proc")
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("body file %q: %w", name, err)
	}
	defer root.Close()
	fh, err := root.Open(name)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("body file: %w", err)
		}
		return nil, refuse("leads out of the folder (" + err.Error() + ")")
	}
	defer fh.Close()
	if st, err := fh.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, refuse("is not a regular file")
	}
	return readAllLimited(fh, filepath.Join(dir, name), MaxBodyBytes)
}

// readLimited reads at most limit bytes of file; a longer file is an error.
func readLimited(file string, limit int64) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("body file: %w", err)
	}
	defer f.Close()
	return readAllLimited(f, file, limit)
}

// readAllLimited reads at most limit bytes of f, named file in errors.
func readAllLimited(f io.Reader, file string, limit int64) ([]byte, error) {
	var b bytes.Buffer
	if _, err := b.ReadFrom(io.LimitReader(f, limit+1)); err != nil {
		return nil, fmt.Errorf("body file %s: %w", file, err)
	}
	if int64(b.Len()) > limit {
		return nil, fmt.Errorf("body file %s is larger than %d bytes", file, limit)
	}
	return b.Bytes(), nil
}

func validMethod(m string) bool { return validHeaderName(m) && strings.ToUpper(m) == m }

// validHeaderName reports an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// base is one instance's URL split for building requests.
type base struct {
	scheme, host string
	// path is the URL's path without a trailing slash ("" for none).
	path string
	// query is the URL's raw query ("" for none).
	query string
}

// SchemeGRPC is the scheme of a rate-limit service target (grpc://HOST:PORT):
// the engine builds its requests as for HTTP, and the caller's Options.Client
// must have a transport that speaks the protocol (envoyrls.Transport).
const SchemeGRPC = "grpc"

func parseBase(raw string) (base, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != SchemeGRPC) || u.Host == "" {
		return base{}, fmt.Errorf("target %q is not an http(s) URL, nor grpc://HOST:PORT", raw)
	}
	if u.User != nil {
		return base{}, fmt.Errorf("target %q: credentials in the URL are not sent; give them as a header", raw)
	}
	if u.Fragment != "" {
		return base{}, fmt.Errorf("target %q: a URL fragment (#…) is never sent", raw)
	}
	p := u.EscapedPath()
	p = strings.TrimSuffix(p, "/")
	return base{scheme: u.Scheme, host: u.Host, path: p, query: u.RawQuery}, nil
}

// requestTarget joins the base path and query with a phase path (which may
// carry its own query) and extra query parameters; empty gives def.
func (b base) requestTarget(phasePath, def string, extra []string) string {
	p, q, _ := strings.Cut(phasePath, "?")
	full := b.path + p
	if full == "" {
		full = def
	}
	if full == "" {
		full = "/"
	}
	qs := make([]string, 0, 3+len(extra))
	if b.query != "" {
		qs = append(qs, b.query)
	}
	if q != "" {
		qs = append(qs, q)
	}
	qs = append(qs, extra...)
	if len(qs) == 0 {
		return full
	}
	return full + "?" + strings.Join(qs, "&")
}

// URL returns the absolute URL of a request target on this base.
func (b base) URL(target string) string { return b.scheme + "://" + b.host + target }

// identityParts says how one request carries its identity: header lines and
// query parameters, from the policy's declaration and the values to send
// (usually one; a duplicated-identity variant sends two).
func identityParts(id *policy.Identity, keys []string) (hdrs [][2]string, query []string) {
	switch id.In {
	case policy.InQuery:
		for _, k := range keys {
			query = append(query, url.QueryEscape(id.Name)+"="+url.QueryEscape(k))
		}
	case policy.InCookie:
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = id.Name + "=" + sanitizeHeader(k)
		}
		hdrs = append(hdrs, [2]string{"Cookie", strings.Join(parts, "; ")})
	case policy.InBearer:
		for _, k := range keys {
			hdrs = append(hdrs, [2]string{id.Name, "Bearer " + sanitizeHeader(k)})
		}
	default:
		for _, k := range keys {
			hdrs = append(hdrs, [2]string{id.Name, sanitizeHeader(k)})
		}
	}
	return hdrs, query
}

// wireReq is one request ready to send.
type wireReq struct {
	method string
	// target is the request-target: path and query.
	target string
	hdrs   [][2]string
	body   []byte
	// info is what a transport that does not speak HTTP reads (InfoOf).
	info RequestInfo
}

// RequestInfo is what the engine knows of a request beyond its HTTP form:
// the key sent (a variant's spelling when it sends one), the plan's logical
// key and the key's tier. A transport for a target that is not HTTP (a
// grpc:// rate-limit service) reads it with InfoOf to build its call.
type RequestInfo struct {
	Key, Tenant, Tier string
}

type infoKey struct{}

// InfoOf is the RequestInfo of an HTTP request the engine built; false for
// any other request (the engine's connection warm-up).
func InfoOf(ctx context.Context) (RequestInfo, bool) {
	i, ok := ctx.Value(infoKey{}).(RequestInfo)
	return i, ok
}

// wire renders r: the phase's shape with r's template values, the
// identity placed as the policy declares, and r's variant changes.
func (e *Engine) wire(r *req) wireReq {
	sh := r.shape
	if sh == nil {
		sh = e.defShape
	}
	v := vars{key: r.sendKey(), tenant: r.tenant, tier: e.keys.tier(r.key), run: e.o.RunID, i: r.id}
	w := wireReq{method: sh.method, info: RequestInfo{Key: v.key, Tenant: v.tenant, Tier: v.tier}}
	path := sh.path.render(&v)
	if r.path != "" {
		path = r.path
	}
	ih, iq := identityParts(&e.o.Policy.Identity, r.identity())
	iq = append(iq, r.query...)
	ch, cq, weighted := costParts(e.o.Policy.Cost, r)
	if weighted && cq != "" {
		iq = append(iq, cq)
	}
	if r.absPath {
		w.target = absTarget(r.path, iq)
	} else {
		w.target = e.bases[r.inst].requestTarget(path, e.defPath, iq)
	}
	for _, h := range sh.headers {
		w.hdrs = append(w.hdrs, [2]string{h.name, sanitizeHeader(h.val.render(&v))})
	}
	w.hdrs = append(w.hdrs, ih...)
	if weighted && cq == "" {
		w.hdrs = append(w.hdrs, ch)
	}
	if r.xff != "" {
		w.hdrs = append(w.hdrs, [2]string{"X-Forwarded-For", sanitizeHeader(r.xff)})
	}
	if !sh.body.empty() {
		w.body = []byte(sh.body.render(&v))
	}
	return w
}

// raw is w as HTTP/1.1 bytes for host; close asks the server to close the
// connection after answering.
func (w *wireReq) raw(host string, close bool) []byte {
	var b bytes.Buffer
	b.Grow(160 + len(w.body))
	b.WriteString(w.method)
	b.WriteByte(' ')
	b.WriteString(w.target)
	b.WriteString(" HTTP/1.1\r\nHost: ")
	b.WriteString(host)
	b.WriteString("\r\nUser-Agent: rlverify\r\n")
	if close {
		b.WriteString("Connection: close\r\n")
	}
	for _, h := range w.hdrs {
		b.WriteString(h[0])
		b.WriteString(": ")
		b.WriteString(h[1])
		b.WriteString("\r\n")
	}
	if len(w.body) > 0 || methodWantsBody(w.method) {
		b.WriteString("Content-Length: ")
		b.WriteString(strconv.Itoa(len(w.body)))
		b.WriteString("\r\n")
	}
	b.WriteString("\r\n")
	b.Write(w.body)
	return b.Bytes()
}

func methodWantsBody(m string) bool {
	return m == http.MethodPost || m == http.MethodPut || m == http.MethodPatch
}

// http builds w as a net/http request on b. Header order and repeated
// headers are kept; net/http trims white space around header values, which
// is why the space variant needs plain http:// targets.
func (w *wireReq) http(ctx context.Context, b base) (*http.Request, error) {
	var body io.Reader
	if len(w.body) > 0 {
		body = bytes.NewReader(w.body)
	}
	if b.scheme != "http" && b.scheme != "https" {
		ctx = context.WithValue(ctx, infoKey{}, w.info)
	}
	hr, err := http.NewRequestWithContext(ctx, w.method, b.URL(w.target), body)
	if err != nil {
		return nil, fmt.Errorf("build request for %s: %w", b.URL(w.target), err)
	}
	hr.Header.Set("User-Agent", "rlverify")
	for _, h := range w.hdrs {
		hr.Header.Add(h[0], h[1])
	}
	return hr, nil
}

// ParseHeaders reads 'Name: value' lines into request headers (nil for
// none); the last of a name wins.
func ParseHeaders(lines []string) (map[string]string, error) {
	var out map[string]string
	for _, h := range lines {
		name, val, ok := strings.Cut(h, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, fmt.Errorf("%q: want 'Name: value'", h)
		}
		if out == nil {
			out = map[string]string{}
		}
		out[name] = strings.TrimSpace(val)
	}
	return out, nil
}
