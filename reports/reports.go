// Package reports renders the verdicts of a run. Every format is rendered
// from one result document (Document), which is itself the JSON format, so a
// saved result.json can be rendered again in any format later.
//
// reports imports checks, history and policy; never attacks or targets.
package reports

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// Schema names the version of the result document.
const Schema = "rlverify.result/v1"

// Document is the result of judging one history.
type Document struct {
	Schema string `json:"schema"`
	// Verdict is the merge of every check's verdict.
	Verdict     checks.Verdict  `json:"verdict"`
	Interrupted bool            `json:"interrupted,omitempty"`
	Reason      string          `json:"reason,omitempty"`
	Run         history.Run     `json:"run"`
	Policy      PolicySummary   `json:"policy"`
	Stats       history.Stats   `json:"stats"`
	Phases      []history.Phase `json:"phases,omitempty"`
	Faults      []history.Fault `json:"faults,omitempty"`
	Checks      []checks.Result `json:"checks"`
	// Truncated: the history's last line was cut off (crash) and skipped.
	Truncated bool `json:"truncated,omitempty"`
}

// PolicySummary is the declared promise in a few lines.
type PolicySummary struct {
	Name     string   `json:"name"`
	Source   string   `json:"source"`
	Limits   []string `json:"limits"`
	FailMode string   `json:"fail_mode"`
}

// Build assembles the document for a judged history.
func Build(h *history.History, p *policy.Policy, rs []checks.Result) *Document {
	d := &Document{
		Schema:    Schema,
		Verdict:   checks.Overall(rs),
		Run:       h.Run,
		Stats:     h.Stats(),
		Phases:    h.Phases,
		Faults:    h.Faults,
		Checks:    rs,
		Truncated: h.Truncated,
	}
	if h.End == nil {
		d.Interrupted, d.Reason = true, "the history has no end record (the run was killed or is still going)"
	} else if h.End.Interrupted {
		d.Interrupted, d.Reason = true, h.End.Reason
	}
	d.Policy = PolicySummary{Name: p.Name, Source: p.Source, FailMode: p.Failure.Mode}
	for _, t := range p.Tiers {
		for _, l := range t.Limits {
			d.Policy.Limits = append(d.Policy.Limits, fmt.Sprintf("%s (%s…): %s", t.Name, t.KeyPrefix, l.Describe()))
		}
	}
	return d
}

// Renderer writes a document in one format.
type Renderer interface {
	Render(w io.Writer, d *Document) error
}

// Formats maps format names to renderers.
var Formats = map[string]Renderer{
	"text": Text{},
	"json": JSON{},
}

// FormatNames lists the formats.
func FormatNames() []string {
	var s []string
	for k := range Formats {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}

// Lookup returns the renderer for name.
func Lookup(name string) (Renderer, error) {
	r, ok := Formats[name]
	if !ok {
		return nil, fmt.Errorf("unknown format %q (want %s)", name, strings.Join(FormatNames(), ", "))
	}
	return r, nil
}

// Extension is the file extension for a format.
func Extension(format string) string {
	switch format {
	case "text":
		return "txt"
	case "junit":
		return "junit.xml"
	}
	return format
}

// JSON renders the document itself.
type JSON struct{}

// Render implements Renderer.
func (JSON) Render(w io.Writer, d *Document) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(d)
}

// ReadFile loads a result document written by JSON.
func ReadFile(file string) (*Document, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	var d Document
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("report: %s is not a result document: %w", file, err)
	}
	if d.Schema != Schema {
		return nil, fmt.Errorf("report: %s has schema %q; this rlverify reads %q", file, d.Schema, Schema)
	}
	return &d, nil
}
