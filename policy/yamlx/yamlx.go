// Package yamlx decodes YAML documents strictly (unknown fields are errors) and
// reports every problem as FILE:LINE: FIELD: MESSAGE, so a user can find it.
//
// It is shared by the policy and attack-plan loaders. It must not import any
// rlverify package but the leaves limitread and internal/suggest.
package yamlx

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/rlverify/rlverify/internal/suggest"
	"github.com/rlverify/rlverify/limitread"
)

// MaxBytes bounds the size of a document accepted by Decode.
const MaxBytes = 1 << 20

// Error is a problem found at one place in a YAML file. Line is 0 when the
// place is unknown.
type Error struct {
	File  string
	Line  int
	Field string
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": %s", e.Field)
	}
	fmt.Fprintf(&b, ": %s", e.Msg)
	return b.String()
}

// Doc is a decoded document together with its node tree, used to find the
// line of a field when a later semantic check fails.
type Doc struct {
	File string
	Root *yaml.Node
}

var lineRE = regexp.MustCompile(`line (\d+): (.*)`)

// ReadFile reads a document for Decode, at most MaxBytes of it: a larger
// file, or one that never ends (/dev/zero), is an *Error without being
// read whole. Other errors are those of opening and reading the file.
func ReadFile(file string) ([]byte, error) {
	data, err := limitread.File(file, MaxBytes)
	var tl *limitread.TooLargeError
	switch {
	case errors.As(err, &tl) && tl.Size > 0:
		return nil, &Error{File: file, Msg: fmt.Sprintf("document is %d bytes, more than the %d allowed", tl.Size, MaxBytes)}
	case errors.As(err, &tl):
		return nil, &Error{File: file, Msg: fmt.Sprintf("document holds more than the %d bytes allowed (not a regular file: read up to the limit)", MaxBytes)}
	}
	return data, err
}

// Decode parses data (named file in messages) strictly into v.
func Decode(file string, data []byte, v any) (*Doc, error) {
	if len(data) > MaxBytes {
		return nil, &Error{File: file, Msg: fmt.Sprintf("document is %d bytes, more than the %d allowed", len(data), MaxBytes)}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &Error{File: file, Msg: "document is empty"}
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, convert(file, err, nil)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		return nil, convert(file, err, reflect.TypeOf(v))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, &Error{File: file, Msg: "more than one YAML document; put one plan or policy per file"}
	}
	doc := &Doc{File: file, Root: &root}
	if err := doc.wholeNumbers(&root, reflect.TypeOf(v), "", 0); err != nil {
		return nil, err
	}
	return doc, nil
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// wholeNumbers walks n beside t, the type Decode filled from it, and
// reports a number with a fraction where t holds an integer: yaml.v3 cuts
// 12.9 to 12 without a word. A type that decodes itself (yaml.Unmarshaler)
// is left to its own checks. depth bounds the walk over aliases.
func (d *Doc) wholeNumbers(n *yaml.Node, t reflect.Type, path string, depth int) error {
	if n == nil || t == nil || depth > 100 {
		return nil
	}
	for n.Kind == yaml.AliasNode {
		if n = n.Alias; n == nil {
			return nil
		}
	}
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return nil
		}
		return d.wholeNumbers(n.Content[0], t, path, depth+1)
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	join := func(part string) string {
		if path == "" {
			return part
		}
		return path + "." + part
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		var f float64
		if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!float" && n.Decode(&f) == nil && f != math.Trunc(f) {
			return &Error{File: d.File, Line: n.Line, Field: path, Msg: fmt.Sprintf("%s is not a whole number", n.Value)}
		}
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i].Value, n.Content[i+1]
			if key == "<<" && n.Content[i].ShortTag() == "!!merge" {
				if err := d.wholeNumbersMerged(val, t, path, depth+1); err != nil {
					return err
				}
				continue
			}
			if ft, ok := fields[key]; ok {
				if err := d.wholeNumbers(val, ft, join(key), depth+1); err != nil {
					return err
				}
			}
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			return nil
		}
		for i, c := range n.Content {
			if err := d.wholeNumbers(c, t.Elem(), join(strconv.Itoa(i)), depth+1); err != nil {
				return err
			}
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := d.wholeNumbers(n.Content[i+1], t.Elem(), join(n.Content[i].Value), depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// wholeNumbersMerged checks the mapping (or list of mappings) a merge key
// "<<" brings into a struct.
func (d *Doc) wholeNumbersMerged(n *yaml.Node, t reflect.Type, path string, depth int) error {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n != nil && n.Kind == yaml.SequenceNode {
		for _, c := range n.Content {
			if err := d.wholeNumbers(c, t, path, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return d.wholeNumbers(n, t, path, depth)
}

// yamlFields maps the YAML names of t's fields (as yaml.v3 names them,
// inlined structs included) to their types.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() && !f.Anonymous { // as yaml.v3
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if slices.Contains(strings.Split(opts, ","), "inline") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range yamlFields(ft) {
					out[k] = v
				}
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

var unknownFieldRE = regexp.MustCompile(`^field (\S+) not found in type (\S+)$`)

// convert turns a yaml.v3 error into an *Error per problem, each with its
// line; several are joined (errors.Join), so a user sees every problem at
// once. An unknown field of t (the type decoded into; nil when unknown) is
// named by its YAML name, with the nearest known field as a suggestion,
// never by a Go type name.
func convert(file string, err error, t reflect.Type) error {
	var te *yaml.TypeError
	msgs := []string{err.Error()}
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msgs = te.Errors
	}
	var errs []error
	for _, m := range msgs {
		errs = append(errs, convertOne(file, m, t))
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}

func convertOne(file, text string, t reflect.Type) *Error {
	m := lineRE.FindStringSubmatch(text)
	if m == nil {
		return &Error{File: file, Msg: strings.TrimPrefix(text, "yaml: ")}
	}
	line, _ := strconv.Atoi(m[1])
	msg := m[2]
	if u := unknownFieldRE.FindStringSubmatch(msg); u != nil {
		msg = fmt.Sprintf("unknown field %q", u[1])
		if st := findType(t, u[2], 0); st != nil {
			names := make([]string, 0)
			for n := range yamlFields(st) {
				names = append(names, n)
			}
			slices.Sort(names)
			if hint := suggest.DidYouMean(u[1], names); hint != "" {
				msg += hint
			} else {
				msg += " (known fields: " + strings.Join(names, ", ") + ")"
			}
		}
		return &Error{File: file, Line: line, Msg: msg}
	}
	msg = strings.ReplaceAll(msg, "!!str", "a string")
	msg = strings.ReplaceAll(msg, "!!int", "an integer")
	msg = strings.ReplaceAll(msg, "!!float", "a number")
	msg = strings.ReplaceAll(msg, "!!map", "a mapping")
	msg = strings.ReplaceAll(msg, "!!seq", "a list")
	return &Error{File: file, Line: line, Msg: msg}
}

// findType finds the struct type called name (as reflect prints it,
// "policy.Limit") among t and the types t's fields hold.
func findType(t reflect.Type, name string, depth int) reflect.Type {
	if t == nil || depth > 20 {
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		return findType(t.Elem(), name, depth+1)
	case reflect.Struct:
		if t.String() == name {
			return t
		}
		for _, ft := range yamlFields(t) {
			if found := findType(ft, name, depth+1); found != nil {
				return found
			}
		}
	}
	return nil
}

// Errorf returns an *Error for the field at path (dot separated, list
// indexes as numbers, e.g. "phases.2.requests"), with the line of the
// deepest existing node on that path.
func (d *Doc) Errorf(path string, format string, args ...any) error {
	return &Error{File: d.File, Line: d.Line(path), Field: path, Msg: fmt.Sprintf(format, args...)}
}

// Line returns the line of the node at path, or of its deepest existing
// ancestor; 0 when nothing matches.
func (d *Doc) Line(path string) int {
	if d == nil || d.Root == nil {
		return 0
	}
	n := d.Root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := n.Line
	if path == "" {
		return line
	}
	for _, part := range strings.Split(path, ".") {
		next := child(n, part)
		if next == nil {
			return line
		}
		n = next
		line = n.Line
	}
	return line
}

// Has reports whether the document gives the node at path itself (not
// only an ancestor of it); a nil Doc has nothing.
func (d *Doc) Has(path string) bool {
	if d == nil || d.Root == nil {
		return false
	}
	n := d.Root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	for _, part := range strings.Split(path, ".") {
		if n = child(n, part); n == nil {
			return false
		}
	}
	return true
}

func child(n *yaml.Node, part string) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == part {
				// The key's line points at the field itself.
				v := n.Content[i+1]
				if v.Kind == yaml.ScalarNode {
					return v
				}
				c := *v
				c.Line = n.Content[i].Line
				return &c
			}
		}
	case yaml.SequenceNode:
		i, err := strconv.Atoi(part)
		if err == nil && i >= 0 && i < len(n.Content) {
			return n.Content[i]
		}
	}
	return nil
}
