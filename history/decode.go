package history

import (
	"encoding/binary"
	"math/bits"
	"strconv"
	"sync"
	"unicode/utf8"
)

// The fast event decoder.
//
// Reading a history is dominated by decoding event lines; encoding/json
// (reflection, a Decoder per line, one allocation per string field) manages
// about a million lines a second. decodeEventFast handles the lines this
// package writes, and anything equally plain, by hand: known field names
// spelt exactly, integers, strings with simple escapes, whitespace between
// tokens. Whenever a line steps outside that (an unknown or differently
// cased field name, null, a number with a fraction or exponent, a \u
// escape, trailing data, malformed JSON, …) it reports !ok and the caller
// falls back to encoding/json, so the result is always what encoding/json
// gives: the same Event, or an error. FuzzDecodeEvent checks this.
//
// Repeated string values (keys, phases, tiers, header values) are interned
// through a small cache, so a million events share a few thousand strings:
// less memory, fewer allocations, and the checkers' passes over the events
// touch less memory.

// eventField identifies an Event field by its JSON name.
type eventField uint8

const (
	fNone eventField = iota
	fT
	fID
	fKey
	fVariant
	fTier
	fInst
	fPhase
	fIntended
	fSent
	fRecv
	fStatus
	fRetryAfter
	fRateLimit
	fRateLimitPolicy
	fXLimit
	fXRemaining
	fXReset
	fRLLimit
	fRLRemaining
	fRLReset
	fPath
	fFallback
	fScope
	fErr
	fBody
	fCost
	fDate
	fieldCount
)

// fieldToken is each field's name as it is written before its value,
// `"name":`, and as a pattern.
var fieldToken, fieldPattern = func() (t [fieldCount]string, p [fieldCount]pattern) {
	for name, f := range eventFieldNames {
		t[f] = `"` + name + `":`
		p[f] = newPattern([]byte(t[f]))
	}
	return t, p
}()

// pattern is a few bytes (1 to 16; none when n is 0) to find at the start
// of a slice, as two little-endian words and their masks: found with two
// loads and compares rather than a call to compare strings, which took a
// fifth of the decoder's time on the names alone.
type pattern struct {
	w, m [2]uint64
	n    int
}

// newPattern is b's pattern; none when b is longer than 16 bytes.
func newPattern(b []byte) (p pattern) {
	if len(b) > 16 {
		return p
	}
	var buf [16]byte
	copy(buf[:], b)
	for k := range 2 {
		p.w[k] = binary.LittleEndian.Uint64(buf[8*k:])
		if n := len(b) - 8*k; n >= 8 {
			p.m[k] = ^uint64(0)
		} else if n > 0 {
			p.m[k] = 1<<(8*n) - 1
		}
	}
	p.n = len(b)
	return p
}

// at says whether b starts with the pattern.
func (p *pattern) at(b []byte) bool {
	if p.n == 0 {
		return false
	}
	if len(b) < 16 {
		var buf [16]byte
		if copy(buf[:], b) < p.n {
			return false
		}
		b = buf[:]
	}
	return binary.LittleEndian.Uint64(b)&p.m[0] == p.w[0] && binary.LittleEndian.Uint64(b[8:])&p.m[1] == p.w[1]
}

// eventFieldNames lists every JSON name of Event (TestDecodeKnowsEveryField
// keeps it in step with the struct tags).
var eventFieldNames = map[string]eventField{
	"t": fT, "id": fID, "key": fKey, "variant": fVariant, "tier": fTier, "inst": fInst, "phase": fPhase,
	"intended": fIntended, "sent": fSent, "recv": fRecv, "status": fStatus,
	"retry_after": fRetryAfter, "ratelimit": fRateLimit, "ratelimit_policy": fRateLimitPolicy,
	"x_limit": fXLimit, "x_remaining": fXRemaining, "x_reset": fXReset,
	"rl_limit": fRLLimit, "rl_remaining": fRLRemaining, "rl_reset": fRLReset, "path": fPath, "fallback": fFallback, "scope": fScope, "err": fErr,
	"body": fBody, "cost": fCost, "date": fDate,
}

// lookupField maps a raw (unescaped) field name to its field without the
// map lookup's hashing for the common names.
func lookupField(name []byte) eventField {
	switch len(name) {
	case 1:
		if name[0] == 't' {
			return fT
		}
	case 2:
		if name[0] == 'i' && name[1] == 'd' {
			return fID
		}
	case 3:
		switch string(name) {
		case "key":
			return fKey
		case "err":
			return fErr
		}

	case 4:
		switch string(name) {
		case "inst":
			return fInst
		case "sent":
			return fSent
		case "recv":
			return fRecv
		case "tier":
			return fTier
		case "cost":
			return fCost
		}
	case 5:
		switch string(name) {
		case "phase":
			return fPhase
		case "scope":
			return fScope
		}
	case 6:
		if string(name) == "status" {
			return fStatus
		}
	case 7:
		switch string(name) {
		case "x_limit":
			return fXLimit
		case "x_reset":
			return fXReset
		case "variant":
			return fVariant
		}
	case 8:
		switch string(name) {
		case "intended":
			return fIntended
		case "fallback":
			return fFallback
		}
	case 9:
		if string(name) == "ratelimit" {
			return fRateLimit
		}
	case 11:
		switch string(name) {
		case "x_remaining":
			return fXRemaining
		case "retry_after":
			return fRetryAfter
		}
	case 16:
		if string(name) == "ratelimit_policy" {
			return fRateLimitPolicy
		}
	}
	return eventFieldNames[string(name)] // no allocation: the compiler uses the bytes
}

// internBits is log2 of the slots of an internCache.
const internBits = 14

// internCache is a direct-mapped cache of recently decoded strings, and
// what the decoder remembers of the line it decoded last.
type internCache struct {
	slots [1 << internBits]string
	buf   []byte // unescaping scratch
	// Lines of one file mostly repeat the previous line's fields in the
	// same order, spelt the same way, many with the same values, so the
	// decoder reads a line against what it saw: next[f] is the field that
	// followed f last (next[fNone] the first), and last[f] the value of
	// string field f. A name is first compared with its expected
	// spelling, `"name":`, a value with the last one, before the general
	// scan and the cache's hash; a line that differs takes the general
	// path from there, with the same result.
	next [fieldCount]eventField
	last [fieldCount]string
	// lastAt is last[f] as written, with its closing quote, when it was
	// written without escapes.
	lastAt [fieldCount]pattern
}

var internPool = sync.Pool{New: func() any { return new(internCache) }}

// maxIntern bounds the length of strings worth interning.
const maxIntern = 64

func (c *internCache) str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > maxIntern {
		return string(b)
	}
	slot := &c.slots[internHash(b)]
	if *slot == string(b) { // no allocation for the comparison
		return *slot
	}
	s := string(b)
	*slot = s
	return s
}

// internHash is the slot of b (1 to maxIntern bytes), from its length and its first
// and last eight bytes: values that differ only in the middle share a
// slot and merely evict each other. A byte-by-byte FNV hash took a quarter
// of the decoder's time.
func internHash(b []byte) int {
	var lo, hi uint64
	if len(b) >= 8 {
		lo = binary.LittleEndian.Uint64(b)
		hi = binary.LittleEndian.Uint64(b[len(b)-8:])
	} else {
		for i, x := range b {
			lo |= uint64(x) << (8 * i)
		}
	}
	// The top bits of a product depend on every bit of its factors.
	h := (lo ^ bits.RotateLeft64(hi, 31) ^ uint64(len(b))) * 0x9E3779B97F4A7C15
	return int(h >> (64 - internBits))
}

// decodeEventFast decodes one event line into e (which must be the zero
// Event). ok is false when the line is anything but the plain form handled
// here; e is then in an unspecified state and the caller must decode the
// line with encoding/json instead.
func decodeEventFast(b []byte, e *Event) (ok bool) {
	c := internPool.Get().(*internCache)
	ok = c.decode(b, e)
	internPool.Put(c)
	return ok
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

func (c *internCache) decode(b []byte, e *Event) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		i++
		return skipSpace(b, i) == len(b)
	}
	prev := fNone
	for {
		// Field name: the one expected, spelt as expected, else scanned.
		var f eventField
		if p := &fieldPattern[c.next[prev]]; p.at(b[i:]) {
			f = c.next[prev]
			i += p.n
		} else if tok := fieldToken[c.next[prev]]; len(tok) > 16 && len(b)-i >= len(tok) && string(b[i:i+len(tok)]) == tok {
			f = c.next[prev]
			i += len(tok)
		} else {
			if i >= len(b) || b[i] != '"' {
				return false
			}
			j := i + 1
			for j < len(b) && b[j] != '"' && b[j] != '\\' && b[j] >= 0x20 && b[j] < utf8.RuneSelf {
				j++
			}
			if j >= len(b) || b[j] != '"' {
				return false // escapes or non-ASCII in a name: not ours
			}
			if f = lookupField(b[i+1 : j]); f == fNone {
				return false
			}
			c.next[prev] = f
			i = skipSpace(b, j+1)
			if i >= len(b) || b[i] != ':' {
				return false
			}
			i++
		}
		prev = f
		if i < len(b) && isSpace(b[i]) {
			i = skipSpace(b, i)
		}
		if i >= len(b) {
			return false
		}
		// Value.
		switch f {
		case fID:
			v, n, ok := parseUint(b[i:])
			if !ok {
				return false
			}
			e.ID = v
			i += n
		case fCost:
			v, n, ok := parseInt(b[i:])
			if !ok || v < 0 || v > MaxEventCost {
				return false // encoding/json says what is wrong
			}
			e.Cost = CostOf(v)
			i += n
		case fInst, fIntended, fSent, fRecv, fStatus:
			v, n, ok := parseInt(b[i:])
			if !ok {
				return false
			}
			i += n
			switch f {
			case fInst:
				e.Instance = int(v)
			case fIntended:
				e.Intended = v
			case fSent:
				e.Sent = v
			case fRecv:
				e.Recv = v
			case fStatus:
				e.Status = int(v)
			}
		default:
			s, n, ok := c.parseString(b[i:], f)
			if !ok {
				return false
			}
			i += n
			switch f {
			case fT:
				e.T = s
			case fKey:
				e.Key = s
			case fVariant:
				e.Variant = s
			case fTier:
				e.Tier = s
			case fPhase:
				e.Phase = s
			case fRetryAfter:
				e.RetryAfter = s
			case fRateLimit:
				e.RateLimit = s
			case fRateLimitPolicy:
				e.RateLimitPolicy = s
			case fXLimit:
				e.XLimit = s
			case fXRemaining:
				e.XRemaining = s
			case fXReset:
				e.XReset = s
			case fRLLimit:
				e.RateLimitLimit = s
			case fRLRemaining:
				e.RateLimitRemaining = s
			case fRLReset:
				e.RateLimitReset = s
			case fPath:
				e.Path = s
			case fFallback:
				e.Fallback = s
			case fScope:
				e.Scope = s
			case fErr:
				e.Err = s
			case fBody:
				e.Body = s
			case fDate:
				e.Date = s
			}
		}
		if i < len(b) && isSpace(b[i]) {
			i = skipSpace(b, i)
		}
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i++
			if i < len(b) && isSpace(b[i]) {
				i = skipSpace(b, i)
			}
		case '}':
			c.next[prev] = fNone
			return skipSpace(b, i+1) == len(b)
		default:
			return false
		}
	}
}

// endOfNumber reports whether b[n:] can follow a JSON integer: a number
// continuing with a fraction, exponent or more digits is not ours.
func endOfNumber(b []byte, n int) bool {
	if n >= len(b) {
		return true
	}
	switch b[n] {
	case '.', 'e', 'E', '+', '-':
		return false
	}
	return b[n] < '0' || b[n] > '9'
}

// parseUint parses a JSON integer without sign into a uint64.
func parseUint(b []byte) (v uint64, n int, ok bool) {
	if len(b) == 0 || b[0] < '0' || b[0] > '9' {
		return 0, 0, false
	}
	if b[0] == '0' {
		return 0, 1, endOfNumber(b, 1)
	}
	if len(b) >= 16 {
		// Up to 15 digits (a send time has 9 to 13) from two words: where
		// the digits end, then their value, without a loop.
		x := binary.LittleEndian.Uint64(b)
		if nd := nonDigits(x); nd != 0 {
			k := bits.TrailingZeros64(nd) / 8
			v = digitsValue(x << (64 - 8*k))
			return v, k, endOfNumber(b, k)
		}
		y := binary.LittleEndian.Uint64(b[8:])
		if nd := nonDigits(y); nd != 0 {
			k := bits.TrailingZeros64(nd) / 8
			v = digitsValue(x)
			if k > 0 {
				v = v*pow10[k] + digitsValue(y<<(64-8*k))
			}
			return v, 8 + k, endOfNumber(b, 8+k)
		}
	}
	// Eight digits at a time while there are, then one at a time; the
	// value is exact up to 19 digits.
	for n+8 <= len(b) && n <= 8 {
		x := binary.LittleEndian.Uint64(b[n:])
		if nonDigits(x) != 0 {
			break
		}
		v = v*100_000_000 + digitsValue(x)
		n += 8
	}
	for n < len(b) {
		d := b[n] - '0'
		if d > 9 {
			break
		}
		v = v*10 + uint64(d)
		n++
	}
	if n > 19 {
		// May overflow: let strconv decide, as encoding/json does.
		u, err := strconv.ParseUint(string(b[:n]), 10, 64)
		return u, n, err == nil && endOfNumber(b, n)
	}
	return v, n, endOfNumber(b, n)
}

// nonDigits has the top bit of each byte of x (little-endian: the first
// byte lowest) set where the byte is not an ASCII digit. No byte's sum
// carries into the next: each adds to the byte's low seven bits.
func nonDigits(x uint64) uint64 {
	const low7, top = 0x7F7F7F7F7F7F7F7F, 0x8080808080808080
	above9 := (x&low7 + 0x4646464646464646)   // top bit: the byte's low 7 bits ≥ '9'+1
	atLeast0 := (x&low7 + 0x5050505050505050) // top bit: ≥ '0'
	return (above9 | x | ^atLeast0) & top
}

// digitsValue is the value of the eight ASCII digits in x, the first
// lowest; leading zero bytes (a shift left) count as leading zeros.
func digitsValue(x uint64) uint64 {
	x &= 0x0F0F0F0F0F0F0F0F
	x = (x * (10<<8 + 1)) >> 8 & 0x00FF00FF00FF00FF
	x = (x * (100<<16 + 1)) >> 16 & 0x0000FFFF0000FFFF
	return (x * (10000<<32 + 1)) >> 32
}

var pow10 = [8]uint64{1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000}

// parseInt parses a JSON integer into an int64.
func parseInt(b []byte) (v int64, n int, ok bool) {
	neg := len(b) > 0 && b[0] == '-'
	off := 0
	if neg {
		off = 1
	}
	u, m, ok := parseUint(b[off:])
	if !ok {
		return 0, 0, false
	}
	if neg {
		if u > 1<<63 {
			return 0, 0, false
		}
		return -int64(u), m + 1, true
	}
	if u > 1<<63-1 {
		return 0, 0, false
	}
	return int64(u), m, true
}

// parseString parses a JSON string at the start of b, the value of field
// f: plain bytes, valid UTF-8 and the two-character escapes; \u escapes
// are left to encoding/json.
func (c *internCache) parseString(b []byte, f eventField) (s string, n int, ok bool) {
	if len(b) == 0 || b[0] != '"' {
		return "", 0, false
	}
	if p := &c.lastAt[f]; p.at(b[1:]) {
		return c.last[f], p.n + 1, true
	}
	i := 1
	ascii := true
	for i < len(b) {
		x := b[i]
		switch {
		case x == '"':
			raw := b[1:i]
			if !ascii && !utf8.Valid(raw) {
				return "", 0, false
			}
			s = c.value(raw, f)
			c.lastAt[f] = newPattern(b[1 : i+1])
			return s, i + 1, true
		case x == '\\':
			return c.parseEscaped(b, i, ascii, f)
		case x < 0x20:
			return "", 0, false
		case x >= utf8.RuneSelf:
			ascii = false
		}
		i++
	}
	return "", 0, false
}

// value is b as a string, the value of field f: the field's last value
// when it is the same, else the cache's.
func (c *internCache) value(b []byte, f eventField) string {
	if l := c.last[f]; l == string(b) {
		return l
	}
	s := c.str(b)
	c.last[f] = s
	return s
}

// parseEscaped continues parseString from the first backslash at b[i].
func (c *internCache) parseEscaped(b []byte, i int, ascii bool, f eventField) (string, int, bool) {
	out := append(c.buf[:0], b[1:i]...)
	for i < len(b) {
		x := b[i]
		switch {
		case x == '"':
			c.buf = out
			if !ascii && !utf8.Valid(out) {
				return "", 0, false
			}
			s := c.value(out, f)
			c.lastAt[f] = pattern{}
			return s, i + 1, true
		case x == '\\':
			if i+1 >= len(b) {
				return "", 0, false
			}
			var r byte
			switch b[i+1] {
			case '"', '\\', '/':
				r = b[i+1]
			case 'b':
				r = '\b'
			case 'f':
				r = '\f'
			case 'n':
				r = '\n'
			case 'r':
				r = '\r'
			case 't':
				r = '\t'
			default:
				return "", 0, false // \u and invalid escapes
			}
			out = append(out, r)
			i += 2
			continue
		case x < 0x20:
			return "", 0, false
		case x >= utf8.RuneSelf:
			ascii = false
		}
		out = append(out, x)
		i++
	}
	return "", 0, false
}
