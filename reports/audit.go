package reports

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"strings"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/internal/human"
)

// AuditSchema identifies the audit document's JSON.
const AuditSchema = "rlverify.audit/v1"

// Audit is every applicable plan run against one target, merged into one
// verdict per property.
type Audit struct {
	Schema  string         `json:"schema"`
	Verdict checks.Verdict `json:"verdict"`
	// Target names what was audited (URLs or a limiter).
	Target string        `json:"target"`
	Policy PolicySummary `json:"policy"`
	// Properties are the checks, each merged over the plans, in check order.
	Properties []Property `json:"properties"`
	// Plans are the plans considered: run (with their verdict) or not (and
	// why).
	Plans []AuditPlan `json:"plans"`
	// Measured are the limiter's parameters as the precision plan measured
	// them, beside the declared ones.
	Measured []checks.Measurement `json:"measured,omitempty"`
}

// Property is one check's verdict over every plan of an audit.
type Property struct {
	Name    string         `json:"name"`
	Verdict checks.Verdict `json:"verdict"`
	// Summary is the deciding plan's summary (a failing or unknown one
	// first), or why nothing measured it.
	Summary string `json:"summary"`
	// DecidedBy lists the plans whose run judged this property (not skip).
	DecidedBy []string `json:"decided_by,omitempty"`
	// Evidence is the first evidence of the plans that failed it.
	Evidence []PlanEvidence `json:"evidence,omitempty"`
}

// PlanEvidence is one piece of evidence and the plan it came from.
type PlanEvidence struct {
	Plan string `json:"plan"`
	checks.Evidence
}

// AuditPlan is one plan of an audit.
type AuditPlan struct {
	Plan string `json:"plan"`
	Ran  bool   `json:"ran"`
	// Why says why a plan was not run, or what stopped it.
	Why      string         `json:"why,omitempty"`
	Verdict  checks.Verdict `json:"verdict,omitempty"`
	Requests int64          `json:"requests,omitempty"`
	// Dir holds the plan's history and result.
	Dir string `json:"dir,omitempty"`
}

// AuditColumn is one plan's result for BuildAudit.
type AuditColumn struct {
	Plan string
	Doc  *Document
	Dir  string
	Err  error
	Skip string
	// NotRun says why a plan that applies was not run (or not to its end)
	// because the audit was interrupted: the audit's verdict is then
	// interrupted, never a pass.
	NotRun   string
	Measured []checks.Measurement
}

// BuildAudit merges the plans' results.
func BuildAudit(target string, pol PolicySummary, cols []AuditColumn) *Audit {
	a := &Audit{Schema: AuditSchema, Target: target, Policy: pol, Verdict: checks.Skip}
	byName := map[string]*Property{}
	var order []string
	for _, n := range append([]string{checks.EvidenceCheck}, checks.Names()...) {
		byName[n] = &Property{Name: n, Verdict: checks.Skip}
		order = append(order, n)
	}
	for _, c := range cols {
		ap := AuditPlan{Plan: c.Plan, Dir: c.Dir}
		switch {
		case c.Skip != "":
			ap.Why = c.Skip
		case c.NotRun != "":
			ap.Why, ap.Verdict = c.NotRun, checks.Interrupted
			a.Verdict = checks.Merge(a.Verdict, checks.Interrupted)
		case c.Err != nil:
			ap.Why, ap.Ran, ap.Verdict = c.Err.Error(), true, checks.Unknown
			p := byName[checks.EvidenceCheck]
			p.Verdict = checks.Merge(p.Verdict, checks.Unknown)
			p.Summary = fmt.Sprintf("plan %s could not be run: %v", c.Plan, c.Err)
			a.Verdict = checks.Merge(a.Verdict, checks.Unknown)
		default:
			ap.Ran, ap.Verdict, ap.Requests = true, c.Doc.Verdict, c.Doc.Stats.Requests
			if v := c.Doc.Verdict; v == checks.Interrupted || v == checks.Incomplete {
				a.Verdict = checks.Merge(a.Verdict, v)
			}
			if c.Doc.Interrupted && c.Doc.Reason != "" {
				ap.Why = c.Doc.Reason
			}
			for _, r := range c.Doc.Checks {
				p, ok := byName[r.Name]
				if !ok {
					p = &Property{Name: r.Name, Verdict: checks.Skip}
					byName[r.Name] = p
					order = append(order, r.Name)
				}
				if r.Verdict == checks.Skip {
					if p.Verdict == checks.Skip && p.Summary == "" {
						p.Summary = r.Summary
					}
					continue
				}
				p.DecidedBy = append(p.DecidedBy, c.Plan)
				if worse(r.Verdict, p.Verdict) || p.Summary == "" || p.Verdict == checks.Skip {
					p.Summary = c.Plan + ": " + r.Summary
				}
				p.Verdict = checks.Merge(p.Verdict, r.Verdict)
				if r.Verdict == checks.Fail {
					for i, e := range r.Evidence {
						if i == 2 {
							break
						}
						p.Evidence = append(p.Evidence, PlanEvidence{Plan: c.Plan, Evidence: e})
					}
				}
			}
		}
		a.Measured = append(a.Measured, c.Measured...)
		a.Plans = append(a.Plans, ap)
	}
	for _, n := range order {
		p := byName[n]
		if p.Verdict == checks.Skip {
			if p.Summary == "" {
				p.Summary = "no plan of this audit applies to it"
			}
			p.Summary = "not measured: " + p.Summary
		}
		a.Properties = append(a.Properties, *p)
		a.Verdict = checks.Merge(a.Verdict, p.Verdict)
	}
	if a.Verdict == checks.Skip {
		a.Verdict = checks.Unknown
	}
	return a
}

// worse reports whether v is more severe than than.
func worse(v, than checks.Verdict) bool { return checks.Merge(than, v) == v && v != than }

// Results are the properties as check results (for --fail-on).
func (a *Audit) Results() []checks.Result {
	out := make([]checks.Result, len(a.Properties))
	for i, p := range a.Properties {
		out[i] = checks.Result{Name: p.Name, Verdict: p.Verdict, Summary: p.Summary}
	}
	return out
}

// RenderAudit writes a in format (text, json, md, junit).
func RenderAudit(w io.Writer, format string, a *Audit, color bool) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(a)
	case "text":
		return auditText(w, a, Text{Color: color})
	case "md":
		return auditMarkdown(w, a)
	case "junit":
		return auditJUnit(w, a)
	case "html":
		return auditHTML(w, a)
	}
	return fmt.Errorf("format %q cannot render an audit (want %s)", format, strings.Join(FormatNames(), ", "))
}

func auditText(w io.Writer, a *Audit, t Text) error {
	if pa, ok := printableCopy(a); ok {
		return auditTextPrintable(w, pa, t)
	}
	return escapedOutput(w, func(w io.Writer) error { return auditTextPrintable(w, a, Text{}) })
}

func auditTextPrintable(w io.Writer, a *Audit, t Text) error {
	var b strings.Builder
	fmt.Fprintf(&b, "rlverify audit: %s\npolicy %s (%s)\n", a.Target, a.Policy.Name, a.Policy.Source)
	for _, l := range a.Policy.Limits {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	b.WriteString("\n")
	tw := newTable(&b)
	fmt.Fprintln(tw, "PROPERTY\tVERDICT\tDECIDED BY\tSUMMARY")
	for _, p := range a.Properties {
		by := strings.Join(p.DecidedBy, ", ")
		if by == "" {
			by = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Name, t.paint(p.Verdict), by, p.Summary)
	}
	tw.Flush()
	if len(a.Measured) > 0 {
		b.WriteString("\nmeasured against declared:\n")
		tw = newTable(&b)
		fmt.Fprintln(tw, "  PARAMETER\tDECLARED\tMEASURED\tVERDICT")
		for _, m := range a.Measured {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", m.Name, m.Declared, m.Measured, t.paint(m.Verdict))
		}
		tw.Flush()
	}
	for _, p := range a.Properties {
		if len(p.Evidence) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s %s:\n", p.Name, strings.ToLower(string(p.Verdict)))
		for _, e := range p.Evidence {
			fmt.Fprintf(&b, "  - [%s] %s\n", e.Plan, e.Message)
		}
	}
	b.WriteString("\nplans:\n")
	tw = newTable(&b)
	for _, p := range a.Plans {
		switch {
		case !p.Ran:
			fmt.Fprintf(tw, "  %s\tnot run\t%s\n", p.Plan, p.Why)
		case p.Why != "":
			fmt.Fprintf(tw, "  %s\t%s\t%s requests; %s\n", p.Plan, t.paint(p.Verdict), human.Count(p.Requests), p.Why)
		default:
			fmt.Fprintf(tw, "  %s\t%s\t%s requests, history in %s\n", p.Plan, t.paint(p.Verdict), human.Count(p.Requests), p.Dir)
		}
	}
	tw.Flush()
	fmt.Fprintf(&b, "\nverdict: %s\n", t.paint(a.Verdict))
	_, err := io.WriteString(w, b.String())
	return err
}

func auditMarkdown(w io.Writer, a *Audit) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## rlverify audit: %s — %s\n\nPolicy `%s`.\n\n", badge(a.Verdict), mdText(a.Target), mdText(a.Policy.Name))
	b.WriteString("| Property | Verdict | Decided by | Summary |\n|---|---|---|---|\n")
	for _, p := range a.Properties {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", mdCell(p.Name), badge(p.Verdict), mdCell(strings.Join(p.DecidedBy, ", ")), mdCell(p.Summary))
	}
	if len(a.Measured) > 0 {
		b.WriteString("\n### Measured against declared\n\n| Parameter | Declared | Measured | Verdict |\n|---|---|---|---|\n")
		for _, m := range a.Measured {
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", mdCell(m.Name), mdCell(m.Declared), mdCell(m.Measured), strings.ToUpper(string(m.Verdict)))
		}
	}
	b.WriteString("\n### Plans\n\n")
	for _, p := range a.Plans {
		if p.Ran {
			fmt.Fprintf(&b, "- `%s`: %s, %d requests\n", mdCode(p.Plan), badge(p.Verdict), p.Requests)
		} else {
			fmt.Fprintf(&b, "- `%s`: not run — %s\n", mdCode(p.Plan), mdText(p.Why))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func auditJUnit(w io.Writer, a *Audit) error {
	s := junitSuite{Name: "audit " + a.Target, Time: "0"}
	for _, p := range a.Properties {
		c := junitCase{Name: p.Name, Classname: "rlverify.audit", Time: "0"}
		msg := p.Summary
		switch p.Verdict {
		case checks.Fail:
			var ev []string
			for _, e := range p.Evidence {
				ev = append(ev, "["+e.Plan+"] "+e.Message)
			}
			c.Failure = &junitProblem{Message: msg, Type: "fail", Text: strings.Join(ev, "\n")}
			s.Failures++
		case checks.Unknown:
			c.Error = &junitProblem{Message: msg, Type: "unknown"}
			s.Errors++
		case checks.Skip:
			c.Skipped = &junitSkip{Message: msg}
			s.Skipped++
		}
		s.Cases = append(s.Cases, c)
		s.Tests++
	}
	if a.Verdict == checks.Interrupted || a.Verdict == checks.Incomplete {
		var why []string
		for _, p := range a.Plans {
			if p.Verdict == checks.Interrupted || p.Verdict == checks.Incomplete {
				why = append(why, p.Plan+": "+p.Why)
			}
		}
		s.Cases = append(s.Cases, junitCase{Name: "audit " + string(a.Verdict), Classname: "rlverify.audit", Time: "0",
			Error: &junitProblem{Message: "the audit is " + string(a.Verdict), Type: string(a.Verdict), Text: strings.Join(why, "\n")}})
		s.Errors++
		s.Tests++
	}
	return writeJUnit(w, []junitSuite{s})
}

func auditHTML(w io.Writer, a *Audit) error {
	var b strings.Builder
	b.WriteString("<!doctype html><html><head><meta charset=\"utf-8\"><title>rlverify audit</title><style>body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}.fail{color:#b00;font-weight:bold}.pass{color:#070}.unknown{color:#a60}.skip{color:#777}</style></head><body>")
	fmt.Fprintf(&b, "<h1>rlverify audit: <span class=%q>%s</span></h1><p>%s · policy %s</p>", string(a.Verdict), strings.ToUpper(string(a.Verdict)), xmlText(a.Target), xmlText(a.Policy.Name))
	b.WriteString("<table><tr><th>Property</th><th>Verdict</th><th>Decided by</th><th>Summary</th></tr>")
	for _, p := range a.Properties {
		fmt.Fprintf(&b, "<tr><td>%s</td><td class=%q>%s</td><td>%s</td><td>%s</td></tr>", xmlText(p.Name), string(p.Verdict), strings.ToUpper(string(p.Verdict)), xmlText(strings.Join(p.DecidedBy, ", ")), xmlText(p.Summary))
	}
	b.WriteString("</table>")
	if len(a.Measured) > 0 {
		b.WriteString("<h2>Measured against declared</h2><table><tr><th>Parameter</th><th>Declared</th><th>Measured</th><th>Verdict</th></tr>")
		for _, m := range a.Measured {
			fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td>%s</td><td class=%q>%s</td></tr>", xmlText(m.Name), xmlText(m.Declared), xmlText(m.Measured), string(m.Verdict), strings.ToUpper(string(m.Verdict)))
		}
		b.WriteString("</table>")
	}
	b.WriteString("<h2>Plans</h2><ul>")
	for _, p := range a.Plans {
		if p.Ran {
			fmt.Fprintf(&b, "<li><b>%s</b>: <span class=%q>%s</span>, %d requests</li>", xmlText(p.Plan), string(p.Verdict), strings.ToUpper(string(p.Verdict)), p.Requests)
		} else {
			fmt.Fprintf(&b, "<li><b>%s</b>: not run — %s</li>", xmlText(p.Plan), xmlText(p.Why))
		}
	}
	b.WriteString("</ul></body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func xmlText(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
