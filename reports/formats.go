package reports

import (
	"fmt"
	"io"
	"strings"
)

// Format is one report format: the one place a format is named, given its
// file extension and told how to render each kind of document (a result,
// a comparison, an audit). Lookup finds one by name; the zero Format is not
// usable.
type Format struct {
	// Name is what --format takes.
	Name string
	// Ext is the file extension: report.EXT, comparison.EXT, audit.EXT.
	Ext string
	// Page marks a format made to be opened in a browser rather than read
	// in a terminal or a pipe: a run that writes its reports into a folder
	// does not also print it on stdout (see Stdout).
	Page bool

	color bool
	doc   func(io.Writer, *Document, bool) error
	cmp   func(io.Writer, *Comparison, bool) error
	audit func(io.Writer, *Audit, bool) error
}

// formats are every format, in the order FormatNames lists them.
var formats = []Format{
	{Name: "html", Ext: "html", Page: true,
		doc:   func(w io.Writer, d *Document, _ bool) error { return HTML{}.Render(w, d) },
		cmp:   func(w io.Writer, c *Comparison, _ bool) error { return HTML{}.RenderComparison(w, c) },
		audit: func(w io.Writer, a *Audit, _ bool) error { return auditHTML(w, a) }},
	{Name: "json", Ext: "json",
		doc:   func(w io.Writer, d *Document, _ bool) error { return writeJSON(w, d) },
		cmp:   func(w io.Writer, c *Comparison, _ bool) error { return writeJSON(w, c) },
		audit: func(w io.Writer, a *Audit, _ bool) error { return writeJSON(w, a) }},
	{Name: "junit", Ext: "junit.xml",
		doc:   func(w io.Writer, d *Document, _ bool) error { return JUnit{}.Render(w, d) },
		cmp:   func(w io.Writer, c *Comparison, _ bool) error { return JUnit{}.RenderComparison(w, c) },
		audit: func(w io.Writer, a *Audit, _ bool) error { return auditJUnit(w, a) }},
	{Name: "md", Ext: "md",
		doc:   func(w io.Writer, d *Document, _ bool) error { return Markdown{}.Render(w, d) },
		cmp:   func(w io.Writer, c *Comparison, _ bool) error { return Markdown{}.RenderComparison(w, c) },
		audit: func(w io.Writer, a *Audit, _ bool) error { return auditMarkdown(w, a) }},
	{Name: "text", Ext: "txt",
		doc:   func(w io.Writer, d *Document, color bool) error { return Text{Color: color}.Render(w, d) },
		cmp:   func(w io.Writer, c *Comparison, color bool) error { return Text{Color: color}.RenderComparison(w, c) },
		audit: func(w io.Writer, a *Audit, color bool) error { return auditText(w, a, Text{Color: color}) }},
}

// FormatNames lists the formats' names, sorted.
func FormatNames() []string {
	s := make([]string, len(formats))
	for i, f := range formats {
		s[i] = f.Name
	}
	return s
}

// Lookup returns the format called name.
func Lookup(name string) (Format, error) {
	for _, f := range formats {
		if f.Name == name {
			return f, nil
		}
	}
	return Format{}, fmt.Errorf("unknown format %q (want %s)", name, strings.Join(FormatNames(), ", "))
}

// Colored returns f with ANSI colours on or off (only text has any; a
// caller turns them on for a terminal only).
func (f Format) Colored(on bool) Format { f.color = on; return f }

// Render writes the result document d; Format implements Renderer.
func (f Format) Render(w io.Writer, d *Document) error { return f.doc(w, d, f.color) }

// RenderComparison writes the comparison c.
func (f Format) RenderComparison(w io.Writer, c *Comparison) error { return f.cmp(w, c, f.color) }

// RenderAudit writes the audit a.
func (f Format) RenderAudit(w io.Writer, a *Audit) error { return f.audit(w, a, f.color) }

// Extension is the file extension of the format called name ("" for none).
func Extension(name string) string {
	f, _ := Lookup(name)
	return f.Ext
}

// Stdout is the format a command prints on stdout, of the formats the user
// asked for: the first, except that a page (html) is not printed when the
// reports are also written to files (toFiles) — nobody reads 50 KB of HTML
// in a terminal, and the page is in its file — so the text report is
// printed instead. Without files the first format is printed whatever it
// is, since stdout is then its only destination.
func Stdout(names []string, toFiles bool) string {
	if len(names) == 0 {
		return "text"
	}
	if f, err := Lookup(names[0]); err == nil && f.Page && toFiles {
		return "text"
	}
	return names[0]
}

// RenderComparison writes c in the format called name.
func RenderComparison(w io.Writer, name string, c *Comparison) error {
	f, err := Lookup(name)
	if err != nil {
		return err
	}
	return f.RenderComparison(w, c)
}

// RenderAudit writes a in the format called name, coloured when color
// (text only).
func RenderAudit(w io.Writer, name string, a *Audit, color bool) error {
	f, err := Lookup(name)
	if err != nil {
		return err
	}
	return f.Colored(color).RenderAudit(w, a)
}
