// Package yamlx decodes YAML documents strictly (unknown fields are errors) and
// reports every problem as FILE:LINE: FIELD: MESSAGE, so a user can find it.
//
// It is shared by the policy and attack-plan loaders. It must not import any
// rlverify package.
package yamlx

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
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
		return nil, convert(file, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		return nil, convert(file, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, &Error{File: file, Msg: "more than one YAML document; put one plan or policy per file"}
	}
	return &Doc{File: file, Root: &root}, nil
}

// convert turns a yaml.v3 error into an *Error with the first line it names.
func convert(file string, err error) error {
	var te *yaml.TypeError
	msgs := []string{err.Error()}
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msgs = te.Errors
	}
	m := lineRE.FindStringSubmatch(msgs[0])
	if m == nil {
		return &Error{File: file, Msg: strings.TrimPrefix(msgs[0], "yaml: ")}
	}
	line, _ := strconv.Atoi(m[1])
	msg := m[2]
	msg = strings.ReplaceAll(msg, "!!str", "a string")
	msg = strings.ReplaceAll(msg, "!!int", "an integer")
	msg = strings.ReplaceAll(msg, "!!float", "a number")
	msg = strings.ReplaceAll(msg, "!!map", "a mapping")
	msg = strings.ReplaceAll(msg, "!!seq", "a list")
	if len(msgs) > 1 {
		msg += fmt.Sprintf(" (and %d more problems)", len(msgs)-1)
	}
	return &Error{File: file, Line: line, Msg: msg}
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
