package rlverify

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/rlverify/rlverify/reports"
)

// RerenderOptions say which saved result (or comparison) to render again,
// in which formats, and where.
type RerenderOptions struct {
	// In is a result.json written by an attack or a check, or a
	// comparison.json (told apart by its schema).
	In string
	// Formats are report formats; without Dir only one, to Stdout.
	Formats []string
	// Dir, when set, receives every format as report.EXT
	// (comparison.EXT); it may not overwrite In.
	Dir string
	// Stdout and Color: where the one format goes without Dir.
	Stdout io.Writer
	Color  bool
}

// Rerender renders a saved result again. It returns the document (nil
// for a comparison), whose cut the caller may turn into an exit, and the
// files written. Errors in the options or the input are *OptionError.
func Rerender(o RerenderOptions) (*reports.Document, []string, error) {
	if o.In == "" {
		return nil, nil, fieldErr("In", "FILE is required")
	}
	if len(o.Formats) == 0 {
		return nil, nil, fieldErr("Formats", "needs at least one of %s", strings.Join(reports.FormatNames(), ", "))
	}
	for _, f := range o.Formats {
		if _, err := reports.Lookup(f); err != nil {
			return nil, nil, &OptionError{Field: "Formats", Err: err}
		}
	}
	if o.Dir == "" && len(o.Formats) > 1 {
		return nil, nil, fieldErr("Dir", "is required: %d formats go to files (or give one format)", len(o.Formats))
	}
	doc, cmp, err := reports.ReadAny(o.In)
	if err != nil {
		return nil, nil, &OptionError{Err: err}
	}
	render := func(f reports.Format, w io.Writer) error {
		if cmp != nil {
			return f.RenderComparison(w, cmp)
		}
		return f.Render(w, doc)
	}
	if o.Dir == "" {
		return doc, nil, reports.Emit(o.Formats, "", "", "", o.Stdout, o.Color, render)
	}
	base := "report"
	if cmp != nil {
		base = "comparison"
	}
	var files []string
	for _, format := range o.Formats {
		file := filepath.Join(o.Dir, base+"."+reports.Extension(format))
		if abs(file) == abs(o.In) {
			return nil, nil, fieldErr("Dir", "%s: %s would overwrite the input; choose another", o.Dir, file)
		}
		files = append(files, file)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("report: %w", err)
	}
	return doc, files, reports.Emit(o.Formats, o.Dir, base, "", nil, false, render)
}

func abs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}
