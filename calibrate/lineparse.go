package calibrate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// parsed is one request read from a line; key and route alias the line.
type parsed struct {
	key    []byte
	at     int64 // Unix ns
	status int
	route  []byte
	tier   []byte
}

// lineParser reads one access-log line; it returns why the line is
// malformed, or "".
type lineParser interface {
	parse(b []byte, rec *parsed) string
}

func newLineParser(o *ReadOptions) (lineParser, error) {
	if (o.KeyField == "") == (o.KeyRegex == nil) {
		return nil, fmt.Errorf("calibrate: %s logs need where the key is: a key field or a key regex (one of them)", o.Format)
	}
	if o.KeyRegex != nil && o.KeyRegex.NumSubexp() < 1 {
		return nil, fmt.Errorf("calibrate: key regex %q has no capture group: put the key in ( )", o.KeyRegex.String())
	}
	tc := &timeCache{}
	if o.Format == Combined {
		c := &combinedParser{re: o.KeyRegex, tc: tc, extra: -1, tierExtra: -1}
		if o.TierField != "" {
			n, err := strconv.Atoi(strings.TrimPrefix(o.TierField, "extra"))
			if err != nil || !strings.HasPrefix(o.TierField, "extra") || n < 1 || n > 32 {
				return nil, fmt.Errorf("calibrate: combined tier field %q: want extraN (N from 1 to 32: the N-th field after the user agent)", o.TierField)
			}
			c.tierExtra = n
		}
		if o.KeyRegex == nil {
			switch f := o.KeyField; {
			case f == "ip":
				c.field = keyIP
			case f == "user":
				c.field = keyUser
			case strings.HasPrefix(f, "extra"):
				n, err := strconv.Atoi(strings.TrimPrefix(f, "extra"))
				if err != nil || n < 1 || n > 32 {
					return nil, fmt.Errorf("calibrate: combined key field %q: want ip, user or extraN (N from 1 to 32: the N-th field after the user agent)", f)
				}
				c.field, c.extra = keyExtra, n
			default:
				return nil, fmt.Errorf("calibrate: combined key field %q: want ip, user or extraN (the N-th field after the user agent, e.g. \"$http_x_api_key\")", f)
			}
		}
		return c, nil
	}
	unit := int64(1e9)
	switch o.TimeUnit {
	case "", "s":
	case "ms":
		unit = 1e6
	case "us":
		unit = 1e3
	case "ns":
		unit = 1
	default:
		return nil, fmt.Errorf("calibrate: time unit %q: want s, ms, us or ns", o.TimeUnit)
	}
	j := &jsonParser{re: o.KeyRegex, tc: tc, unit: unit, tierIdx: -1}
	paths := []string{or(o.TimeField, "time"), or(o.StatusField, "status"), or(o.RouteField, "path")}
	if o.KeyRegex == nil {
		paths = append(paths, o.KeyField)
	}
	if o.TierField != "" {
		j.tierIdx = len(paths)
		paths = append(paths, o.TierField)
	}
	for _, p := range paths {
		if p == "" || strings.Contains(p, "..") || strings.HasPrefix(p, ".") || strings.HasSuffix(p, ".") {
			return nil, fmt.Errorf("calibrate: JSON field %q: want a name, dotted for nested objects (headers.x-api-key)", p)
		}
		j.paths = append(j.paths, strings.Split(p, "."))
	}
	return j, nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// ----------------------------------------------------------------- combined

const (
	keyIP = iota
	keyUser
	keyExtra
)

// combinedParser reads
//
//	$remote_addr - $remote_user [$time_local] "$request" $status $bytes "$referer" "$agent" [more fields…]
//
// The time may be CLF (02/Jan/2006:15:04:05 -0700, optionally with a
// fraction of a second after the seconds), RFC 3339, or Unix seconds.
type combinedParser struct {
	re        *regexp.Regexp
	field     int
	extra     int
	tierExtra int // -1: no tier field
	tc        *timeCache
}

func (c *combinedParser) parse(b []byte, rec *parsed) string {
	i := bytes.IndexByte(b, ' ')
	if i <= 0 {
		return "not a combined log line: no address field"
	}
	ip := b[:i]
	rest := b[i+1:]
	// ident
	if i = bytes.IndexByte(rest, ' '); i < 0 {
		return "not a combined log line: no user field"
	}
	rest = rest[i+1:]
	if i = bytes.IndexByte(rest, ' '); i < 0 {
		return "not a combined log line: no time field"
	}
	user := rest[:i]
	rest = rest[i+1:]
	if len(rest) == 0 || rest[0] != '[' {
		return "not a combined log line: no [time] after the user"
	}
	if i = bytes.IndexByte(rest, ']'); i < 0 {
		return "not a combined log line: [time] is not closed"
	}
	at, err := c.tc.parse(rest[1:i])
	if err != "" {
		return err
	}
	rest = bytes.TrimLeft(rest[i+1:], " ")
	req, rest, ok := quoted(rest)
	if !ok {
		return "not a combined log line: no quoted request after the time"
	}
	rest = bytes.TrimLeft(rest, " ")
	i = bytes.IndexByte(rest, ' ')
	if i < 0 {
		i = len(rest)
	}
	status, serr := atoi(rest[:i])
	if serr || status < 100 || status > 999 {
		return fmt.Sprintf("status %q is not an HTTP status", clip(rest[:i]))
	}
	rec.at, rec.status = at, status
	// The path of "GET /path?q HTTP/1.1", without the query.
	if sp := bytes.IndexByte(req, ' '); sp >= 0 {
		p := req[sp+1:]
		if e := bytes.IndexByte(p, ' '); e >= 0 {
			p = p[:e]
		}
		if q := bytes.IndexByte(p, '?'); q >= 0 {
			p = p[:q]
		}
		rec.route = p
	}
	if c.re != nil {
		if m := c.re.FindSubmatch(b); m != nil {
			rec.key = m[1]
		}
	} else {
		switch c.field {
		case keyIP:
			rec.key = ip
		case keyUser:
			rec.key = user
		}
	}
	want := c.tierExtra
	if c.re == nil && c.field == keyExtra {
		want = max(want, c.extra)
	}
	if want < 1 {
		return ""
	}
	rest = rest[i:]
	// bytes sent, then referer, agent, extra1…
	for n := -2; n <= want; n++ {
		rest = bytes.TrimLeft(rest, " ")
		if len(rest) == 0 {
			return fmt.Sprintf("no field extra%d: the line ends after %d fields past the user agent", want, max(0, n-1))
		}
		var f []byte
		if rest[0] == '"' {
			if f, rest, ok = quoted(rest); !ok {
				return "a quoted field is not closed"
			}
		} else {
			e := bytes.IndexByte(rest, ' ')
			if e < 0 {
				e = len(rest)
			}
			f, rest = rest[:e], rest[e:]
		}
		if c.re == nil && c.field == keyExtra && n == c.extra {
			rec.key = f
		}
		if n == c.tierExtra {
			rec.tier = f
		}
	}
	return ""
}

// quoted returns the content of the quoted string b starts with (nginx
// escapes a quote inside as \x22, Apache as \").
func quoted(b []byte) (content, rest []byte, ok bool) {
	if len(b) == 0 || b[0] != '"' {
		return nil, b, false
	}
	for i := 1; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return b[1:i], b[i+1:], true
		}
	}
	return nil, b, false
}

func atoi(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 9 {
		return 0, true
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, true
		}
		n = n*10 + int(c-'0')
	}
	return n, false
}

func clip(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}

// ----------------------------------------------------------------- times

// timeCache parses log times, remembering the last text parsed (consecutive
// lines of a busy log share their second).
type timeCache struct {
	last []byte
	ns   int64
}

var months = map[string]time.Month{"Jan": 1, "Feb": 2, "Mar": 3, "Apr": 4, "May": 5, "Jun": 6, "Jul": 7, "Aug": 8, "Sep": 9, "Oct": 10, "Nov": 11, "Dec": 12}

// parse reads CLF (02/Jan/2006:15:04:05[.fff] -0700), RFC 3339 or Unix
// seconds with an exact decimal fraction.
func (c *timeCache) parse(b []byte) (int64, string) {
	if c.last != nil && bytes.Equal(b, c.last) {
		return c.ns, ""
	}
	ns, ok := parseCLF(b)
	if !ok {
		if t, err := time.Parse(time.RFC3339Nano, string(b)); err == nil {
			ns, ok = t.UnixNano(), true
		} else if v, okd := parseDecimal(b, 1e9); okd {
			ns, ok = v, true
		}
	}
	if !ok {
		return 0, fmt.Sprintf("time %q is not CLF (02/Jan/2006:15:04:05 -0700), RFC 3339 or Unix seconds", clip(b))
	}
	c.last = append(c.last[:0], b...)
	c.ns = ns
	return ns, ""
}

func parseCLF(b []byte) (int64, bool) {
	// 02/Jan/2006:15:04:05 -0700 (26 bytes), maybe .fff after the seconds.
	if len(b) < 26 || b[2] != '/' || b[6] != '/' || b[11] != ':' || b[14] != ':' || b[17] != ':' {
		return 0, false
	}
	num := func(s []byte) int {
		n, bad := atoi(s)
		if bad {
			return -1
		}
		return n
	}
	day, year, hh, mm, ss := num(b[0:2]), num(b[7:11]), num(b[12:14]), num(b[15:17]), num(b[18:20])
	mon, okm := months[string(b[3:6])]
	if day < 1 || day > 31 || year < 0 || hh < 0 || hh > 23 || mm < 0 || mm > 59 || ss < 0 || ss > 60 || !okm {
		return 0, false
	}
	rest := b[20:]
	var frac int64
	if len(rest) > 0 && rest[0] == '.' {
		e := bytes.IndexByte(rest, ' ')
		if e < 2 || e > 10 {
			return 0, false
		}
		f, bad := atoi(rest[1:e])
		if bad {
			return 0, false
		}
		frac = int64(f)
		for k := e - 1; k < 9; k++ {
			frac *= 10
		}
		rest = rest[e:]
	}
	if len(rest) != 6 || rest[0] != ' ' || (rest[1] != '+' && rest[1] != '-') {
		return 0, false
	}
	zh, zm := num(rest[2:4]), num(rest[4:6])
	if zh < 0 || zm < 0 {
		return 0, false
	}
	off := (zh*60 + zm) * 60
	if rest[1] == '-' {
		off = -off
	}
	t := time.Date(year, mon, day, hh, mm, ss, 0, time.UTC)
	if t.Day() != day {
		return 0, false // 31/Feb
	}
	return t.Unix()*1e9 - int64(off)*1e9 + frac, true
}

// parseDecimal reads a non-negative decimal number of units exactly
// (1700000000.1 s is 1700000000100000000 ns, not the float's neighbour)
// and returns it in ns; unit is ns per unit.
func parseDecimal(b []byte, unit int64) (int64, bool) {
	if len(b) == 0 || len(b) > 30 {
		return 0, false
	}
	ip, fp, _ := bytes.Cut(b, []byte{'.'})
	if len(ip) == 0 || len(ip) > 19 {
		return 0, false
	}
	whole, err := strconv.ParseInt(string(ip), 10, 64)
	if err != nil || whole < 0 || whole > math.MaxInt64/unit {
		return 0, false
	}
	ns := whole * unit
	if len(fp) > 0 {
		scale := unit
		var add int64
		for _, c := range fp {
			if c < '0' || c > '9' {
				return 0, false
			}
			if scale >= 10 {
				scale /= 10
				add += int64(c-'0') * scale
			}
		}
		ns += add
	}
	return ns, true
}

// ----------------------------------------------------------------- JSON

// jsonParser reads one JSON object per line and picks a few fields by
// path. It walks the object once, without building it: encoding/json into
// a map costs several microseconds a line, and a week of logs has 10^7.
type jsonParser struct {
	re    *regexp.Regexp
	paths [][]string // time, status, route[, key][, tier]
	vals  [5]jsonVal
	// tierIdx is the index of the tier field in paths, -1 for none.
	tierIdx int
	tc      *timeCache
	unit    int64
	unq     []byte
	// dup is the index in paths of a field that appeared twice in the
	// line, -1 for none: readers disagree on which one counts
	// (encoding/json takes the last), so such a line is refused.
	dup int
}

type jsonVal struct {
	raw   []byte // the value's text (strings without their quotes)
	str   bool
	esc   bool // a string with escapes
	found bool
}

func (j *jsonParser) parse(b []byte, rec *parsed) string {
	for i := range j.vals {
		j.vals[i] = jsonVal{}
	}
	j.dup = -1
	s := jsonScan{b: b}
	s.ws()
	if s.i >= len(b) || b[s.i] != '{' {
		return "not a JSON object"
	}
	if !s.object(j, 0, nil) {
		return fmt.Sprintf("invalid JSON at byte %d", s.i+1)
	}
	s.ws()
	if s.i != len(b) {
		return fmt.Sprintf("text after the JSON object at byte %d", s.i+1)
	}
	if j.dup >= 0 {
		return fmt.Sprintf("field %q appears more than once", strings.Join(j.paths[j.dup], "."))
	}
	tv := j.vals[0]
	if !tv.found {
		return fmt.Sprintf("no time field %q", strings.Join(j.paths[0], "."))
	}
	if tv.str {
		at, why := j.tc.parse(tv.raw)
		if why != "" {
			return why
		}
		rec.at = at
	} else {
		ns, ok := parseDecimal(tv.raw, j.unit)
		if !ok {
			return fmt.Sprintf("time %s is not a Unix time ≥ 0 before 2262 in the time unit (milliseconds need the ms unit)", clip(tv.raw))
		}
		rec.at = ns
	}
	if sv := j.vals[1]; sv.found {
		st, bad := atoi(sv.raw)
		if bad || st < 100 || st > 999 {
			return fmt.Sprintf("status %s is not an HTTP status", clip(sv.raw))
		}
		rec.status = st
	}
	if rv := j.vals[2]; rv.found && rv.str {
		rec.route = rv.raw
		if q := bytes.IndexByte(rec.route, '?'); q >= 0 {
			rec.route = rec.route[:q]
		}
	}
	if j.tierIdx >= 0 {
		if tv := j.vals[j.tierIdx]; tv.found && tv.str && !tv.esc {
			rec.tier = tv.raw
		} else if tv.found && tv.esc {
			return fmt.Sprintf("tier %q: escapes in a tier name", clip(tv.raw))
		}
	}
	if j.re != nil {
		if m := j.re.FindSubmatch(b); m != nil {
			rec.key = m[1]
		}
		return ""
	}
	if kv := j.vals[3]; kv.found {
		switch {
		case kv.esc:
			var s string
			if err := json.Unmarshal(append(append([]byte{'"'}, kv.raw...), '"'), &s); err != nil {
				return fmt.Sprintf("key %q: %v", clip(kv.raw), err)
			}
			j.unq = append(j.unq[:0], s...)
			rec.key = j.unq
		case kv.str || (len(kv.raw) > 0 && kv.raw[0] != 'n'): // a number is a key too; null is none
			rec.key = kv.raw
		}
	}
	return ""
}

type jsonScan struct {
	b []byte
	i int
}

func (s *jsonScan) ws() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\r' || s.b[s.i] == '\n') {
		s.i++
	}
}

// object scans an object at s.i; prefix is the path of this object, and
// fields whose path matches one of j.paths are recorded.
func (s *jsonScan) object(j *jsonParser, depth int, prefix []string) bool {
	if depth > 32 {
		return false
	}
	s.i++ // {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return true
	}
	for {
		s.ws()
		name, _, esc, ok := s.str()
		if !ok {
			return false
		}
		if esc {
			// A name spelled with escapes ("\u006b") is the same name.
			var n string
			if json.Unmarshal(append(append([]byte{'"'}, name...), '"'), &n) != nil {
				return false
			}
			name = []byte(n)
		}
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.ws()
		want, deeper := -1, false
		for k, p := range j.paths {
			if len(p) <= depth || p[depth] != string(name) || !samePrefix(p, prefix) {
				continue
			}
			if len(p) == depth+1 {
				want = k
			} else {
				deeper = true
			}
		}
		if s.i >= len(s.b) {
			return false
		}
		switch {
		case deeper && s.b[s.i] == '{':
			if !s.object(j, depth+1, append(prefix, string(name))) {
				return false
			}
		case want >= 0:
			v, ok := s.value(depth)
			if !ok {
				return false
			}
			if j.vals[want].found {
				j.dup = want
			}
			j.vals[want] = v
		default:
			if _, ok := s.value(depth); !ok {
				return false
			}
		}
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		if s.b[s.i] == '}' {
			s.i++
			return true
		}
		if s.b[s.i] != ',' {
			return false
		}
		s.i++
	}
}

func samePrefix(p, prefix []string) bool {
	for i, x := range prefix {
		if p[i] != x {
			return false
		}
	}
	return true
}

// str scans a string at s.i and returns its raw content.
func (s *jsonScan) str() (raw []byte, end int, esc, ok bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, 0, false, false
	}
	start := s.i + 1
	for k := start; k < len(s.b); k++ {
		switch c := s.b[k]; {
		case c == '\\':
			esc = true
			k++
			if k >= len(s.b) {
				return nil, 0, false, false
			}
			switch s.b[k] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if k+4 >= len(s.b) {
					return nil, 0, false, false
				}
				for _, h := range s.b[k+1 : k+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return nil, 0, false, false
					}
				}
				k += 4
			default:
				return nil, 0, false, false
			}
		case c == '"':
			s.i = k + 1
			return s.b[start:k], k, esc, true
		case c < 0x20:
			return nil, 0, false, false
		}
	}
	return nil, 0, false, false
}

// value scans any value and returns it (containers as their raw text).
func (s *jsonScan) value(depth int) (jsonVal, bool) {
	if s.i >= len(s.b) || depth > 32 {
		return jsonVal{}, false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		raw, _, esc, ok := s.str()
		return jsonVal{raw: raw, str: true, esc: esc, found: true}, ok
	case c == '{' || c == '[':
		start := s.i
		close := byte('}')
		if c == '[' {
			close = ']'
		}
		s.i++
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == close {
			s.i++
			return jsonVal{raw: s.b[start:s.i], found: true}, true
		}
		for {
			s.ws()
			if c == '{' {
				if _, _, _, ok := s.str(); !ok {
					return jsonVal{}, false
				}
				s.ws()
				if s.i >= len(s.b) || s.b[s.i] != ':' {
					return jsonVal{}, false
				}
				s.i++
				s.ws()
			}
			if _, ok := s.value(depth + 1); !ok {
				return jsonVal{}, false
			}
			s.ws()
			if s.i >= len(s.b) {
				return jsonVal{}, false
			}
			if s.b[s.i] == close {
				s.i++
				return jsonVal{raw: s.b[start:s.i], found: true}, true
			}
			if s.b[s.i] != ',' {
				return jsonVal{}, false
			}
			s.i++
		}
	default:
		start := s.i
		for s.i < len(s.b) {
			c := s.b[s.i]
			if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\r' || c == '\n' {
				break
			}
			s.i++
		}
		raw := s.b[start:s.i]
		switch {
		case len(raw) == 0:
			return jsonVal{}, false
		case string(raw) == "true" || string(raw) == "false" || string(raw) == "null":
		case raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'):
			if !jsonNumber(raw) {
				return jsonVal{}, false
			}
		default:
			return jsonVal{}, false
		}
		return jsonVal{raw: raw, found: true}, true
	}
}

// jsonNumber reports whether b is a JSON number:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func jsonNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(b)
}
