package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rlverify/rlverify/internal/human"
	"github.com/rlverify/rlverify/reports"
)

func reportCmd() *cobra.Command {
	var (
		in      string
		formats []string
		out     string
	)
	c := &cobra.Command{
		Use:   "report --in result.json [--format html] [--out DIR]",
		Short: "Render a saved result (or comparison) in any format",
		Long: `Render a result.json written by attack or check (or a comparison written
by compare, told apart by its schema) again, in any format: text, json,
junit, md or html. Without --out the one format goes to stdout; with --out
every format is written to DIR/report.EXT (DIR/comparison.EXT for a
comparison). The exit code is 0 whatever the checks said, except for a
run that did not carry out its whole plan: 130 for an interrupted one, 3
for an incomplete one, so a CI step that renders a cut run is not green.

Examples:
  rlverify report --in rlverify-out/latest/result.json --format html --out rlverify-out/latest
  rlverify report --in rlverify-out/latest/result.json --format md >> "$GITHUB_STEP_SUMMARY"`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runReport(in, formats, out, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	fl := c.Flags()
	fl.StringVar(&in, "in", "", "saved result or comparison JSON")
	fl.StringSliceVar(&formats, "format", []string{"text"}, "formats: "+strings.Join(reports.FormatNames(), ", "))
	fl.StringVar(&out, "out", "", "write the reports into this directory instead of stdout")
	return c
}

func runReport(in string, formats []string, out string, stdout, stderr io.Writer) error {
	if in == "" {
		return usageErr("report: --in FILE is required")
	}
	if len(formats) == 0 {
		return usageErr("report: --format needs at least one of %s", strings.Join(reports.FormatNames(), ", "))
	}
	for _, f := range formats {
		if _, err := reports.Lookup(f); err != nil {
			return usageWrap(fmt.Errorf("--format: %w", err))
		}
	}
	if out == "" && len(formats) > 1 {
		return usageErr("report: %d formats go to files: give --out DIR (or one --format)", len(formats))
	}
	doc, cmp, err := reports.ReadAny(in)
	if err != nil {
		return usageWrap(err)
	}
	render := func(f reports.Format, w io.Writer) error {
		if cmp != nil {
			return f.RenderComparison(w, cmp)
		}
		return f.Render(w, doc)
	}
	if out == "" {
		if err := emitReports(formats, "", "", "", stdout, render); err != nil {
			return runErr(err)
		}
		return reportExit(doc, stderr)
	}
	base := "report"
	if cmp != nil {
		base = "comparison"
	}
	for _, format := range formats {
		file := filepath.Join(out, base+"."+reports.Extension(format))
		if abs(file) == abs(in) {
			return usageErr("report: %s would overwrite the input; choose another --out", file)
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return runErr(fmt.Errorf("--out: %w", err))
	}
	if err := emitReports(formats, out, base, "", nil, render); err != nil {
		return runErr(err)
	}
	for _, format := range formats {
		fmt.Fprintf(stderr, "rlverify: wrote %s\n", filepath.Join(out, base+"."+reports.Extension(format)))
	}
	return reportExit(doc, stderr)
}

// reportExit is the exit of rendering doc: that of a cut run (see cutExit),
// else 0.
func reportExit(doc *reports.Document, stderr io.Writer) error {
	if doc == nil {
		return nil
	}
	return cutExit(doc, stderr)
}

// emitReports writes reports (see reports.Emit), coloured on a terminal.
func emitReports(formats []string, dir, base, saved string, stdout io.Writer, render func(f reports.Format, w io.Writer) error) error {
	return reports.Emit(formats, dir, base, saved, stdout, colorOn(stdout), render)
}

func abs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}

// statusHints tells the user, on stderr, what to change when the target
// refused the requests themselves: a 405 (Method Not Allowed) wants
// another --method, and the target's own answer (its Allow header is not
// kept, its body sample is) usually says which.
func statusHints(doc *reports.Document, stderr io.Writer) {
	for _, e := range doc.Errors {
		if e.Status != http.StatusMethodNotAllowed {
			continue
		}
		said := ""
		if e.Body != "" {
			said = fmt.Sprintf(" It answered: %q.", e.Body)
		}
		fmt.Fprintln(stderr, reports.Printable(fmt.Sprintf("rlverify: %s request(s) got 405 Method Not Allowed from %s: send the method the target expects with --method (and --header/--body if it takes a body).%s",
			human.Count(e.Count), e.URL, said)))
	}
}
