package reports

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode/utf8"
)

// The text report goes to a terminal, and much of what it prints comes
// from files and targets rlverify does not control: a plan's or key's name,
// a note, an error a target provoked. A control character in one of them
// could move the cursor, retitle the window or hide a FAIL, so the text
// renderers print a copy of the document with every such character shown
// as an escape; the report's own colours are added afterwards.

// Printable returns s with terminal control characters (C0 but newline and
// tab, DEL, C1), bidirectional overrides and invalid UTF-8 shown as \xNN or
// \uNNNN escapes.
func Printable(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafeRune(r):
			if r < 0x100 {
				fmt.Fprintf(&b, `\x%02x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func needsEscape(s string) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || unsafeRune(r) {
			return true
		}
		i += n
	}
	return false
}

func unsafeRune(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true // bidirectional embeddings, overrides and isolates
	}
	return false
}

// printableCopy returns a deep copy of v (a document or comparison) with
// every string made Printable; ok is false when v cannot be copied (then
// the caller escapes its whole output instead).
func printableCopy[T any](v *T) (*T, bool) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	c := new(T)
	if err := json.Unmarshal(b, c); err != nil {
		return nil, false
	}
	makePrintable(reflect.ValueOf(c).Elem())
	return c, true
}

// escapedOutput runs render (without colours) and writes its output with
// every control character but newline and tab escaped: the fallback when
// no printable copy of a document can be made.
func escapedOutput(w io.Writer, render func(io.Writer) error) error {
	var b strings.Builder
	if err := render(&b); err != nil {
		return err
	}
	_, err := io.WriteString(w, Printable(b.String()))
	return err
}

// makePrintable rewrites, in place, every string reachable from v.
func makePrintable(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if v.CanSet() {
			v.SetString(Printable(v.String()))
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			makePrintable(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				makePrintable(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return // raw JSON (the declared policy) is not printed as is
		}
		for i := range v.Len() {
			makePrintable(v.Index(i))
		}
	case reflect.Map:
		if v.IsNil() {
			return
		}
		// Map entries are not addressable: rebuild them.
		for _, k := range v.MapKeys() {
			val := reflect.New(v.Type().Elem()).Elem()
			val.Set(v.MapIndex(k))
			makePrintable(val)
			nk := k
			if k.Kind() == reflect.String {
				nk = reflect.ValueOf(Printable(k.String())).Convert(k.Type())
			}
			v.SetMapIndex(k, reflect.Value{})
			v.SetMapIndex(nk, val)
		}
	}
}
