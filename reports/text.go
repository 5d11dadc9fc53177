package reports

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/internal/human"
	"github.com/rlverify/rlverify/thresholds"
)

// Text renders a terminal table. Color enables ANSI colours (only when
// writing to a terminal).
type Text struct{ Color bool }

func (t Text) paint(v checks.Verdict) string {
	s := strings.ToUpper(string(v))
	if !t.Color {
		return s
	}
	switch v {
	case checks.Pass:
		return "\x1b[32m" + s + "\x1b[0m"
	case checks.Fail, checks.Modified:
		return "\x1b[31;1m" + s + "\x1b[0m"
	case checks.Unknown, checks.Interrupted, checks.Incomplete:
		return "\x1b[33m" + s + "\x1b[0m"
	}
	return "\x1b[2m" + s + "\x1b[0m"
}

// Render implements Renderer. What the document holds is printed with
// terminal control characters escaped (see Printable).
func (t Text) Render(w io.Writer, d *Document) error {
	if pd, ok := printableCopy(d); ok {
		return t.render(w, pd)
	}
	return escapedOutput(w, func(w io.Writer) error { return Text{}.render(w, d) })
}

func (t Text) render(w io.Writer, d *Document) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\n", t.paint(d.Verdict), Headline(d))
	for _, w := range d.Warnings {
		fmt.Fprintf(&b, "WARNING: %s\n", w)
	}
	fmt.Fprintf(&b, "rlverify: plan %s", orDash(d.Run.Plan))
	if d.Run.Limiter != "" {
		fmt.Fprintf(&b, " · limiter %s", d.Run.Limiter)
	}
	if d.Run.Env != "" {
		fmt.Fprintf(&b, " · env %s", d.Run.Env)
	}
	if d.Run.Store != "" {
		fmt.Fprintf(&b, " · store %s", d.Run.Store)
	}
	if n := len(d.Run.Instances); n > 0 {
		fmt.Fprintf(&b, " · %d instance(s)", n)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "policy %s (%s)\n", d.Policy.Name, d.Policy.Source)
	for _, l := range d.Policy.Limits {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	fmt.Fprintf(&b, "requests %s\n", statsLine(d.Stats))
	if len(d.Errors) > 0 {
		fmt.Fprintf(&b, "errors by status: %s\n", ErrorSummary(d.Errors))
	}
	if l := d.Latency; l != nil {
		fmt.Fprintf(&b, "decision latency p50 %s p90 %s p99 %s max %s\n", dur(l.P50), dur(l.P90), dur(l.P99), dur(l.Max))
	}
	if d.Footprint != nil && d.Footprint.Samples > 2 {
		fmt.Fprintf(&b, "%s\n", d.Footprint.Describe())
	}
	for _, n := range d.Run.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	if d.Interrupted {
		fmt.Fprintf(&b, "INTERRUPTED: %s (verdicts judge what was recorded)\n", d.Reason)
	}
	if d.Truncated {
		b.WriteString("note: the history's last line was cut off and skipped\n")
	}
	for _, ph := range d.Phases {
		r := phaseRowOf(ph)
		fmt.Fprintf(&b, "phase %-14s %-9s %5s req", r.Name, r.Kind, r.Requests)
		if r.Spread != "" {
			fmt.Fprintf(&b, "  spread p50 / p99 / max %s", r.Spread)
		}
		if r.Aim != "" {
			fmt.Fprintf(&b, "  aim error %s", r.Aim)
		}
		if r.Rate != "" {
			fmt.Fprintf(&b, "  rate %s", r.Rate)
		}
		b.WriteString("\n")
		for _, n := range ph.Notes {
			fmt.Fprintf(&b, "  note: %s\n", n)
		}
	}
	for _, f := range d.Faults {
		fmt.Fprintf(&b, "fault %s %s from %s to %s\n", f.Kind, f.Param, dur(f.Start), dur(f.End))
	}
	if len(d.PerSecond) > 0 {
		textPerSecond(&b, [][]Second{d.PerSecond}, []string{"this run"})
	}
	if len(d.Keys) > 0 {
		b.WriteString("\n")
		textKeys(&b, d.Keys)
	}
	b.WriteString("\n")
	if len(d.Defects) > 0 {
		if len(d.Defects) == 1 {
			b.WriteString("1 defect:\n")
		} else {
			fmt.Fprintf(&b, "%d defects:\n", len(d.Defects))
		}
		for i, df := range d.Defects {
			fmt.Fprintf(&b, "  %d. %s\n", i+1, checks.DefectLine(df))
		}
		b.WriteString("\n")
	}
	tw := newTable(&b)
	fmt.Fprintln(tw, "CHECK\tVERDICT\tSUMMARY")
	for _, r := range d.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Name, t.paint(r.Verdict), r.Summary)
	}
	tw.Flush()
	t.textThresholds(&b, d)
	for _, r := range d.Checks {
		if r.Verdict != checks.Fail && r.Verdict != checks.Unknown {
			continue
		}
		if len(r.Evidence) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s %s:\n", r.Name, strings.ToLower(string(r.Verdict)))
		for _, ev := range r.Evidence {
			fmt.Fprintf(&b, "  - %s\n", ev.Message)
			if ev.Key != "" {
				fmt.Fprintf(&b, "    key %s", ev.Key)
				if ev.Limit != "" {
					fmt.Fprintf(&b, " limit %s", ev.Limit)
				}
				fmt.Fprintf(&b, " in [%s, %s]: observed %s, bound %s\n", dur(ev.From), dur(ev.To), human.Number(ev.Observed), human.Number(ev.Bound))
			}
			if len(ev.RequestIDs) > 0 {
				ids := make([]string, len(ev.RequestIDs))
				for i, id := range ev.RequestIDs {
					ids[i] = fmt.Sprint(id)
				}
				more := ""
				if ev.TotalIDs > len(ev.RequestIDs) {
					more = fmt.Sprintf(" … (%d in all)", ev.TotalIDs)
				}
				fmt.Fprintf(&b, "    requests %s%s\n", strings.Join(ids, ", "), more)
			}
		}
	}
	figs := figureLines(d.Checks)
	if len(figs) > 0 {
		b.WriteString("\nfigures:\n")
		for _, l := range figs {
			b.WriteString("  " + l + "\n")
		}
	}
	if ms := measured(d.Checks); len(ms) > 0 {
		b.WriteString("\nmeasured against declared:\n")
		tw := newTable(&b)
		fmt.Fprintln(tw, "  PARAMETER\tDECLARED\tMEASURED\tVERDICT")
		for _, m := range ms {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", m.Name, m.Declared, m.Measured, t.paint(m.Verdict))
		}
		tw.Flush()
	}
	if len(d.NotVerified) > 0 {
		b.WriteString("\nnot verified:\n")
		for _, u := range d.NotVerified {
			fmt.Fprintf(&b, "  %s: %s\n", u.Check, u.Reason)
		}
	}
	fmt.Fprintf(&b, "\nverdict: %s\n", t.paint(d.Verdict))
	_, err := io.WriteString(w, b.String())
	return err
}

func figureLines(rs []checks.Result) []string {
	var out []string
	for _, r := range rs {
		if len(r.Figures) == 0 || r.Verdict == checks.Skip {
			continue
		}
		out = append(out, fmt.Sprintf("%s: %s", r.Name, figureText(r.Figures)))
	}
	return out
}

// figureText formats figures as "a=1 b=2.5", sorted by name.
func figureText(figs map[string]float64) string {
	keys := make([]string, 0, len(figs))
	for k := range figs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + human.Number(figs[k])
	}
	return strings.Join(parts, " ")
}

func dur(ns int64) string { return human.Duration(time.Duration(ns)) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// RenderComparison implements ComparisonRenderer: a matrix with a row per
// check and per figure, a column per implementation.
func (t Text) RenderComparison(w io.Writer, c *Comparison) error {
	if pc, ok := printableCopy(c); ok {
		return t.renderComparison(w, pc)
	}
	return escapedOutput(w, func(w io.Writer) error { return Text{}.renderComparison(w, c) })
}

func (t Text) renderComparison(w io.Writer, c *Comparison) error {
	var b strings.Builder
	fmt.Fprintf(&b, "rlverify compare: plan %s · %d implementation(s)\n\n", orDash(c.Plan), len(c.Columns))
	tw := newTable(&b)
	row := func(name string, cells []string) {
		fmt.Fprintf(tw, "%s\t%s\n", name, strings.Join(cells, "\t"))
	}
	head := make([]string, len(c.Columns))
	verd := make([]string, len(c.Columns))
	for i := range c.Columns {
		head[i] = c.Columns[i].Name
		verd[i] = t.paint(c.Columns[i].Metrics.Verdict)
	}
	row("", head)
	row("verdict", verd)
	for _, name := range c.Checks {
		cells := make([]string, len(c.Columns))
		for i := range c.Columns {
			v := c.Columns[i].verdictOf(name)
			if v == "" {
				cells[i] = "-"
			} else {
				cells[i] = t.paint(v)
			}
		}
		row(name, cells)
	}
	names, cells := comparisonRows(c)
	for i, n := range names {
		row(n, cells[i])
	}
	tw.Flush()
	textPerSecond(&b, comparisonSeconds(c), head)
	fmt.Fprintf(&b, "\nverdict: %s\n", t.paint(c.Verdict))
	_, err := io.WriteString(w, b.String())
	return err
}

// evidenceLines describes one piece of evidence in plain text lines.
func evidenceLines(ev checks.Evidence) []string {
	var out []string
	if ev.Key != "" {
		s := "key " + ev.Key
		if ev.Limit != "" {
			s += " limit " + ev.Limit
		}
		out = append(out, fmt.Sprintf("%s in [%s, %s]: observed %s, bound %s", s, dur(ev.From), dur(ev.To), human.Number(ev.Observed), human.Number(ev.Bound)))
	}
	if len(ev.RequestIDs) > 0 {
		out = append(out, "requests "+idList(ev))
	}
	return out
}

func idList(ev checks.Evidence) string {
	ids := make([]string, len(ev.RequestIDs))
	for i, id := range ev.RequestIDs {
		ids[i] = fmt.Sprint(id)
	}
	more := ""
	if ev.TotalIDs > len(ev.RequestIDs) {
		more = fmt.Sprintf(" … (%d in all)", ev.TotalIDs)
	}
	return strings.Join(ids, ", ") + more
}

// comparisonSeconds returns each column's per-second table, or nil when no
// column has one.
func comparisonSeconds(c *Comparison) [][]Second {
	any := false
	out := make([][]Second, len(c.Columns))
	for i, col := range c.Columns {
		if col.Document != nil && len(col.Document.PerSecond) > 0 {
			out[i] = col.Document.PerSecond
			any = true
		}
	}
	if !any {
		return nil
	}
	return out
}

// textPerSecond writes per-second tables side by side, one column per name.
func textPerSecond(b *strings.Builder, cols [][]Second, names []string) {
	_, rows := perSecondRows(cols)
	if len(rows) == 0 {
		return
	}
	b.WriteString("\nper second (admitted/rejected/errors):\n")
	var tb strings.Builder
	tw := tabwriter.NewWriter(&tb, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "second\t%s\tfault\n", strings.Join(names, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
	for _, line := range strings.SplitAfter(tb.String(), "\n") {
		b.WriteString(strings.TrimRight(line, " \n"))
		if strings.HasSuffix(line, "\n") {
			b.WriteString("\n")
		}
	}
}

// ErrorSummary writes error counts by status: "404 ×100 (http://h/v1:
// "no such route"), no response ×2 (connection refused)", with a sample of
// the body the target answered when the history kept one.
func ErrorSummary(by []checks.StatusCount) string {
	parts := make([]string, 0, len(by))
	for _, e := range by {
		what := fmt.Sprint(e.Status)
		detail := e.URL
		if e.Status == 0 {
			what, detail = "no response", e.Err
		}
		if e.Body != "" {
			detail = strings.TrimPrefix(detail+": ", ": ") + fmt.Sprintf("%q", e.Body)
		}
		if detail != "" {
			parts = append(parts, fmt.Sprintf("%s ×%d (%s)", what, e.Count, detail))
		} else {
			parts = append(parts, fmt.Sprintf("%s ×%d", what, e.Count))
		}
	}
	return strings.Join(parts, ", ")
}

// measured collects the checks' measurements.
func measured(rs []checks.Result) []checks.Measurement {
	var out []checks.Measurement
	for _, r := range rs {
		out = append(out, r.Measured...)
	}
	return out
}

// statsLine is "56: admitted 47, rejected 8, errors 1" in human numbers.
func statsLine(s history.Stats) string {
	return fmt.Sprintf("%s: admitted %s, rejected %s, errors %s",
		human.Count(s.Requests), human.Count(s.Admitted), human.Count(s.Rejected), human.Count(s.Errors))
}

// phaseRow is one phase as every format shows it; a figure the phase does
// not have is "".
type phaseRow struct {
	Name, Kind, Requests, Span, Spread, Aim, Rate string
}

// phaseHead are the column names of a phase table (Markdown, HTML).
var phaseHead = []string{"Phase", "Kind", "Requests", "Span", "Spread p50 / p99 / max", "Aim error", "Rate"}

// phaseRowOf is the one place a phase becomes text, for every format.
func phaseRowOf(ph history.Phase) phaseRow {
	r := phaseRow{Name: ph.Name, Kind: ph.Kind, Requests: human.Count(ph.Requests), Span: dur(ph.Start) + " … " + dur(ph.End)}
	if ph.SpreadMax > 0 || ph.SpreadP99 > 0 {
		r.Spread = fmt.Sprintf("%s / %s / %s", dur(ph.SpreadP50), dur(ph.SpreadP99), dur(ph.SpreadMax))
	}
	if ph.AimError != 0 {
		r.Aim = dur(ph.AimError)
	}
	if ph.Wanted > 0 {
		r.Rate = rateLine(ph)
	}
	return r
}

// cells are the row's columns under phaseHead, "-" for a missing figure.
func (r phaseRow) cells() []string {
	return []string{r.Name, r.Kind, r.Requests, r.Span, orDash(r.Spread), orDash(r.Aim), orDash(r.Rate)}
}

// rateLine is a rate phase's achieved rate against the wanted one.
func rateLine(ph history.Phase) string {
	return fmt.Sprintf("%s of %s, late %s, dropped %s", human.Rate(ph.Rate), human.Rate(ph.Wanted), human.Count(ph.Late), human.Count(ph.Dropped))
}

// Headline is the verdict in words: the defect (the first of them, and how
// many) and any failed threshold by name, why nothing could be judged, or
// what passed — with the finding the plan exists to show (the edge effect
// of a fixed window) even when it is the declared behaviour.
func Headline(d *Document) string {
	switch d.Verdict {
	case checks.Modified:
		return fmt.Sprintf("the history was modified after the run (its digest does not match): no verdict drawn from it stands (%s)", recordedTally(d.Checks))
	case checks.Interrupted, checks.Incomplete:
		// Never "N checks passed": the checks judged part of the plan.
		why := d.Reason
		if d.Verdict == checks.Interrupted {
			why = "the run was cut short (" + strings.TrimPrefix(why, history.ReasonSignal) + ")"
		}
		return fmt.Sprintf("%s; the checks judged only what was recorded (%s)", why, recordedTally(d.Checks))
	}
	var failed []string
	for _, t := range d.Thresholds {
		if t.Verdict == thresholds.Fail {
			failed = append(failed, fmt.Sprintf("threshold %s failed: %s", t.Expr, t.Summary))
		}
	}
	switch {
	case len(d.Defects) == 1:
		return strings.Join(append([]string{"1 defect: " + checks.DefectLine(d.Defects[0])}, failed...), "; ")
	case len(d.Defects) > 1:
		return strings.Join(append([]string{fmt.Sprintf("%d defects; the first: %s", len(d.Defects), checks.DefectLine(d.Defects[0]))}, failed...), "; ")
	case len(failed) > 0:
		return strings.Join(failed, "; ")
	}
	for _, r := range d.Checks {
		if r.Verdict == checks.Unknown {
			return r.Name + ": " + r.Summary
		}
	}
	for _, t := range d.Thresholds {
		if t.Verdict == thresholds.Unknown {
			return fmt.Sprintf("threshold %s could not be judged: %s", t.Expr, t.Summary)
		}
	}
	n := map[checks.Verdict]int{}
	for _, r := range d.Checks {
		n[r.Verdict]++
	}
	s := fmt.Sprintf("%d checks passed, %d had nothing to judge", n[checks.Pass], n[checks.Skip])
	if f := finding(d); f != "" {
		s += "; " + f
	}
	return s
}

// finding is what a passing run shows that a reader came to see: a fixed
// window's edge admitting up to twice its count within one window's
// length (boundary-burst), which the declared policy allows.
func finding(d *Document) string {
	r := d.Check("oversell")
	if r == nil || r.Verdict != checks.Pass {
		return ""
	}
	ratio, worst := r.Figures["boundary_ratio"], r.Figures["worst_rolling_window"]
	if ratio < 1.5 {
		return ""
	}
	return fmt.Sprintf("edge effect: %s admitted within one window's length across a window edge, %s× the window's count (declared behaviour of a fixed window)",
		human.Number(worst), human.Number(ratio))
}

// recordedTally is what the checks of a cut run said, in a few words.
func recordedTally(rs []checks.Result) string {
	n := map[checks.Verdict]int{}
	for _, r := range rs {
		n[r.Verdict]++
	}
	return fmt.Sprintf("%d passed, %d unknown, %d had nothing to judge", n[checks.Pass]+n[checks.Explained], n[checks.Unknown], n[checks.Skip])
}
