package history

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The bounds that make every history the Writer emits readable again.
//
// A target controls the header values and errors recorded for its
// answers, and a plan the names and keys; none of them may make a line too
// long for the reader. So the Writer cuts every string it records to
// MaxValue bytes (CapValue), which bounds an event line by MaxEventLine; it
// refuses any other record longer than MaxRunLine; and the reader accepts
// lines of up to MaxLine, the larger of the two.

// MaxValue bounds, in bytes, every string the Writer records (header
// values, err, keys, names, notes; not the declared policy, which is JSON
// kept whole). A longer value is cut by CapValue.
const MaxValue = 4096

// The marker CapValue appends: "…[truncated N bytes]".
const (
	truncatedPrefix = "…[truncated "
	truncatedSuffix = " bytes]"
	// truncatedRoom is the longest marker (N has at most 20 digits).
	truncatedRoom = len(truncatedPrefix) + 20 + len(truncatedSuffix)
)

// CapValue returns s as the Writer records it, at most MaxValue bytes
// once read back. A value of up to MaxValue/3 bytes is returned as it is.
// In a longer one every byte that is not UTF-8 becomes U+FFFD first (as
// the JSON encoding would make it, 3 bytes each); if it is then longer
// than MaxValue, it is cut to the longest prefix that ends on a character
// boundary and leaves room for the marker, followed by
// "…[truncated N bytes]", N being the number of bytes dropped. The cut is
// deterministic, so equal values stay equal.
func CapValue(s string) string {
	if len(s) <= MaxValue/3 {
		return s
	}
	if !utf8.ValidString(s) {
		s = validUTF8(s)
	}
	if len(s) <= MaxValue {
		return s
	}
	keep := MaxValue - truncatedRoom
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	return s[:keep] + truncatedPrefix + strconv.Itoa(len(s)-keep) + truncatedSuffix
}

// validUTF8 replaces every byte of s that is not UTF-8 by U+FFFD.
func validUTF8(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s { // an invalid byte ranges as RuneError, one at a time
		b.WriteRune(r)
	}
	return b.String()
}

// capRecord caps, in place, every string of the record *rec (a Run,
// Phase, Fault, Sink or End): its fields, the strings of its lists and of
// the records in its lists, so a field added later is capped too. A list
// is copied before a value of it is cut, so the caller's data is left as
// it was. The declared policy (json.RawMessage, bytes) stays whole.
func capRecord(rec any) { capStrings(reflect.ValueOf(rec).Elem()) }

func capStrings(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if s := v.String(); len(s) > MaxValue/3 && v.CanSet() {
			v.SetString(CapValue(s))
		}
	case reflect.Struct:
		for i := range v.NumField() {
			capStrings(v.Field(i))
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 || !v.CanSet() || !needsCap(v) {
			return
		}
		c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		reflect.Copy(c, v)
		v.Set(c)
		for i := range c.Len() {
			capStrings(c.Index(i))
		}
	}
}

// needsCap reports whether capStrings would cut a string in v.
func needsCap(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String:
		return len(v.String()) > MaxValue/3 && CapValue(v.String()) != v.String()
	case reflect.Struct:
		for i := range v.NumField() {
			if needsCap(v.Field(i)) {
				return true
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return false
		}
		for i := range v.Len() {
			if needsCap(v.Index(i)) {
				return true
			}
		}
	}
	return false
}

const (
	// eventStrings counts Event's string fields other than T, each at most
	// MaxValue bytes once capped (TestMaxEventLineIsTight checks it).
	eventStrings = 19
	// maxEscaped is a capped value as JSON: quotes, and at most 6 bytes per
	// byte (\u00XX for a control byte, \ufffd for an invalid one).
	maxEscaped = 2 + 6*MaxValue
	// eventSkeleton bounds everything else in an event line: field names,
	// punctuation and the numbers at their widest.
	eventSkeleton = 512

	// MaxEventLine bounds an event line the Writer emits (without its
	// newline).
	MaxEventLine = eventSkeleton + eventStrings*maxEscaped
	// MaxRunLine bounds every other record the Writer emits (without its
	// newline); in practice only the run header, which carries the declared
	// policy, can come near it. The Writer refuses a longer record.
	MaxRunLine = 1 << 20
	// MaxLine is the longest line (without its line ending) the reader
	// accepts: the longest the Writer emits.
	MaxLine = max(MaxEventLine, MaxRunLine)
)

// The wall-clock range of a run's start, and the range of its offsets, so
// that start + offset is an instant Unix nanoseconds can hold (until 2262)
// and a difference of two is a time.Duration that does not saturate.
var (
	minStart = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	maxStart = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
)

// InStartRange reports whether t lies in [1970-01-01, 2200-01-01), the
// instants a run may start at (importers check every timestamp they read
// against it before converting it to Unix nanoseconds).
func InStartRange(t time.Time) bool { return !t.Before(minStart) && t.Before(maxStart) }

// MaxOffset bounds the absolute value of every offset in a history (about
// 50 years).
const MaxOffset = int64(50 * 365 * 24 * time.Hour)

// checkStart reports a start outside [1970, 2200); the zero time means the
// history has no wall clock and is accepted.
func checkStart(t time.Time) error {
	if t.IsZero() || (!t.Before(minStart) && t.Before(maxStart)) {
		return nil
	}
	return fmt.Errorf("run start %s is out of range: want an instant from %s to %s",
		t.Format(time.RFC3339Nano), minStart.Format(time.DateOnly), maxStart.Format(time.DateOnly))
}

// checkOffsets reports the first of the named offsets whose absolute value
// exceeds MaxOffset; names and vals pair up.
func checkOffsets(what string, names []string, vals ...int64) error {
	for i, v := range vals {
		if v > MaxOffset || v < -MaxOffset {
			return fmt.Errorf("%s: %s %d ns is out of range: offsets are at most ±%d ns (50 years) from the run start", what, names[i], v, MaxOffset)
		}
	}
	return nil
}
