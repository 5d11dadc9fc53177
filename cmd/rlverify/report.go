package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

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
	write := func(w io.Writer, format string, color bool) error {
		if cmp != nil {
			if format == "text" {
				return reports.Text{Color: color}.RenderComparison(w, cmp)
			}
			return reports.RenderComparison(w, format, cmp)
		}
		r, _ := reports.Lookup(format)
		if t, ok := r.(reports.Text); ok {
			t.Color = color
			r = t
		}
		return r.Render(w, doc)
	}
	if out == "" {
		if err := write(stdout, formats[0], colorOn(stdout)); err != nil {
			return runErr(err)
		}
		return reportExit(doc, stderr)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return runErr(fmt.Errorf("--out: %w", err))
	}
	base := "report."
	if cmp != nil {
		base = "comparison."
	}
	for _, format := range formats {
		file := filepath.Join(out, base+reports.Extension(format))
		if abs(file) == abs(in) {
			return usageErr("report: %s would overwrite the input; choose another --out", file)
		}
		if err := writeAtomic(file, func(w io.Writer) error { return write(w, format, false) }); err != nil {
			return runErr(fmt.Errorf("report: %s not written, nothing partial left behind: %w", file, err))
		}
		fmt.Fprintf(stderr, "rlverify: wrote %s\n", file)
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

func abs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}
