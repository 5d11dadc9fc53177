// Package reports renders the verdicts of a run. Every format is rendered
// from one result document (Document), which is itself the JSON format, so a
// saved result.json can be rendered again in any format later (rlverify
// report). A comparison of several implementations under one plan is a
// Comparison, rendered by the same formats.
//
// The formats: text (terminal table), json (the document itself), junit
// (JUnit XML for CI test reports), md (Markdown for a CI job summary or a pull
// request comment) and html (one self-contained page with timeline plots).
//
// reports imports checks, history, policy and thresholds; never attacks or
// targets.
package reports

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/limitread"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/thresholds"
)

// Schema names the version of the result document. A reader refuses any
// other value; a change that breaks readers of the JSON bumps it.
const Schema = "rlverify.result/v1"

// Document is the result of judging one history: the single source every
// format is rendered from. docs/result.md describes every field.
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
	// Elapsed is the run's length in ns: the end record's, else the last
	// receive time.
	Elapsed int64 `json:"elapsed,omitempty"`
	// Latency summarises decision latency (Recv − Sent of admitted and
	// rejected requests); nil when there were none.
	Latency *Latency `json:"latency,omitempty"`
	// Footprint summarises the load generator's resource samples.
	Footprint *Footprint `json:"footprint,omitempty"`
	// Keys is what the busiest keys (at most MaxKeyStats) got, beside what
	// one quota of their tier allows over the same span.
	Keys []KeyStats `json:"keys,omitempty"`
	// PerSecond counts admitted/rejected/errors per second, with the active
	// faults, for runs with fault windows (nil otherwise).
	PerSecond []Second `json:"per_second,omitempty"`
	// Timeline is the history downsampled for drawing (never for checking);
	// nil when the history has no events.
	Timeline *Timeline `json:"timeline,omitempty"`
	// Errors counts the requests that ended in an error (no response, or a
	// status the policy declares neither admitted nor rejected) by status.
	Errors []checks.StatusCount `json:"errors,omitempty"`
	// Defects are the distinct problems found, strongest cause first, each
	// with the checks whose violations it explains (checks.Diagnose).
	Defects []checks.Defect `json:"defects,omitempty"`
	// NotVerified lists the checks that had nothing to judge, and why: the
	// properties this run did not verify.
	NotVerified []Unverified `json:"not_verified,omitempty"`
	// Thresholds are the run's pass/fail criteria judged (see
	// SetThresholds); their verdicts are merged into Verdict.
	Thresholds []thresholds.Result `json:"thresholds,omitempty"`
	// Integrity is what the history's digest said: intact, modified,
	// no-digest (older or imported histories), no-end (a cut run); empty
	// for a history built in memory.
	Integrity string `json:"integrity,omitempty"`
	// Warnings are the checks' warnings (a slack wider than the run's own
	// timing uncertainty), shown right under the verdict in every format.
	Warnings []string `json:"warnings,omitempty"`
}

// MarkCut records that the run did not carry out its whole plan, and why:
// its verdict becomes v (checks.Interrupted or checks.Incomplete) unless a
// check failed, so no format shows a cut run as a pass.
func (d *Document) MarkCut(v checks.Verdict, reason string) {
	d.Interrupted, d.Reason = true, reason
	d.Verdict = checks.Merge(d.Verdict, v)
}

// Unverified is a property a run did not verify.
type Unverified struct {
	Check  string `json:"check"`
	Reason string `json:"reason"`
}

// Latency is a summary of decision latencies, in ns.
type Latency struct {
	// Decisions counts the admitted and rejected requests measured.
	Decisions int64 `json:"decisions"`
	P50       int64 `json:"p50"`
	P90       int64 `json:"p90"`
	P99       int64 `json:"p99"`
	Max       int64 `json:"max"`
}

// PolicySummary is the declared promise in a few lines.
type PolicySummary struct {
	Name     string   `json:"name"`
	Source   string   `json:"source"`
	Limits   []string `json:"limits"`
	FailMode string   `json:"fail_mode"`
}

// FailModeOf is p's failure mode as reports show it: "not declared" for a
// policy without a failure section (the services then fail open, but
// nothing was promised).
func FailModeOf(p *policy.Policy) string {
	if p.Failure.Undeclared {
		return "not declared"
	}
	return p.Failure.Mode
}

// outcomeBy classifies events under p's response contract.
func outcomeBy(p *policy.Policy) func(*history.Event) history.Outcome {
	return func(e *history.Event) history.Outcome { return checks.Outcome(p, e) }
}

// outcomes classifies every event of h under p's response contract, once
// for the document's many passes.
func outcomes(h *history.History, p *policy.Policy) []history.Outcome {
	oc := make([]history.Outcome, len(h.Events))
	for i := range h.Events {
		oc[i] = checks.Outcome(p, &h.Events[i])
	}
	return oc
}

// Build assembles the document for a judged history. It reads h and p and
// keeps rs as given; it does not modify any of them.
func Build(h *history.History, p *policy.Policy, rs []checks.Result) *Document {
	d := newDocument(h, p, rs)
	oc := outcomes(h, p)
	var lats []int64
	for i := range h.Events {
		e := &h.Events[i]
		if h.End == nil {
			d.Elapsed = max(d.Elapsed, e.Recv)
		}
		if o := oc[i]; o == history.Admitted || o == history.Rejected {
			lats = append(lats, e.Recv-e.Sent)
		}
	}
	if len(lats) > 0 {
		r := ranks(lats, 0.50, 0.90, 0.99, 1)
		d.Latency = &Latency{Decisions: int64(len(lats)), P50: r[0], P90: r[1], P99: r[2], Max: r[3]}
	}
	groups := groupByKey(h)
	d.Timeline = buildTimeline(h, p, oc, groups)
	d.PerSecond = perSecond(h, d.Elapsed, oc)
	_, d.Errors = checks.Errors(h, p)
	d.Keys = keyStats(h, p, oc, groups)
	return d
}

// newDocument is the part of Build's document that reads no event of h.
func newDocument(h *history.History, p *policy.Policy, rs []checks.Result) *Document {
	d := &Document{
		Schema:    Schema,
		Verdict:   checks.Overall(rs),
		Run:       h.Run,
		Stats:     h.StatsBy(outcomeBy(p)),
		Phases:    h.Phases,
		Faults:    h.Faults,
		Checks:    rs,
		Truncated: h.Truncated,
	}
	d.Integrity = string(h.Integrity)
	switch h.Integrity {
	case history.Modified:
		d.Verdict = checks.Modified
		d.Warnings = append(d.Warnings, fmt.Sprintf("%s (%s): the verdicts below judge an edited record", h.IntegrityNote(), strings.Join(h.ModifiedShards, ", ")))
	case history.NoDigest:
		d.Run.Notes = append(slices.Clip(d.Run.Notes), h.IntegrityNote())
	}
	switch c, why := h.Completion(); {
	case c == history.CutBySignal:
		d.MarkCut(checks.Interrupted, why)
	case c == history.CutShort:
		d.MarkCut(checks.Incomplete, why)
	case h.End.Interrupted:
		// Stopped at a bound the user chose: complete for what was asked.
		d.Interrupted, d.Reason = true, h.End.Reason
	}
	d.Policy = PolicySummary{Name: p.Name, Source: p.Source, FailMode: FailModeOf(p)}
	for _, t := range p.Tiers {
		for _, l := range t.Limits {
			d.Policy.Limits = append(d.Policy.Limits, fmt.Sprintf("%s (%s…): %s", t.Name, t.KeyPrefix, l.Describe()))
		}
	}
	if h.End != nil {
		d.Elapsed = h.End.Elapsed
	}
	d.Defects = checks.Defects(rs)
	for _, r := range rs {
		if r.Verdict == checks.Skip {
			d.NotVerified = append(d.NotVerified, Unverified{Check: r.Name, Reason: r.Summary})
		}
		d.Warnings = append(d.Warnings, r.Warnings...)
	}
	d.Footprint = footprint(h.Samples)
	return d
}

// Renderer writes a document in one format. Format (see Lookup) and the
// renderers behind it (Text, JSON, JUnit, Markdown, HTML) implement it.
type Renderer interface {
	Render(w io.Writer, d *Document) error
}

// ComparisonRenderer writes a comparison in one format.
type ComparisonRenderer interface {
	RenderComparison(w io.Writer, c *Comparison) error
}

// JSON renders the document itself.
type JSON struct{}

// Render implements Renderer.
func (JSON) Render(w io.Writer, d *Document) error { return writeJSON(w, d) }

// RenderComparison implements ComparisonRenderer.
func (JSON) RenderComparison(w io.Writer, c *Comparison) error { return writeJSON(w, c) }

// writeJSON writes v indented, with arrays of numbers and strings on one
// line each (the timeline's series would otherwise take a line per number).
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	b = append(compactScalarArrays(b), '\n')
	_, err = w.Write(b)
	return err
}

// compactScalarArrays rewrites every array of the indented JSON b whose
// elements are all scalars onto one line: [1, 2, 3].
func compactScalarArrays(b []byte) []byte {
	var out bytes.Buffer
	out.Grow(len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch c {
		case '"':
			i = copyString(&out, b, i)
		case '[':
			if end, ok := scalarArrayEnd(b, i); ok {
				writeCompactArray(&out, b[i:end+1])
				i = end
				continue
			}
			out.WriteByte(c)
		default:
			out.WriteByte(c)
		}
	}
	return out.Bytes()
}

// scalarArrayEnd returns the index of the ']' closing the array that opens
// at b[i] when it holds no object or array.
func scalarArrayEnd(b []byte, i int) (int, bool) {
	inStr := false
	for j := i + 1; j < len(b); j++ {
		c := b[j]
		if inStr {
			if c == '\\' {
				j++
			} else if c == '"' {
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '[', '{':
			return 0, false
		case ']':
			return j, true
		}
	}
	return 0, false
}

func writeCompactArray(out *bytes.Buffer, a []byte) {
	for i := 0; i < len(a); i++ {
		c := a[i]
		switch c {
		case ' ', '\n', '\t', '\r':
		case ',':
			out.WriteString(", ")
		case '"':
			i = copyString(out, a, i)
		default:
			out.WriteByte(c)
		}
	}
}

// MaxDocumentBytes bounds a saved result document or comparison that
// ReadFile and ReadAny read (a real one is a few MB at most: evidence, key
// tables and the timeline are capped).
const MaxDocumentBytes = 64 << 20

// ReadFile loads a result document written by JSON.
func ReadFile(file string) (*Document, error) {
	b, err := limitread.File(file, MaxDocumentBytes)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	d, c, err := decode(file, b)
	if err != nil {
		return nil, err
	}
	if c != nil {
		return nil, fmt.Errorf("report: %s is a comparison (%s), not a result document", file, ComparisonSchema)
	}
	return d, nil
}

// ReadAny loads a saved result document or comparison, told apart by their
// schema; exactly one of the two results is non-nil when err is nil.
func ReadAny(file string) (*Document, *Comparison, error) {
	b, err := limitread.File(file, MaxDocumentBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("report: %w", err)
	}
	return decode(file, b)
}

func decode(file string, b []byte) (*Document, *Comparison, error) {
	var head struct {
		Schema string `json:"schema"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, nil, fmt.Errorf("report: %s is not a result document: %w", file, err)
	}
	switch head.Schema {
	case Schema:
		var d Document
		if err := json.Unmarshal(b, &d); err != nil {
			return nil, nil, fmt.Errorf("report: %s is not a result document: %w", file, err)
		}
		return &d, nil, nil
	case ComparisonSchema:
		var c Comparison
		if err := json.Unmarshal(b, &c); err != nil {
			return nil, nil, fmt.Errorf("report: %s is not a comparison: %w", file, err)
		}
		for i := range c.Columns {
			if d := c.Columns[i].Document; d != nil && d.Schema != Schema {
				return nil, nil, fmt.Errorf("report: %s: column %q has schema %q; this rlverify reads %q", file, c.Columns[i].Name, d.Schema, Schema)
			}
		}
		return nil, &c, nil
	}
	return nil, nil, fmt.Errorf("report: %s has schema %q; this rlverify reads %q and %q", file, head.Schema, Schema, ComparisonSchema)
}

// Footprint is the range of the harness's own heap and goroutines over a
// run (from the history's samples, every 5 s and at both ends).
type Footprint struct {
	Samples       int    `json:"samples"`
	HeapMin       uint64 `json:"heap_min"`
	HeapMax       uint64 `json:"heap_max"`
	HeapLast      uint64 `json:"heap_last"`
	GoroutinesMin int    `json:"goroutines_min"`
	GoroutinesMax int    `json:"goroutines_max"`
	GoroutineLast int    `json:"goroutines_last"`
}

func footprint(xs []history.Sample) *Footprint {
	if len(xs) == 0 {
		return nil
	}
	f := &Footprint{Samples: len(xs), HeapMin: xs[0].HeapBytes, HeapMax: xs[0].HeapBytes, GoroutinesMin: xs[0].Goroutines, GoroutinesMax: xs[0].Goroutines}
	for _, x := range xs {
		f.HeapMin, f.HeapMax = min(f.HeapMin, x.HeapBytes), max(f.HeapMax, x.HeapBytes)
		f.GoroutinesMin, f.GoroutinesMax = min(f.GoroutinesMin, x.Goroutines), max(f.GoroutinesMax, x.Goroutines)
	}
	last := xs[len(xs)-1]
	f.HeapLast, f.GoroutineLast = last.HeapBytes, last.Goroutines
	return f
}

// Describe formats the footprint in one line.
func (f *Footprint) Describe() string {
	mib := func(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	return fmt.Sprintf("harness heap %s–%s (last %s), goroutines %d–%d (last %d), %d samples",
		mib(f.HeapMin), mib(f.HeapMax), mib(f.HeapLast), f.GoroutinesMin, f.GoroutinesMax, f.GoroutineLast, f.Samples)
}

// copyString copies the JSON string starting at b[i] (its opening quote),
// escapes included, and returns the index of its closing quote.
func copyString(out *bytes.Buffer, b []byte, i int) int {
	out.WriteByte(b[i])
	for i++; i < len(b); i++ {
		out.WriteByte(b[i])
		switch b[i] {
		case '\\':
			if i+1 < len(b) {
				i++
				out.WriteByte(b[i])
			}
		case '"':
			return i
		}
	}
	return i
}

// Reword rewrites d's prose with say: the reason a run was cut, the notes
// of the run and its phases, the checks' and defects' summaries and
// warnings, the names of their slacks and why a check had nothing to judge.
// The library names option fields there ("MaxRequests", "Checks.Slack"); a
// command says them as its own flags before rendering.
func (d *Document) Reword(say func(string) string) {
	all := func(ss []string) {
		for i := range ss {
			ss[i] = say(ss[i])
		}
	}
	d.Reason = say(d.Reason)
	all(d.Run.Notes)
	all(d.Warnings)
	for i := range d.Phases {
		all(d.Phases[i].Notes)
	}
	for i := range d.Checks {
		c := &d.Checks[i]
		c.Summary = say(c.Summary)
		all(c.Warnings)
		for j := range c.Slack {
			c.Slack[j].Name = say(c.Slack[j].Name)
		}
	}
	for i := range d.Defects {
		d.Defects[i].Summary = say(d.Defects[i].Summary)
	}
	for i := range d.NotVerified {
		d.NotVerified[i].Reason = say(d.NotVerified[i].Reason)
	}
}
