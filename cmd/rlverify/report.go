package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rlverify/rlverify"
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
	doc, files, err := rlverify.Rerender(rlverify.RerenderOptions{In: in, Formats: formats, Dir: out, Stdout: stdout, Color: colorOn(stdout)})
	if err != nil {
		return fromLib(err)
	}
	for _, file := range files {
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

// emitReports writes reports (see reports.Emit), coloured on a terminal.
func emitReports(formats []string, dir, base, saved string, stdout io.Writer, render func(f reports.Format, w io.Writer) error) error {
	return reports.Emit(formats, dir, base, saved, stdout, colorOn(stdout), render)
}
