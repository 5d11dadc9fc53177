package reports

import (
	"fmt"
	"io"
	"path"
	"path/filepath"
	"slices"
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
	// Discovered, when set, says the policy was discovered, not declared,
	// and what discovery measured (see NotDeclared).
	Discovered []string `json:"discovered,omitempty"`
	// Defects are the distinct problems the plans found, one per root-cause
	// check, with every plan that found it and the strongest evidence.
	Defects []AuditDefect `json:"defects,omitempty"`
	// Elapsed is the plans' run time added up, in ns.
	Elapsed int64 `json:"elapsed,omitempty"`
}

// AuditDefect is one defect over the plans of an audit.
type AuditDefect struct {
	// Check is the root cause's check.
	Check string `json:"check"`
	// Plans found it, in the order they ran.
	Plans []string `json:"plans"`
	// Strongest is the evidence that exceeds its bound the most (the
	// first, when no evidence has a bound).
	Strongest *PlanEvidence `json:"strongest,omitempty"`
	// Summary is the summary of the plan the strongest evidence came from.
	Summary string `json:"summary"`
	// Explains lists the checks whose violations it explains in any plan.
	Explains []string `json:"explains,omitempty"`
}

// DiscoveredNote heads every report of an audit whose policy was
// discovered, not declared.
const DiscoveredNote = "policy discovered, not declared: properties that need the service's own promise are measured, not judged"

// NotJudged prefixes the summary of a property measured against a
// discovered policy.
const NotJudged = "measured, not judged: declare a policy to judge"

// NotDeclared marks a as judged against a discovered policy (found, lines
// saying what discovery measured): the properties names (those that need
// the service's own promise) keep their measurements but no verdict.
func (a *Audit) NotDeclared(names []string, found []string) {
	a.Discovered = append([]string{DiscoveredNote}, found...)
	a.Verdict = checks.Skip
	for i := range a.Properties {
		p := &a.Properties[i]
		for _, n := range names {
			if p.Name == n && p.Verdict != checks.Skip {
				p.Summary = NotJudged + " (" + strings.ToLower(string(p.Verdict)) + " against the discovered policy: " + p.Summary + ")"
				p.Verdict, p.Evidence = checks.Skip, nil
			}
		}
		a.Verdict = checks.Merge(a.Verdict, p.Verdict)
	}
	for i := range a.Measured {
		a.Measured[i].Verdict = checks.Skip
	}
	kept := a.Defects[:0]
	for _, d := range a.Defects {
		if !slices.Contains(names, d.Check) {
			kept = append(kept, d)
		}
	}
	a.Defects = kept
	if a.Verdict == checks.Skip {
		a.Verdict = checks.Unknown
	}
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
	// UnknownIn lists the plans that could not decide it (unknown there).
	UnknownIn []string `json:"unknown_in,omitempty"`
	// Evidence is the first evidence of the plans that failed it.
	Evidence []PlanEvidence `json:"evidence,omitempty"`
	// Strongest is the evidence that exceeds its bound the most: the
	// measured figure (Observed) beside what the policy declares (Bound).
	Strongest *PlanEvidence `json:"strongest,omitempty"`
	// Figures are the deciding plan's figures for this property.
	Figures map[string]float64 `json:"figures,omitempty"`
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
	// Elapsed is the plan's run time in ns.
	Elapsed int64 `json:"elapsed,omitempty"`
	// Headline is the plan's own headline (its defects, or what passed).
	Headline string `json:"headline,omitempty"`
	// Reports are the plan's own report files (set by whoever wrote them),
	// html first when there is one.
	Reports []string `json:"reports,omitempty"`
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
	strongSummary := map[string]string{}
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
			ap.Elapsed, ap.Headline = c.Doc.Elapsed, Headline(c.Doc)
			a.Elapsed += c.Doc.Elapsed
			a.addDefects(c.Plan, c.Doc.Defects)
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
				if r.Verdict == checks.Unknown {
					p.UnknownIn = append(p.UnknownIn, c.Plan)
				}
				if worse(r.Verdict, p.Verdict) || p.Summary == "" || p.Verdict == checks.Skip {
					p.Summary = c.Plan + ": " + r.Summary
					p.Figures = r.Figures
				}
				p.Verdict = checks.Merge(p.Verdict, r.Verdict)
				if r.Verdict == checks.Fail {
					for i, e := range r.Evidence {
						if i == 2 {
							break
						}
						p.Evidence = append(p.Evidence, PlanEvidence{Plan: c.Plan, Evidence: e})
					}
					if st := stronger(p.Strongest, c.Plan, r.Evidence); st != p.Strongest {
						p.Strongest, strongSummary[r.Name] = st, c.Plan+": "+r.Summary
					}
				}
			}
		}
		a.Measured = append(a.Measured, c.Measured...)
		a.Plans = append(a.Plans, ap)
	}
	failed, judged := 0, 0
	for _, c := range cols {
		switch {
		case c.Err != nil:
			failed++
		case c.Doc != nil:
			judged++
		}
	}
	for _, n := range order {
		p := byName[n]
		if p.Verdict == checks.Skip {
			switch {
			case p.Summary != "":
			case failed > 0 && judged == 0:
				p.Summary = fmt.Sprintf("no plan that judges it ran (%d plan(s) could not be run)", failed)
			default:
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
	// A defect's strongest evidence is its property's: the one over all
	// its plans' evidence that exceeds its bound the most.
	for i := range a.Defects {
		d := &a.Defects[i]
		if p := byName[d.Check]; p != nil && p.Strongest != nil {
			d.Strongest, d.Summary = p.Strongest, strongSummary[d.Check]
		}
	}
	return a
}

// addDefects merges a plan's defects into a's, one per check.
func (a *Audit) addDefects(plan string, ds []checks.Defect) {
	for _, d := range ds {
		i := slices.IndexFunc(a.Defects, func(x AuditDefect) bool { return x.Check == d.Check })
		if i < 0 {
			a.Defects = append(a.Defects, AuditDefect{Check: d.Check})
			i = len(a.Defects) - 1
		}
		ad := &a.Defects[i]
		ad.Plans = append(ad.Plans, plan)
		if s := stronger(ad.Strongest, plan, d.Evidence); s != ad.Strongest || ad.Summary == "" {
			ad.Strongest, ad.Summary = s, plan+": "+d.Summary
		}
		for _, e := range d.Explains {
			if !slices.Contains(ad.Explains, e) {
				ad.Explains = append(ad.Explains, e)
			}
		}
	}
}

// excess is how far evidence exceeds its bound (observed/bound), 0 when it
// has no bound.
func excess(e checks.Evidence) float64 {
	if e.Bound <= 0 {
		return 0
	}
	return e.Observed / e.Bound
}

// stronger returns the strongest of cur and plan's evidence evs: the one
// that exceeds its bound the most, the earlier one on a tie.
func stronger(cur *PlanEvidence, plan string, evs []checks.Evidence) *PlanEvidence {
	for _, e := range evs {
		if cur == nil || excess(e) > excess(cur.Evidence) {
			cur = &PlanEvidence{Plan: plan, Evidence: e}
		}
	}
	return cur
}

// AuditHeadline is the audit's verdict in words: the defects and the
// strongest evidence, else the unknown properties, else what passed.
func AuditHeadline(a *Audit) string {
	if len(a.Defects) > 0 {
		parts := make([]string, len(a.Defects))
		for i, d := range a.Defects {
			parts[i] = fmt.Sprintf("%s (%s)", d.Check, plural(len(d.Plans), "plan"))
		}
		s := fmt.Sprintf("%s: %s", plural(len(a.Defects), "defect"), strings.Join(parts, ", "))
		if e := a.Defects[0].Strongest; e != nil {
			s += "; the strongest: [" + e.Plan + "] " + e.Message
		}
		// What could not be judged is named beside the defects, never in
		// their place.
		if u := unknownText(a); u != "" {
			s += "; " + u
		}
		return s
	}
	n := map[checks.Verdict]int{}
	for _, p := range a.Properties {
		n[p.Verdict]++
	}
	ran := 0
	for _, p := range a.Plans {
		if p.Ran {
			ran++
		}
	}
	s := fmt.Sprintf("no defect found: %d of %d properties passed over %s, %d not measured", n[checks.Pass], len(a.Properties), plural(ran, "plan"), n[checks.Skip])
	if u := unknownText(a); u != "" {
		s += "; " + u
	}
	return s
}

// unknownText names each property no plan could decide, where and why,
// and in how many other plans it was decided: "oversell could not be judged in
// tiers (…), decided in 8 other plans".
func unknownText(a *Audit) string {
	var parts []string
	for _, p := range a.Properties {
		if p.Verdict != checks.Unknown {
			continue
		}
		s := p.Name + " could not be judged"
		if len(p.UnknownIn) > 0 {
			s += " in " + strings.Join(p.UnknownIn, ", ")
		}
		why := p.Summary
		if len(p.UnknownIn) > 0 {
			why = strings.TrimPrefix(why, p.UnknownIn[0]+": ")
		}
		if r := []rune(why); len(r) > 120 {
			why = string(r[:119]) + "…"
		}
		if why != "" {
			s += " (" + why + ")"
		}
		if others := len(p.DecidedBy) - len(p.UnknownIn); others > 0 {
			s += fmt.Sprintf(", decided in %d other %s", others, map[bool]string{true: "plan", false: "plans"}[others == 1])
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// plural is "1 plan", "2 plans", "3 properties".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "y") {
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(noun, "y"))
	}
	return fmt.Sprintf("%d %ss", n, noun)
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

func auditText(w io.Writer, a *Audit, t Text) error {
	if pa, ok := printableCopy(a); ok {
		return auditTextPrintable(w, pa, t)
	}
	return escapedOutput(w, func(w io.Writer) error { return auditTextPrintable(w, a, Text{}) })
}

// decidedBy is the plans that judged p, shortened for a table cell: the
// first three and how many more.
func decidedBy(p Property) string {
	switch n := len(p.DecidedBy); {
	case n == 0:
		return "-"
	case n <= 3:
		return strings.Join(p.DecidedBy, ", ")
	default:
		return fmt.Sprintf("%s +%d", strings.Join(p.DecidedBy[:2], ", "), n-2)
	}
}

// evidenceFigure is the measured figure against the declared one, in
// words: "observed 100, bound 10 (10.00×)".
func evidenceFigure(e checks.Evidence) string {
	s := fmt.Sprintf("observed %s, bound %s", human.Number(e.Observed), human.Number(e.Bound))
	if x := excess(e); x > 0 {
		s += fmt.Sprintf(" (%.2f×)", x)
	}
	return s
}

// planReport is the path of a plan's own report to show (text and
// Markdown): its first report file, else its folder.
func planReport(p AuditPlan) string {
	if len(p.Reports) > 0 {
		return p.Reports[0]
	}
	return p.Dir
}

// planOutcome is a plan's line: its verdict, requests and run time, or
// why it was not run.
func planOutcome(p AuditPlan) string {
	if !p.Ran {
		return "not run: " + p.Why
	}
	if p.Headline == "" { // it ran into an error before judging anything
		return "could not be run: " + p.Why
	}
	s := fmt.Sprintf("%s requests in %s", human.Count(p.Requests), dur(p.Elapsed))
	if p.Why != "" {
		s += "; " + p.Why
	}
	return s
}

func auditTextPrintable(w io.Writer, a *Audit, t Text) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\n", t.paint(a.Verdict), AuditHeadline(a))
	fmt.Fprintf(&b, "rlverify audit: %s\npolicy %s (%s)\n", a.Target, a.Policy.Name, a.Policy.Source)
	for _, l := range a.Policy.Limits {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	for _, l := range a.Discovered {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	if len(a.Defects) > 0 {
		fmt.Fprintf(&b, "\n%s:\n", plural(len(a.Defects), "defect"))
		for i, d := range a.Defects {
			fmt.Fprintf(&b, "  %d. %s, found by %s", i+1, d.Check, strings.Join(d.Plans, ", "))
			if len(d.Explains) > 0 {
				fmt.Fprintf(&b, " (explains %s)", strings.Join(d.Explains, ", "))
			}
			b.WriteString("\n")
			if e := d.Strongest; e != nil {
				fmt.Fprintf(&b, "     strongest: [%s] %s\n", e.Plan, e.Message)
				for _, l := range evidenceLines(e.Evidence) {
					fmt.Fprintf(&b, "       %s\n", l)
				}
			}
		}
	}
	b.WriteString("\n")
	tw := newTable(&b)
	fmt.Fprintln(tw, "PROPERTY\tVERDICT\tDECIDED BY\tSUMMARY")
	for _, p := range a.Properties {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Name, t.paint(p.Verdict), decidedBy(p), p.Summary)
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
			for _, l := range evidenceLines(e.Evidence) {
				fmt.Fprintf(&b, "    %s\n", l)
			}
		}
	}
	b.WriteString("\nplans:\n")
	tw = newTable(&b)
	for _, p := range a.Plans {
		switch {
		case !p.Ran:
			fmt.Fprintf(tw, "  %s\tnot run\t%s\n", p.Plan, p.Why)
		default:
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", p.Plan, t.paint(p.Verdict), planOutcome(p), planReport(p))
		}
	}
	tw.Flush()
	fmt.Fprintf(&b, "\nverdict: %s\n", t.paint(a.Verdict))
	_, err := io.WriteString(w, b.String())
	return err
}

func auditMarkdown(w io.Writer, a *Audit) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## rlverify audit: %s — %s\n\n", badge(a.Verdict), mdText(a.Target))
	fmt.Fprintf(&b, "**Verdict: %s** · %s\n\nPolicy `%s` (%s)", badge(a.Verdict), mdText(AuditHeadline(a)), mdCode(a.Policy.Name), mdText(a.Policy.Source))
	for _, l := range a.Policy.Limits {
		fmt.Fprintf(&b, " · %s", mdText(l))
	}
	b.WriteString("\n")
	for _, l := range a.Discovered {
		fmt.Fprintf(&b, "\n> %s\n", mdText(l))
	}
	if len(a.Defects) > 0 {
		b.WriteString("\n### Defects\n\n")
		for i, d := range a.Defects {
			fmt.Fprintf(&b, "%d. **%s**, found by %s", i+1, mdText(d.Check), mdText(strings.Join(d.Plans, ", ")))
			if len(d.Explains) > 0 {
				fmt.Fprintf(&b, " (explains %s)", mdText(strings.Join(d.Explains, ", ")))
			}
			b.WriteString("\n")
			if e := d.Strongest; e != nil {
				fmt.Fprintf(&b, "   - strongest: `%s`: %s\n", mdCode(e.Plan), mdText(e.Message))
				for _, l := range evidenceLines(e.Evidence) {
					fmt.Fprintf(&b, "     - %s\n", mdText(l))
				}
			}
		}
	}
	b.WriteString("\n### Properties\n\n| Property | Verdict | Summary | Measured against declared | Decided by |\n|---|---|---|---|---|\n")
	for _, p := range a.Properties {
		figure := "-"
		if e := p.Strongest; e != nil {
			figure = evidenceFigure(e.Evidence)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", mdCell(p.Name), badge(p.Verdict), mdCell(p.Summary), mdCell(figure), mdCell(orDash(strings.Join(p.DecidedBy, ", "))))
	}
	if len(a.Measured) > 0 {
		b.WriteString("\n### Measured against declared\n\n| Parameter | Declared | Measured | Verdict |\n|---|---|---|---|\n")
		for _, m := range a.Measured {
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", mdCell(m.Name), mdCell(m.Declared), mdCell(m.Measured), badge(m.Verdict))
		}
	}
	for _, p := range a.Properties {
		if len(p.Evidence) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n### Evidence: %s (%s)\n\n", mdText(p.Name), badge(p.Verdict))
		for _, e := range p.Evidence {
			fmt.Fprintf(&b, "- `%s`: %s\n", mdCode(e.Plan), mdText(e.Message))
			for _, l := range evidenceLines(e.Evidence) {
				fmt.Fprintf(&b, "  - %s\n", mdText(l))
			}
		}
	}
	b.WriteString("\n### Plans\n\n| Plan | Verdict | Run | Report |\n|---|---|---|---|\n")
	for _, p := range a.Plans {
		v, rep := "not run", "-"
		if p.Ran {
			v = badge(p.Verdict)
		}
		if r := planReport(p); p.Ran && r != "" {
			rep = "`" + mdCode(r) + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", mdCode(p.Plan), v, mdCell(planOutcome(p)), rep)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// auditJUnit is one suite with a test case per property. Each plan's run
// time is shared among the properties it judged, so the cases' times add
// up to the suite's (the plans' run time).
func auditJUnit(w io.Writer, a *Audit) error {
	secs := func(ns float64) string { return fmt.Sprintf("%.3f", ns/1e9) }
	s := junitSuite{Name: "audit · " + a.Target, Time: secs(float64(a.Elapsed))}
	if len(a.Discovered) > 0 {
		s.Name += " (" + DiscoveredNote + ")"
	}
	judged := map[string]int{}
	elapsed := map[string]int64{}
	for _, p := range a.Properties {
		for _, pl := range p.DecidedBy {
			judged[pl]++
		}
	}
	ran := 0
	for _, p := range a.Plans {
		elapsed[p.Plan] = p.Elapsed
		if p.Ran {
			ran++
		}
	}
	prop := func(k, v string) {
		if v != "" {
			s.Properties = append(s.Properties, junitProperty{k, v})
		}
	}
	prop("target", a.Target)
	prop("policy", a.Policy.Name+" ("+a.Policy.Source+")")
	for _, l := range a.Policy.Limits {
		prop("limit", l)
	}
	prop("verdict", string(a.Verdict))
	prop("headline", AuditHeadline(a))
	prop("plans_run", fmt.Sprintf("%d of %d", ran, len(a.Plans)))
	for _, p := range a.Plans {
		if p.Ran {
			prop("plan."+p.Plan, fmt.Sprintf("%s, %s, %s", p.Verdict, planOutcome(p), planReport(p)))
		} else {
			prop("plan."+p.Plan, "not run: "+p.Why)
		}
	}
	for _, m := range a.Measured {
		prop("measured."+m.Name, fmt.Sprintf("declared %s, measured %s: %s", m.Declared, m.Measured, m.Verdict))
	}
	for _, p := range a.Properties {
		var ns float64
		for _, pl := range p.DecidedBy {
			ns += float64(elapsed[pl]) / float64(judged[pl])
		}
		c := junitCase{Name: p.Name, Classname: "rlverify.audit", Time: secs(ns)}
		msg := p.Summary
		var text strings.Builder
		if e := p.Strongest; e != nil {
			fmt.Fprintf(&text, "strongest: [%s] %s: %s\n", e.Plan, e.Message, evidenceFigure(e.Evidence))
		}
		for _, e := range p.Evidence {
			fmt.Fprintf(&text, "- [%s] %s\n", e.Plan, e.Message)
			for _, l := range evidenceLines(e.Evidence) {
				fmt.Fprintf(&text, "  %s\n", l)
			}
		}
		if len(p.Figures) > 0 {
			fmt.Fprintf(&text, "figures: %s\n", figureText(p.Figures))
		}
		if len(p.DecidedBy) > 0 {
			fmt.Fprintf(&text, "decided by: %s\n", strings.Join(p.DecidedBy, ", "))
		}
		switch p.Verdict {
		case checks.Fail:
			c.Failure = &junitProblem{Message: msg, Type: "violation", Text: text.String()}
			s.Failures++
		case checks.Unknown:
			c.Error = &junitProblem{Message: msg, Type: "unknown", Text: text.String()}
			s.Errors++
		case checks.Skip, checks.Explained:
			c.Skipped = &junitSkip{Message: msg}
			s.Skipped++
		default:
			c.SystemOut = msg + "\n" + text.String()
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

// auditHTML is one page read top to bottom, styled like a result's: the
// verdict and headline, the run at a glance, the defects with their
// strongest evidence, the properties, the evidence per property with
// links to the plans' own reports, the measured parameters, the plans.
func auditHTML(w io.Writer, a *Audit) error {
	pg := &page{}
	htmlHead(pg, fmt.Sprintf("rlverify audit: %s — %s", badge(a.Verdict), a.Target))
	fmt.Fprintf(pg, "<header><h1>rlverify audit %s</h1><p><b>%s</b> · policy <b>%s</b> <span class=\"muted\">(%s)</span></p><p class=\"headline\">%s</p></header>\n",
		verdictBadge(a.Verdict), esc(a.Target), esc(a.Policy.Name), esc(a.Policy.Source), esc(AuditHeadline(a)))
	for _, l := range a.Discovered {
		fmt.Fprintf(pg, "<p><b>%s</b></p>\n", esc(l))
	}
	ran, requests := 0, int64(0)
	for _, p := range a.Plans {
		if p.Ran {
			ran++
			requests += p.Requests
		}
	}
	n := map[checks.Verdict]int{}
	for _, p := range a.Properties {
		n[p.Verdict]++
	}
	pg.WriteString("<div class=\"cards\">\n")
	card := func(key, class, val string) {
		fmt.Fprintf(pg, "<div class=\"card\"><div class=\"k\">%s</div><div class=\"%s\">%s</div></div>\n", esc(key), strings.TrimSpace("v "+class), esc(val))
	}
	card("defects", "rej", human.Count(int64(len(a.Defects))))
	card("properties failed", "rej", human.Count(int64(n[checks.Fail])))
	card("passed", "adm", human.Count(int64(n[checks.Pass])))
	card("not measured", "err", human.Count(int64(n[checks.Skip])))
	card("plans run", "", fmt.Sprintf("%d of %d", ran, len(a.Plans)))
	card("requests sent", "", human.Count(requests))
	if a.Elapsed > 0 {
		card("run time", "", dur(a.Elapsed))
	}
	pg.WriteString("</div>\n")
	links := map[string]string{}
	for _, p := range a.Plans {
		if p.Ran && len(p.Reports) > 0 {
			links[p.Plan] = relativeLink(p.Reports[0])
		}
	}
	planRef := func(plan string) string {
		if l, ok := links[plan]; ok {
			return fmt.Sprintf("<a href=\"%s\">%s</a>", esc(l), esc(plan))
		}
		return esc(plan)
	}
	if len(a.Defects) > 0 {
		pg.WriteString("<h2>Defects</h2>\n<ol class=\"defects\">\n")
		for _, d := range a.Defects {
			plans := make([]string, len(d.Plans))
			for i, p := range d.Plans {
				plans[i] = planRef(p)
			}
			fmt.Fprintf(pg, "<li><b>%s</b> <span class=\"muted\">found by %s</span>", esc(d.Check), strings.Join(plans, ", "))
			if len(d.Explains) > 0 {
				fmt.Fprintf(pg, " <span class=\"muted\">· explains %s</span>", esc(strings.Join(d.Explains, ", ")))
			}
			if e := d.Strongest; e != nil {
				htmlAuditEvidence(pg, planRef(e.Plan), e.Evidence, "strongest")
			}
			pg.WriteString("</li>\n")
		}
		pg.WriteString("</ol>\n")
	}
	pg.WriteString("<h2>Properties</h2>\n<table>\n<tr><th>Property</th><th>Verdict</th><th>Summary</th><th>Measured against declared</th><th>Decided by</th></tr>\n")
	for _, p := range a.Properties {
		figure := "-"
		if e := p.Strongest; e != nil {
			figure = esc(evidenceFigure(e.Evidence))
		}
		plans := make([]string, len(p.DecidedBy))
		for i, pl := range p.DecidedBy {
			plans[i] = planRef(pl)
		}
		by := "-"
		if len(plans) > 0 {
			by = strings.Join(plans, ", ")
		}
		name := esc(p.Name)
		if len(p.Evidence) > 0 {
			name = fmt.Sprintf("<a href=\"#p-%s\">%s</a>", esc(p.Name), name)
		}
		fmt.Fprintf(pg, "<tr><td>%s</td><td>%s</td><td>%s</td><td class=\"mono\">%s</td><td class=\"small\">%s</td></tr>\n",
			name, verdictBadge(p.Verdict), esc(p.Summary), figure, by)
	}
	pg.WriteString("</table>\n")
	if len(a.Measured) > 0 {
		pg.WriteString("<h2>Measured against declared</h2>\n<table>\n<tr><th>Parameter</th><th>Declared</th><th>Measured</th><th>Verdict</th></tr>\n")
		for _, m := range a.Measured {
			fmt.Fprintf(pg, "<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n", esc(m.Name), esc(m.Declared), esc(m.Measured), verdictBadge(m.Verdict))
		}
		pg.WriteString("</table>\n")
	}
	for _, p := range a.Properties {
		if len(p.Evidence) == 0 {
			continue
		}
		fmt.Fprintf(pg, "<h3 id=\"p-%s\">Evidence: %s %s</h3>\n<ul>\n", esc(p.Name), esc(p.Name), verdictBadge(p.Verdict))
		for _, e := range p.Evidence {
			pg.WriteString("<li>")
			htmlAuditEvidence(pg, planRef(e.Plan), e.Evidence, "")
			pg.WriteString("</li>\n")
		}
		pg.WriteString("</ul>\n")
	}
	pg.WriteString("<h2>Plans</h2>\n<table>\n<tr><th>Plan</th><th>Verdict</th><th>Requests</th><th>Run time</th><th>Headline, or why not run</th></tr>\n")
	for _, p := range a.Plans {
		if !p.Ran {
			fmt.Fprintf(pg, "<tr class=\"muted\"><td>%s</td><td>not run</td><td></td><td></td><td>%s</td></tr>\n", esc(p.Plan), esc(p.Why))
			continue
		}
		what := p.Headline
		if p.Why != "" {
			what = strings.TrimSpace(what + " · " + p.Why)
		}
		fmt.Fprintf(pg, "<tr><td>%s</td><td>%s</td><td class=\"num\">%s</td><td class=\"num\">%s</td><td>%s</td></tr>\n",
			planRef(p.Plan), verdictBadge(p.Verdict), human.Count(p.Requests), esc(dur(p.Elapsed)), esc(what))
	}
	pg.WriteString("</table>\n")
	fmt.Fprintf(pg, "<footer class=\"muted\"><p>%s</p></footer>\n", esc(a.Schema))
	htmlTail(pg)
	_, err := io.WriteString(w, pg.String())
	return err
}

// htmlAuditEvidence writes one piece of evidence: the plan (a link to its
// report), the message, and the key, interval, measured against declared
// and request ids.
func htmlAuditEvidence(pg *page, plan string, e checks.Evidence, label string) {
	if label != "" {
		fmt.Fprintf(pg, "<div class=\"ev\"><span class=\"muted\">%s:</span> ", esc(label))
	} else {
		pg.WriteString("<div class=\"ev\">")
	}
	fmt.Fprintf(pg, "[%s] %s", plan, esc(e.Message))
	if ls := evidenceLines(e); len(ls) > 0 {
		pg.WriteString("<ul class=\"mono\">")
		for _, l := range ls {
			fmt.Fprintf(pg, "<li>%s</li>", esc(l))
		}
		pg.WriteString("</ul>")
	}
	pg.WriteString("</div>")
}

// relativeLink is a plan's report as a link from the audit's page, which
// lies in the folder above the plan's: PLAN/report.html.
func relativeLink(file string) string {
	return path.Base(path.Dir(filepath.ToSlash(file))) + "/" + path.Base(filepath.ToSlash(file))
}
