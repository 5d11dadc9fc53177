package reports

import (
	"fmt"
	"strings"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/thresholds"
)

// SetThresholds records the run's judged thresholds in d (once, after
// Build) and merges their verdicts into d's: a threshold that fails fails
// the document, like a check.
func (d *Document) SetThresholds(rs []thresholds.Result) {
	d.Thresholds = rs
	for _, r := range rs {
		d.Verdict = checks.Merge(d.Verdict, checks.Verdict(r.Verdict))
	}
}

// textThresholds writes the THRESHOLD table of the text report.
func (t Text) textThresholds(b *strings.Builder, d *Document) {
	if len(d.Thresholds) == 0 {
		return
	}
	b.WriteString("\n")
	tw := newTable(b)
	fmt.Fprintln(tw, "THRESHOLD\tVERDICT\tSUMMARY")
	for _, r := range d.Thresholds {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Expr, t.paint(checks.Verdict(r.Verdict)), r.Summary)
	}
	tw.Flush()
}

// mdThresholds writes the Thresholds table of the Markdown report.
func mdThresholds(b *strings.Builder, d *Document) {
	if len(d.Thresholds) == 0 {
		return
	}
	b.WriteString("\n### Thresholds\n\n| Threshold | Verdict | Summary |\n|---|---|---|\n")
	for _, r := range d.Thresholds {
		fmt.Fprintf(b, "| `%s` | %s | %s |\n", strings.ReplaceAll(r.Expr, "|", `\|`), badge(checks.Verdict(r.Verdict)), mdCell(r.Summary))
	}
}

// junitThresholds adds a test case per threshold to s: a failed threshold
// is a <failure> of type "threshold", an unknown one an <error>.
func junitThresholds(s *junitSuite, d *Document, classname string) {
	for _, r := range d.Thresholds {
		tc := junitCase{Name: "threshold " + r.Expr, Classname: classname + ".thresholds", Time: "0.000"}
		switch thresholds.Verdict(r.Verdict) {
		case thresholds.Fail:
			s.Failures++
			tc.Failure = &junitProblem{Message: r.Summary, Type: "threshold", Text: r.Summary + "\n" + thresholdSource(r)}
		case thresholds.Unknown:
			s.Errors++
			tc.Error = &junitProblem{Message: r.Summary, Type: "unknown", Text: r.Summary + "\n" + thresholdSource(r)}
		default:
			tc.SystemOut = r.Summary
		}
		s.Tests++
		s.Cases = append(s.Cases, tc)
	}
}

func thresholdSource(r thresholds.Result) string {
	if r.Source == "" {
		return ""
	}
	return "declared in " + r.Source + "\n"
}

// htmlThresholds writes the Thresholds table of the HTML report (nothing
// when the run has none).
func htmlThresholds(b *strings.Builder, d *Document) {
	if len(d.Thresholds) == 0 {
		return
	}
	b.WriteString("<h2>Thresholds</h2>\n<table>\n<tr><th>Threshold</th><th>Verdict</th><th>Summary</th></tr>\n")
	for _, r := range d.Thresholds {
		fmt.Fprintf(b, "<tr><td><code>%s</code></td><td>%s</td><td>%s</td></tr>\n", esc(r.Expr), verdictBadge(checks.Verdict(r.Verdict)), esc(r.Summary))
	}
	b.WriteString("</table>\n")
}
