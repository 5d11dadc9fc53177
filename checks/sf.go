package checks

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// This file parses the response headers the checks judge: the RateLimit and
// RateLimit-Policy fields of draft-ietf-httpapi-ratelimit-headers-10, which
// are Structured Field Lists (RFC 9651, formerly RFC 8941), and Retry-After
// (RFC 9110 §10.2.3). Every parser returns an error for invalid input and
// never panics.

// RateLimitItem is one item of a RateLimit field, e.g. "free";r=0;t=1.
type RateLimitItem struct {
	// Policy is the item's name (a String), matching a RateLimit-Policy item.
	Policy string
	// Remaining is r: quota units left (required, ≥ 0).
	Remaining int64
	// Reset is t: seconds until the quota resets; -1 when absent.
	Reset int64
	// PartitionKey is pk (a Byte Sequence), still base64-encoded; "" when absent.
	PartitionKey string
}

// RateLimitPolicyItem is one item of a RateLimit-Policy field, e.g.
// "free";q=10;w=2.
type RateLimitPolicyItem struct {
	Policy string
	// Quota is q: quota units per window (required, ≥ 0).
	Quota int64
	// Window is w: the window in seconds; -1 when absent.
	Window int64
	// QuotaUnit is qu (a String); "requests" when absent.
	QuotaUnit    string
	PartitionKey string
}

// ParseRateLimit parses a RateLimit field value. Each member must be an Item
// whose value is a String, with an Integer r ≥ 0, an optional Integer t ≥ 0
// and an optional Byte Sequence pk; unknown parameters are ignored as the
// draft requires.
func ParseRateLimit(s string) ([]RateLimitItem, error) {
	list, err := parseSFList(s)
	if err != nil {
		return nil, fmt.Errorf("checks: RateLimit %q: %w", s, err)
	}
	out := make([]RateLimitItem, 0, len(list))
	for i, it := range list {
		name, err := itemName(it)
		if err != nil {
			return nil, fmt.Errorf("checks: RateLimit %q: member %d: %w", s, i+1, err)
		}
		ri := RateLimitItem{Policy: name, Remaining: -1, Reset: -1}
		for _, p := range it.params {
			switch p.key {
			case "r":
				ri.Remaining, err = nonNegInt(p)
			case "t":
				ri.Reset, err = nonNegInt(p)
			case "pk":
				ri.PartitionKey, err = byteSeq(p)
			}
			if err != nil {
				return nil, fmt.Errorf("checks: RateLimit %q: member %d: %w", s, i+1, err)
			}
		}
		if ri.Remaining < 0 {
			return nil, fmt.Errorf("checks: RateLimit %q: member %d has no r (remaining) parameter", s, i+1)
		}
		out = append(out, ri)
	}
	return out, nil
}

// ParseRateLimitPolicy parses a RateLimit-Policy field value. Each member
// must be an Item whose value is a String, with an Integer q ≥ 0, an optional
// Integer w > 0, an optional String qu and an optional Byte Sequence pk.
func ParseRateLimitPolicy(s string) ([]RateLimitPolicyItem, error) {
	list, err := parseSFList(s)
	if err != nil {
		return nil, fmt.Errorf("checks: RateLimit-Policy %q: %w", s, err)
	}
	out := make([]RateLimitPolicyItem, 0, len(list))
	for i, it := range list {
		name, err := itemName(it)
		if err != nil {
			return nil, fmt.Errorf("checks: RateLimit-Policy %q: member %d: %w", s, i+1, err)
		}
		pi := RateLimitPolicyItem{Policy: name, Quota: -1, Window: -1, QuotaUnit: "requests"}
		for _, p := range it.params {
			switch p.key {
			case "q":
				pi.Quota, err = nonNegInt(p)
			case "w":
				pi.Window, err = nonNegInt(p)
				if err == nil && pi.Window == 0 {
					err = errors.New("w must be positive")
				}
			case "qu":
				if p.val.kind != sfString {
					err = fmt.Errorf("qu must be a String, not %s", p.val.kind)
				}
				pi.QuotaUnit = p.val.s
			case "pk":
				pi.PartitionKey, err = byteSeq(p)
			}
			if err != nil {
				return nil, fmt.Errorf("checks: RateLimit-Policy %q: member %d: %w", s, i+1, err)
			}
		}
		if pi.Quota < 0 {
			return nil, fmt.Errorf("checks: RateLimit-Policy %q: member %d has no q (quota) parameter", s, i+1)
		}
		out = append(out, pi)
	}
	return out, nil
}

// HTTP-date forms (RFC 9110 §5.6.7): IMF-fixdate, then the obsolete RFC 850
// and asctime forms a recipient must accept.
var httpDates = []string{
	"Mon, 02 Jan 2006 15:04:05 GMT",
	"Monday, 02-Jan-06 15:04:05 GMT",
	"Mon Jan _2 15:04:05 2006",
}

// ParseRetryAfter parses a Retry-After value: delay-seconds (a non-negative
// decimal integer) or an HTTP-date, taken relative to now (the wall time the
// response was received). A date in the past means no wait (0).
func ParseRetryAfter(v string, now time.Time) (time.Duration, error) {
	s := strings.Trim(v, " \t")
	if s == "" {
		return 0, errors.New("checks: Retry-After is empty")
	}
	if s[0] >= '0' && s[0] <= '9' {
		for i := 0; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				return 0, fmt.Errorf("checks: Retry-After %q: want delay-seconds (digits) or an HTTP-date", v)
			}
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n > math.MaxInt64/int64(time.Second) {
			return 0, fmt.Errorf("checks: Retry-After %q: delay out of range", v)
		}
		return time.Duration(n) * time.Second, nil
	}
	for _, f := range httpDates {
		if t, err := time.Parse(f, s); err == nil {
			d := t.Sub(now)
			if d < 0 {
				d = 0
			}
			return d, nil
		}
	}
	return 0, fmt.Errorf("checks: Retry-After %q: want delay-seconds (digits) or an HTTP-date", v)
}

func itemName(it sfItem) (string, error) {
	if it.inner != nil {
		return "", errors.New("an inner list is not allowed here")
	}
	if it.val.kind != sfString {
		return "", fmt.Errorf("the policy name must be a String, not %s", it.val.kind)
	}
	return it.val.s, nil
}

func nonNegInt(p sfParam) (int64, error) {
	if p.val.kind != sfInteger {
		return 0, fmt.Errorf("%s must be an Integer, not %s", p.key, p.val.kind)
	}
	if p.val.i < 0 {
		return 0, fmt.Errorf("%s must not be negative (%d)", p.key, p.val.i)
	}
	return p.val.i, nil
}

func byteSeq(p sfParam) (string, error) {
	if p.val.kind != sfBytes {
		return "", fmt.Errorf("%s must be a Byte Sequence, not %s", p.key, p.val.kind)
	}
	return p.val.s, nil
}

// Structured Field values.

type sfKind uint8

const (
	sfInteger sfKind = iota + 1
	sfDecimal
	sfString
	sfToken
	sfBytes
	sfBoolean
	sfDate
	sfDisplay
)

func (k sfKind) String() string {
	switch k {
	case sfInteger:
		return "an Integer"
	case sfDecimal:
		return "a Decimal"
	case sfString:
		return "a String"
	case sfToken:
		return "a Token"
	case sfBytes:
		return "a Byte Sequence"
	case sfBoolean:
		return "a Boolean"
	case sfDate:
		return "a Date"
	case sfDisplay:
		return "a Display String"
	}
	return "nothing"
}

type sfValue struct {
	kind sfKind
	i    int64
	f    float64
	s    string // String, Token, Display String; Byte Sequence as base64
	b    bool
}

type sfParam struct {
	key string
	val sfValue
}

type sfItem struct {
	val    sfValue
	params []sfParam
	inner  []sfItem // non-nil for an inner list
}

type sfParser struct {
	s string
	i int
}

func (p *sfParser) errf(format string, args ...any) error {
	return fmt.Errorf("at byte %d: %s", p.i, fmt.Sprintf(format, args...))
}

func (p *sfParser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *sfParser) eof() bool { return p.i >= len(p.s) }

func (p *sfParser) skipSP() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *sfParser) skipOWS() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// parseSFList parses a List (RFC 9651 §4.2.1). An empty field is an error
// here: a RateLimit field with no members says nothing.
func parseSFList(s string) ([]sfItem, error) {
	p := &sfParser{s: s}
	p.skipSP()
	var out []sfItem
	for !p.eof() {
		it, err := p.itemOrInner()
		if err != nil {
			return nil, err
		}
		out = append(out, it)
		p.skipOWS()
		if p.eof() {
			break
		}
		if p.peek() != ',' {
			return nil, p.errf("want ',' between members, got %q", p.peek())
		}
		p.i++
		p.skipOWS()
		if p.eof() {
			return nil, p.errf("trailing comma")
		}
	}
	if len(out) == 0 {
		return nil, errors.New("empty field")
	}
	return out, nil
}

func (p *sfParser) itemOrInner() (sfItem, error) {
	if p.peek() == '(' {
		p.i++
		inner := []sfItem{}
		for {
			p.skipSP()
			if p.peek() == ')' {
				p.i++
				params, err := p.params()
				return sfItem{inner: inner, params: params}, err
			}
			if p.eof() {
				return sfItem{}, p.errf("unterminated inner list")
			}
			it, err := p.item()
			if err != nil {
				return sfItem{}, err
			}
			inner = append(inner, it)
			if c := p.peek(); c != ' ' && c != ')' {
				return sfItem{}, p.errf("want ' ' or ')' in inner list, got %q", c)
			}
		}
	}
	return p.item()
}

func (p *sfParser) item() (sfItem, error) {
	v, err := p.bare()
	if err != nil {
		return sfItem{}, err
	}
	params, err := p.params()
	return sfItem{val: v, params: params}, err
}

func (p *sfParser) params() ([]sfParam, error) {
	var out []sfParam
	for p.peek() == ';' {
		p.i++
		p.skipSP()
		k, err := p.key()
		if err != nil {
			return nil, err
		}
		v := sfValue{kind: sfBoolean, b: true}
		if p.peek() == '=' {
			p.i++
			if v, err = p.bare(); err != nil {
				return nil, err
			}
		}
		replaced := false
		for j := range out {
			if out[j].key == k {
				out[j].val, replaced = v, true
			}
		}
		if !replaced {
			out = append(out, sfParam{key: k, val: v})
		}
	}
	return out, nil
}

func isLCAlpha(c byte) bool { return c >= 'a' && c <= 'z' }
func isDigit(c byte) bool   { return c >= '0' && c <= '9' }
func isAlpha(c byte) bool   { return isLCAlpha(c) || (c >= 'A' && c <= 'Z') }

func (p *sfParser) key() (string, error) {
	c := p.peek()
	if !isLCAlpha(c) && c != '*' {
		return "", p.errf("a parameter key must start with a-z or '*', got %q", c)
	}
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		if !isLCAlpha(c) && !isDigit(c) && c != '_' && c != '-' && c != '.' && c != '*' {
			break
		}
		p.i++
	}
	return p.s[start:p.i], nil
}

// tchar of RFC 9110 §5.6.2.
func isTchar(c byte) bool {
	if isAlpha(c) || isDigit(c) {
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func (p *sfParser) bare() (sfValue, error) {
	c := p.peek()
	switch {
	case c == '-' || isDigit(c):
		return p.number()
	case c == '"':
		s, err := p.str()
		return sfValue{kind: sfString, s: s}, err
	case c == '*' || isAlpha(c):
		start := p.i
		p.i++
		for p.i < len(p.s) && (isTchar(p.s[p.i]) || p.s[p.i] == ':' || p.s[p.i] == '/') {
			p.i++
		}
		return sfValue{kind: sfToken, s: p.s[start:p.i]}, nil
	case c == ':':
		p.i++
		start := p.i
		for p.i < len(p.s) && p.s[p.i] != ':' {
			c := p.s[p.i]
			if !isAlpha(c) && !isDigit(c) && c != '+' && c != '/' && c != '=' {
				return sfValue{}, p.errf("invalid byte %q in a Byte Sequence", c)
			}
			p.i++
		}
		if p.eof() {
			return sfValue{}, p.errf("unterminated Byte Sequence")
		}
		v := p.s[start:p.i]
		p.i++
		return sfValue{kind: sfBytes, s: v}, nil
	case c == '?':
		p.i++
		switch p.peek() {
		case '0', '1':
			b := p.peek() == '1'
			p.i++
			return sfValue{kind: sfBoolean, b: b}, nil
		}
		return sfValue{}, p.errf("a Boolean is ?0 or ?1")
	case c == '@':
		p.i++
		v, err := p.number()
		if err == nil && v.kind != sfInteger {
			err = p.errf("a Date must be an Integer")
		}
		v.kind = sfDate
		return v, err
	case c == '%':
		p.i++
		s, err := p.display()
		return sfValue{kind: sfDisplay, s: s}, err
	}
	if p.eof() {
		return sfValue{}, p.errf("a value is missing")
	}
	return sfValue{}, p.errf("unexpected %q where a value should start", c)
}

func (p *sfParser) number() (sfValue, error) {
	neg := false
	if p.peek() == '-' {
		neg = true
		p.i++
	}
	if !isDigit(p.peek()) {
		return sfValue{}, p.errf("a digit must follow '-'")
	}
	start := p.i
	dot := -1
	for p.i < len(p.s) {
		c := p.s[p.i]
		if isDigit(c) {
			p.i++
		} else if c == '.' && dot < 0 {
			if p.i-start > 12 {
				return sfValue{}, p.errf("a Decimal has at most 12 integer digits")
			}
			dot = p.i
			p.i++
		} else {
			break
		}
		if dot < 0 && p.i-start > 15 {
			return sfValue{}, p.errf("an Integer has at most 15 digits")
		}
		if dot >= 0 && p.i-start > 16 {
			return sfValue{}, p.errf("a Decimal is too long")
		}
	}
	num := p.s[start:p.i]
	if dot < 0 {
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return sfValue{}, p.errf("invalid Integer %q", num)
		}
		if neg {
			n = -n
		}
		return sfValue{kind: sfInteger, i: n}, nil
	}
	frac := p.i - dot - 1
	if frac < 1 || frac > 3 {
		return sfValue{}, p.errf("a Decimal has 1 to 3 fractional digits")
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return sfValue{}, p.errf("invalid Decimal %q", num)
	}
	if neg {
		f = -f
	}
	return sfValue{kind: sfDecimal, f: f}, nil
}

func (p *sfParser) str() (string, error) {
	p.i++ // opening quote
	var b strings.Builder
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '\\':
			b.WriteString(p.s[start:p.i])
			p.i++
			if p.eof() {
				return "", p.errf("unterminated escape in a String")
			}
			if e := p.s[p.i]; e != '"' && e != '\\' {
				return "", p.errf("invalid escape \\%c in a String", e)
			}
			b.WriteByte(p.s[p.i])
			p.i++
			start = p.i
		case c == '"':
			b.WriteString(p.s[start:p.i])
			p.i++
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return "", p.errf("invalid byte 0x%02x in a String", c)
		default:
			p.i++
		}
	}
	return "", p.errf("unterminated String")
}

// display parses a Display String (RFC 9651 §4.2.10) after the '%'.
func (p *sfParser) display() (string, error) {
	if p.peek() != '"' {
		return "", p.errf("a Display String starts with %%\"")
	}
	p.i++
	var b []byte
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c < 0x20 || c > 0x7e:
			return "", p.errf("invalid byte 0x%02x in a Display String", c)
		case c == '%':
			if p.i+2 >= len(p.s) {
				return "", p.errf("truncated percent escape")
			}
			h, err := strconv.ParseUint(p.s[p.i+1:p.i+3], 16, 8)
			if err != nil || strings.ToLower(p.s[p.i+1:p.i+3]) != p.s[p.i+1:p.i+3] {
				return "", p.errf("invalid percent escape")
			}
			b = append(b, byte(h))
			p.i += 3
		case c == '"':
			p.i++
			if !utf8.Valid(b) {
				return "", p.errf("a Display String is not valid UTF-8")
			}
			return string(b), nil
		default:
			b = append(b, c)
			p.i++
		}
	}
	return "", p.errf("unterminated Display String")
}
