// Command compare-matrix regenerates the published comparison matrix: it
// runs `rlverify compare` over every implementation for each plan of
// internal/matrix (several times, marking cells whose verdict changes as
// unstable), saves the verdicts in docs/compare/matrix.json and writes the
// Markdown between the matrix markers of README.md and docs/compare.md. It
// refuses to write a matrix with a surprising cell that nothing explains.
// With --column it runs one implementation only and puts its column into
// the committed data, for a new column without rerunning every other.
// scripts/compare-matrix.sh builds rlverify and runs it.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rlverify/rlverify/internal/matrix"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "compare-matrix:", err)
		os.Exit(1)
	}
}

func run() error {
	bin := flag.String("rlverify", "", "the rlverify binary to run (required unless --render)")
	runs := flag.Int("runs", 2, "runs of every plan; cells that differ between runs are marked unstable")
	data := flag.String("data", "docs/compare/matrix.json", "the matrix data file")
	docs := flag.String("docs", "README.md=docs/compare.md,docs/compare.md", "documents whose matrix section is rewritten; DOC=NOTES renders the tables only, linking to the notes in NOTES")
	render := flag.Bool("render", false, "only render the documents from the data file (after editing explanations)")
	column := flag.String("column", "", "run only this implementation (beside token-bucket, as compare needs two) and put its column into the data file, keeping the others")
	flag.Parse()
	var d *matrix.Data
	switch {
	case *render:
		var err error
		if d, err = matrix.Load(*data); err != nil {
			return err
		}
	case *column != "":
		if *bin == "" || *runs < 1 {
			return fmt.Errorf("give --rlverify BINARY and --runs ≥ 1")
		}
		var err error
		if d, err = matrix.Load(*data); err != nil {
			return err
		}
		scratch, err := os.MkdirTemp("", "compare-matrix-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(scratch)
		impls := []string{"token-bucket", *column}
		for i := range d.Tables {
			tb := &d.Tables[i]
			var got matrix.Table
			for r := 0; r < *runs; r++ {
				one, err := matrix.RunColumns(*bin, tb.Plan, impls, filepath.Join(scratch, fmt.Sprintf("%s-%d", tb.Plan, r)), os.Stderr)
				if err != nil {
					fmt.Fprintf(os.Stderr, "compare-matrix: %v; once more\n", err)
					one, err = matrix.RunColumns(*bin, tb.Plan, impls, filepath.Join(scratch, fmt.Sprintf("%s-%d-again", tb.Plan, r)), os.Stderr)
				}
				if err != nil {
					return err
				}
				if r == 0 {
					got = one
				} else {
					got.Merge(one)
				}
			}
			got.Columns = slices.DeleteFunc(got.Columns, func(c matrix.Column) bool { return c.Name != *column })
			tb.Replace(got)
		}
		host, _ := os.Hostname()
		d.Generated += fmt.Sprintf("; column %s: %s, %d runs, %s", *column, time.Now().UTC().Format("2006-01-02"), *runs, host)
	default:
		if *bin == "" || *runs < 1 {
			return fmt.Errorf("give --rlverify BINARY and --runs ≥ 1")
		}
		scratch, err := os.MkdirTemp("", "compare-matrix-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(scratch)
		host, _ := os.Hostname()
		d = &matrix.Data{Generated: fmt.Sprintf("%s, %d runs, %s", time.Now().UTC().Format("2006-01-02"), *runs, host)}
		for _, p := range matrix.Plans {
			var t matrix.Table
			for r := 0; r < *runs; r++ {
				got, err := matrix.Run(*bin, p.Name, filepath.Join(scratch, fmt.Sprintf("%s-%d", p.Name, r)), os.Stderr)
				if err != nil {
					// An environment that failed to start on a loaded
					// machine (a Redis that did not answer in time) gets
					// one more try.
					fmt.Fprintf(os.Stderr, "compare-matrix: %v; once more\n", err)
					got, err = matrix.Run(*bin, p.Name, filepath.Join(scratch, fmt.Sprintf("%s-%d-again", p.Name, r)), os.Stderr)
				}
				if err != nil {
					return err
				}
				if r == 0 {
					t = got
				} else {
					t.Merge(got)
				}
			}
			d.Tables = append(d.Tables, t)
		}
		if err := os.MkdirAll(filepath.Dir(*data), 0o755); err != nil {
			return err
		}
	}
	d.MarkTimingDependent()
	if err := d.Save(*data); err != nil {
		return err
	}
	if missing := d.Unexplained(); len(missing) > 0 {
		return fmt.Errorf("cells without an explanation in internal/matrix/explain.go (the data is saved; add them and rerun with --render):\n  %s", strings.Join(missing, "\n  "))
	}
	for _, spec := range strings.Split(*docs, ",") {
		doc, notesIn, _ := strings.Cut(spec, "=")
		text := matrix.Render(d, notesIn)
		b, err := os.ReadFile(doc)
		if err != nil {
			return err
		}
		out, err := matrix.Splice(string(b), text)
		if err != nil {
			return fmt.Errorf("%s: %w", doc, err)
		}
		if err := os.WriteFile(doc, []byte(out), 0o644); err != nil {
			return err
		}
	}
	return nil
}
