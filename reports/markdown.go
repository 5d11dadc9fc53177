package reports

import (
	"fmt"
	"io"
	"strings"

	"github.com/rlverify/rlverify/checks"
)

// Markdown renders GitHub-flavoured Markdown for a CI job summary
// ($GITHUB_STEP_SUMMARY) or a pull request comment: a verdict line with
// plain badge text (no emoji), a checks table, the evidence of failed and
// unknown checks as bullet lists, the phases and the figures.
type Markdown struct{}

// Render implements Renderer.
func (Markdown) Render(w io.Writer, d *Document) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## rlverify: %s — plan `%s` against `%s`\n\n", badge(d.Verdict), mdCode(orDash(d.Run.Plan)), mdCode(suiteName(d)))
	fmt.Fprintf(&b, "**Verdict: %s** · %s\n\n%s\n\n", badge(d.Verdict), tally(d.Checks), mdText(Headline(d)))
	for _, w := range d.Warnings {
		fmt.Fprintf(&b, "> **WARNING:** %s\n\n", mdText(w))
	}
	if d.Interrupted {
		fmt.Fprintf(&b, "> **INTERRUPTED:** %s (verdicts judge what was recorded)\n\n", mdText(d.Reason))
	}
	if d.Truncated {
		b.WriteString("> The history's last line was cut off and skipped.\n\n")
	}
	b.WriteString("| Run | |\n|---|---|\n")
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "| %s | %s |\n", k, mdCell(v))
		}
	}
	row("plan", d.Run.Plan)
	row("target", d.Run.Target)
	row("limiter", d.Run.Limiter)
	row("environment", d.Run.Env)
	row("store", d.Run.Store)
	if n := len(d.Run.Instances); n > 0 {
		row("instances", fmt.Sprint(n))
	}
	row("policy", fmt.Sprintf("%s (%s)", d.Policy.Name, d.Policy.Source))
	for _, l := range d.Policy.Limits {
		row("limit", l)
	}
	row("fail mode", d.Policy.FailMode)
	row("requests", statsLine(d.Stats))
	if len(d.Errors) > 0 {
		row("errors by status", ErrorSummary(d.Errors))
	}
	if l := d.Latency; l != nil {
		row("decision latency", fmt.Sprintf("p50 %s, p90 %s, p99 %s, max %s", dur(l.P50), dur(l.P90), dur(l.P99), dur(l.Max)))
	}
	for _, n := range d.Run.Notes {
		row("note", n)
	}
	if len(d.Defects) > 0 {
		b.WriteString("\n### Defects\n\n")
		for i, df := range d.Defects {
			fmt.Fprintf(&b, "%d. %s\n", i+1, mdText(checks.DefectLine(df)))
		}
	}
	b.WriteString("\n### Checks\n\n| Check | Verdict | Summary |\n|---|---|---|\n")
	for _, r := range d.Checks {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", mdCell(r.Name), badge(r.Verdict), mdCell(r.Summary))
	}
	mdThresholds(&b, d)
	for _, r := range d.Checks {
		if (r.Verdict != checks.Fail && r.Verdict != checks.Unknown) || len(r.Evidence) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n### Evidence: %s (%s)\n\n", mdText(r.Name), badge(r.Verdict))
		for _, ev := range r.Evidence {
			fmt.Fprintf(&b, "- %s\n", mdText(ev.Message))
			for _, l := range evidenceLines(ev) {
				fmt.Fprintf(&b, "  - %s\n", mdText(l))
			}
		}
	}
	if len(d.Phases) > 0 {
		b.WriteString("\n### Phases\n\n| " + strings.Join(phaseHead, " | ") + " |\n|---|---|---:|---|---|---|---|\n")
		for _, ph := range d.Phases {
			cs := phaseRowOf(ph).cells()
			for i := range cs {
				cs[i] = mdCell(cs[i])
			}
			fmt.Fprintf(&b, "| %s |\n", strings.Join(cs, " | "))
		}
	}
	if d.Footprint != nil && d.Footprint.Samples > 2 {
		fmt.Fprintf(&b, "\n%s\n", mdText(d.Footprint.Describe()))
	}
	mdKeys(&b, d.Keys)
	if len(d.Faults) > 0 {
		b.WriteString("\n### Faults\n\n")
		for _, f := range d.Faults {
			fmt.Fprintf(&b, "- %s %s from %s to %s\n", mdText(f.Kind), mdText(f.Param), dur(f.Start), dur(f.End))
		}
		mdPerSecond(&b, [][]Second{d.PerSecond}, []string{"this run"})
	}
	if figs := figureLines(d.Checks); len(figs) > 0 {
		b.WriteString("\n### Figures\n\n")
		for _, l := range figs {
			fmt.Fprintf(&b, "- %s\n", mdText(l))
		}
	}
	if ms := measured(d.Checks); len(ms) > 0 {
		b.WriteString("\n### Measured against declared\n\n| Parameter | Declared | Measured | Verdict |\n|---|---|---|---|\n")
		for _, m := range ms {
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", mdCell(m.Name), mdCell(m.Declared), mdCell(m.Measured), badge(m.Verdict))
		}
	}
	if len(d.NotVerified) > 0 {
		b.WriteString("\n### Not verified\n\n")
		for _, u := range d.NotVerified {
			fmt.Fprintf(&b, "- **%s**: %s\n", mdText(u.Check), mdText(u.Reason))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// RenderComparison implements ComparisonRenderer: one table, a column per
// implementation.
func (Markdown) RenderComparison(w io.Writer, c *Comparison) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## rlverify compare: %s — plan `%s`\n\n", badge(c.Verdict), mdCode(orDash(c.Plan)))
	b.WriteString("| |")
	for _, col := range c.Columns {
		fmt.Fprintf(&b, " %s |", mdCell(col.Name))
	}
	b.WriteString("\n|---|")
	b.WriteString(strings.Repeat("---|", len(c.Columns)))
	b.WriteString("\n| **verdict** |")
	for _, col := range c.Columns {
		fmt.Fprintf(&b, " **%s** |", badge(col.Metrics.Verdict))
	}
	b.WriteString("\n")
	for _, name := range c.Checks {
		fmt.Fprintf(&b, "| %s |", mdCell(name))
		for i := range c.Columns {
			v := c.Columns[i].verdictOf(name)
			if v == "" {
				b.WriteString(" - |")
			} else {
				fmt.Fprintf(&b, " %s |", badge(v))
			}
		}
		b.WriteString("\n")
	}
	names, cells := comparisonRows(c)
	for i, n := range names {
		fmt.Fprintf(&b, "| %s | %s |\n", n, strings.Join(cells[i], " | "))
	}
	if secs := comparisonSeconds(c); secs != nil {
		colNames := make([]string, len(c.Columns))
		for i, col := range c.Columns {
			colNames[i] = col.Name
		}
		mdPerSecond(&b, secs, colNames)
	}
	for _, col := range c.Columns {
		if col.Document == nil {
			continue
		}
		for _, r := range col.Document.Checks {
			if r.Verdict != checks.Fail || len(r.Evidence) == 0 {
				continue
			}
			fmt.Fprintf(&b, "\n- **%s** %s: %s\n", mdText(col.Name), mdText(r.Name), mdText(r.Evidence[0].Message))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// badge is the verdict as upper-case text.
func badge(v checks.Verdict) string { return strings.ToUpper(string(v)) }

// tally counts verdicts: "11 checks: 1 failed, 0 unknown, 4 passed, 6 skipped".
func tally(rs []checks.Result) string {
	n := map[checks.Verdict]int{}
	for _, r := range rs {
		n[r.Verdict]++
	}
	s := fmt.Sprintf("%d checks: %d failed, %d unknown, %d passed, %d skipped",
		len(rs), n[checks.Fail], n[checks.Unknown], n[checks.Pass], n[checks.Skip])
	if n[checks.Explained] > 0 {
		s += fmt.Sprintf(", %d explained by another defect", n[checks.Explained])
	}
	return s
}

var mdEscaper = strings.NewReplacer(
	`\`, `\\`, "`", "\\`", "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`,
	"<", "&lt;", ">", "&gt;", "|", `\|`, "#", `\#`, "\n", " ", "\r", " ",
)

// mdText escapes s so Markdown shows it literally on one line.
func mdText(s string) string { return mdEscaper.Replace(s) }

// mdCell escapes s for a table cell.
func mdCell(s string) string { return mdText(s) }

// mdCode makes s safe inside a `code span`.
func mdCode(s string) string {
	return strings.NewReplacer("`", "'", "\n", " ", "|", `\|`).Replace(s)
}

// mdPerSecond writes per-second tables side by side as a Markdown table.
func mdPerSecond(b *strings.Builder, cols [][]Second, names []string) {
	_, rows := perSecondRows(cols)
	if len(rows) == 0 {
		return
	}
	b.WriteString("\n**Per second** (admitted/rejected/errors):\n\n| second |")
	for _, n := range names {
		fmt.Fprintf(b, " %s |", mdCell(n))
	}
	b.WriteString(" fault |\n|---|")
	b.WriteString(strings.Repeat("---|", len(names)+1))
	b.WriteString("\n")
	for _, r := range rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
}
