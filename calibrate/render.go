package calibrate

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
)

// The report formats.
const (
	FormatText     = "text"
	FormatJSON     = "json"
	FormatMarkdown = "md"
	FormatHTML     = "html"
)

// ReportFormats lists the formats Render writes.
func ReportFormats() []string { return []string{FormatText, FormatJSON, FormatMarkdown, FormatHTML} }

// Render writes r in format to w.
func Render(w io.Writer, r *Report, format string) error {
	switch format {
	case FormatText:
		return renderText(w, r)
	case FormatJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	case FormatMarkdown:
		return renderMarkdown(w, r)
	case FormatHTML:
		return renderHTML(w, r)
	}
	return fmt.Errorf("calibrate: unknown report format %q: want %s", format, strings.Join(ReportFormats(), ", "))
}

// safe makes text from a log printable on a terminal: control characters
// and invalid UTF-8 are quoted, never written raw.
func safe(s string) string {
	for _, c := range s {
		if !unicode.IsPrint(c) || c == unicode.ReplacementChar {
			q := strconv.Quote(s)
			return q[1 : len(q)-1]
		}
	}
	return s
}

func describe(o Outcome, legit, abusive int) string {
	s := fmt.Sprintf("%d of %d legitimate (%s)", o.Legit, legit, Percent(o.LegitShare))
	if abusive > 0 {
		s += fmt.Sprintf("; %d of %d abusive (%s)", o.Abusive, abusive, Percent(o.AbusiveShare))
	}
	return s
}

func inputLine(r *Report) string {
	var files []string
	for _, f := range r.Files {
		s := fmt.Sprintf("%s (%s", safe(f.Name), f.Format)
		if f.Gzip {
			s += ", gzip"
		}
		s += fmt.Sprintf(", %d lines, %d requests", f.Lines, f.Requests)
		if f.Malformed > 0 {
			s += fmt.Sprintf(", %d malformed skipped", f.Malformed)
		}
		if f.Keyless > 0 {
			s += fmt.Sprintf(", %d without a key", f.Keyless)
		}
		if f.Reordered > 0 {
			s += fmt.Sprintf(", %d out of order sorted", f.Reordered)
		}
		files = append(files, s+")")
	}
	return strings.Join(files, "; ")
}

func renderText(w io.Writer, r *Report) error {
	fmt.Fprintf(w, "calibrate: %d requests, %d keys, %s … %s\n", r.Requests, r.Keys, r.First.Format("2006-01-02 15:04:05"), r.Last.Format("2006-01-02 15:04:05"))
	fmt.Fprintf(w, "input: %s\n", inputLine(r))
	for _, m := range r.Malformed {
		fmt.Fprintf(w, "  skipped %s:%d: %s\n", safe(m.File), m.Line, safe(m.Reason))
	}
	fmt.Fprintf(w, "policy: %s; target: at most %s of each tier's legitimate requests refused", safe(r.Policy), Percent(r.MaxRefused))
	if r.PerKey > 0 {
		fmt.Fprintf(w, ", at most %s of any key's", Percent(r.PerKey))
	}
	fmt.Fprintln(w)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", safe(n))
	}
	for _, t := range r.Tiers {
		fmt.Fprintf(w, "\ntier %s: %d keys, %d requests", safe(t.Tier), t.Keys, t.Requests)
		if t.Abusive > 0 {
			fmt.Fprintf(w, " (%d abusive)", t.Abusive)
		}
		fmt.Fprintln(w)
		for _, l := range t.Declared {
			fmt.Fprintf(w, "  declared %s\n", l.Describe())
		}
		fmt.Fprintf(w, "  refused by the declared policy: %s\n", describe(t.Refused, t.Legit, t.Abusive))
		if len(t.TopKeys) > 0 {
			fmt.Fprintln(w, "  keys refused most:")
			for _, k := range t.TopKeys {
				fmt.Fprintf(w, "    %-24s %d of %d (%s)\n", safe(k.Key), k.Refused, k.Requests, Percent(k.Share))
			}
		}
		if len(t.WorstMinutes) > 0 {
			fmt.Fprintln(w, "  worst minutes:")
			for _, m := range t.WorstMinutes {
				fmt.Fprintf(w, "    %s  %d refused; %s: %d refused of %d sent that minute, %d within one second from %s\n",
					m.Start.Format("2006-01-02 15:04"), m.Refused, safe(m.Key), m.KeyRefused, m.KeyRequests, m.PeakSecond, m.PeakAt.Format("15:04:05.000"))
			}
		}
		fmt.Fprintln(w, "  recommended (each searched with the other parameter as declared):")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "    algorithm\tparameter\tdeclared\trecommended\trefused (legitimate)\trefused (abusive)\treplays")
		star := ""
		for _, rec := range t.Recommended {
			val, ref, ab := rec.Value, Percent(rec.Refused.LegitShare), "-"
			if !rec.Found {
				val, ref = "none", safe(rec.Why)
			} else if t.Abusive > 0 {
				ab = Percent(rec.Refused.AbusiveShare)
			}
			if rec.Found && rec.Why != "" {
				val += " *"
				star = rec.Why
			}
			fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\t%s\t%d\n", rec.Algorithm, rec.Param, rec.Declared, val, ref, ab, rec.Replays)
		}
		tw.Flush()
		if star != "" {
			fmt.Fprintf(w, "    * %s\n", safe(star))
		}
		fmt.Fprintln(w, "  the same traffic through each algorithm:")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "    limiter\tnumbers\trefused (legitimate)\trefused (abusive)\tdecided otherwise than declared")
		for _, c := range t.Compare {
			ab := "-"
			if t.Abusive > 0 {
				ab = fmt.Sprintf("%d (%s)", c.Refused.Abusive, Percent(c.Refused.AbusiveShare))
			}
			fmt.Fprintf(tw, "    %s\t%s\t%d (%s)\t%s\t%d\n", safe(c.Name), numbers(c), c.Refused.Legit, Percent(c.Refused.LegitShare), ab, c.Disagree)
		}
		tw.Flush()
		if tl := t.Timeline; tl != nil {
			fmt.Fprintf(w, "  timeline of %s (from %s):\n", safe(tl.Key), tl.Start.Format("2006-01-02 15:04:05.000"))
			tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintf(tw, "    t (s)\t%s\n", strings.Join(tl.Columns, "\t"))
			if tl.Skipped > 0 {
				fmt.Fprintf(tw, "    … %d earlier\n", tl.Skipped)
			}
			for _, row := range tl.Rows {
				fmt.Fprintf(tw, "    %s", strconv.FormatFloat(row.At, 'f', 3, 64))
				for _, ok := range row.Allowed {
					fmt.Fprintf(tw, "\t%s", word(ok))
				}
				if row.Abusive {
					fmt.Fprint(tw, "\t(abusive)")
				}
				fmt.Fprintln(tw)
			}
			if tl.More > 0 {
				fmt.Fprintf(tw, "    … %d more\n", tl.More)
			}
			tw.Flush()
		}
	}
	return nil
}

func word(ok bool) string {
	if ok {
		return "ALLOW"
	}
	return "DENY"
}

func numbers(c Comparison) string {
	if c.Limit.Algorithm.Bucketed() {
		return fmt.Sprintf("K=%d r=%s", c.Limit.Capacity, fmtRate(c.Limit.R()))
	}
	return fmt.Sprintf("N=%d W=%s", c.Limit.Count, c.Limit.Window)
}

func fmtRate(r float64) string {
	return strings.TrimSuffix(strconv.FormatFloat(r, 'g', 6, 64), ".0") + "/s"
}

// md escapes text for a Markdown table cell.
func md(s string) string {
	s = safe(s)
	r := strings.NewReplacer("|", `\|`, "`", "\\`", "<", "&lt;", ">", "&gt;", "*", `\*`, "_", `\_`, "[", `\[`)
	return r.Replace(s)
}

func renderMarkdown(w io.Writer, r *Report) error {
	fmt.Fprintf(w, "# Calibration\n\n%d requests, %d keys, %s … %s. Input: %s.\n\n", r.Requests, r.Keys,
		r.First.Format("2006-01-02 15:04:05"), r.Last.Format("2006-01-02 15:04:05"), md(inputLine(r)))
	fmt.Fprintf(w, "Policy %s; target: at most %s of each tier's legitimate requests refused.\n", md(r.Policy), Percent(r.MaxRefused))
	for _, m := range r.Malformed {
		fmt.Fprintf(w, "\n- skipped %s:%d: %s", md(m.File), m.Line, md(m.Reason))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "\n- note: %s", md(n))
	}
	fmt.Fprintln(w)
	for _, t := range r.Tiers {
		fmt.Fprintf(w, "\n## Tier %s\n\n%d keys, %d requests (%d abusive). Refused by the declared policy: %s.\n\n", md(t.Tier), t.Keys, t.Requests, t.Abusive, describe(t.Refused, t.Legit, t.Abusive))
		fmt.Fprintln(w, "| algorithm | parameter | declared | recommended | refused (legitimate) | refused (abusive) |")
		fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- |")
		for _, rec := range t.Recommended {
			val, ref, ab := rec.Value, Percent(rec.Refused.LegitShare), Percent(rec.Refused.AbusiveShare)
			if !rec.Found {
				val, ref, ab = "none", md(rec.Why), "–"
			} else if rec.Why != "" {
				val += " (" + rec.Why + ")"
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", rec.Algorithm, rec.Param, md(rec.Declared), md(val), ref, ab)
		}
		fmt.Fprintln(w, "\n| limiter | numbers | refused (legitimate) | refused (abusive) | decided otherwise |")
		fmt.Fprintln(w, "| --- | --- | --- | --- | --- |")
		for _, c := range t.Compare {
			fmt.Fprintf(w, "| %s | %s | %d (%s) | %d (%s) | %d |\n", md(c.Name), md(numbers(c)), c.Refused.Legit, Percent(c.Refused.LegitShare), c.Refused.Abusive, Percent(c.Refused.AbusiveShare), c.Disagree)
		}
		if len(t.WorstMinutes) > 0 {
			fmt.Fprintln(w, "\n| minute | refused | key | its refused | its requests | its busiest second |")
			fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- |")
			for _, m := range t.WorstMinutes {
				fmt.Fprintf(w, "| %s | %d | %s | %d | %d | %d from %s |\n", m.Start.Format("2006-01-02 15:04"), m.Refused, md(m.Key), m.KeyRefused, m.KeyRequests, m.PeakSecond, m.PeakAt.Format("15:04:05.000"))
			}
		}
		if tl := t.Timeline; tl != nil && len(tl.Rows) > 0 {
			fmt.Fprintf(w, "\nTimeline of %s from %s", md(tl.Key), tl.Start.Format("2006-01-02 15:04:05.000"))
			if tl.Skipped > 0 {
				fmt.Fprintf(w, " (%d earlier arrivals not shown)", tl.Skipped)
			}
			fmt.Fprint(w, ":\n\n| t (s) |")
			for _, c := range tl.Columns {
				fmt.Fprintf(w, " %s |", md(c))
			}
			fmt.Fprint(w, "\n| --- |"+strings.Repeat(" --- |", len(tl.Columns))+"\n")
			for _, row := range tl.Rows {
				fmt.Fprintf(w, "| %s |", strconv.FormatFloat(row.At, 'f', 3, 64))
				for _, ok := range row.Allowed {
					fmt.Fprintf(w, " %s |", word(ok))
				}
				fmt.Fprintln(w)
			}
			if tl.More > 0 {
				fmt.Fprintf(w, "\n%d more arrivals not shown.\n", tl.More)
			}
		}
	}
	return nil
}

// ---------------------------------------------------------------- HTML

var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"pct": Percent, "nums": numbers, "word": word, "s": safe,
	"curve": curveSVG, "timeline": timelineSVG,
	"ts": func(t interface{ Format(string) string }) string { return t.Format("2006-01-02 15:04:05") },
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>rlverify calibrate</title>
<style>body{font-family:sans-serif;margin:1.5em;max-width:70em}table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}svg{background:#fafafa;border:1px solid #ddd;margin:.5em 0}</style>
</head><body>
<h1>Calibration</h1>
<p>{{.Requests}} requests, {{.Keys}} keys, {{ts .First}} … {{ts .Last}}. Policy {{s .Policy}}; target: at most {{pct .MaxRefused}} of each tier's legitimate requests refused.</p>
{{range .Notes}}<p>Note: {{s .}}</p>{{end}}
{{range .Malformed}}<p>Skipped {{s .File}}:{{.Line}}: {{s .Reason}}</p>{{end}}
{{range .Tiers}}{{$t := .}}
<h2>Tier {{s .Tier}}</h2>
<p>{{.Keys}} keys, {{.Requests}} requests ({{.Abusive}} abusive). The declared policy refuses {{.Refused.Legit}} legitimate requests ({{pct .Refused.LegitShare}}) and {{.Refused.Abusive}} abusive ({{pct .Refused.AbusiveShare}}).</p>
<table><tr><th>algorithm</th><th>parameter</th><th>declared</th><th>recommended</th><th>refused (legitimate)</th><th>refused (abusive)</th></tr>
{{range .Recommended}}<tr><td>{{.Algorithm}}</td><td>{{.Param}}</td><td>{{.Declared}}</td>{{if .Found}}<td>{{.Value}}{{with .Why}} ({{s .}}){{end}}</td><td>{{pct .Refused.LegitShare}}</td><td>{{pct .Refused.AbusiveShare}}</td>{{else}}<td>none</td><td colspan="2">{{s .Why}}</td>{{end}}</tr>
{{end}}</table>
<table><tr><th>limiter</th><th>numbers</th><th>refused (legitimate)</th><th>refused (abusive)</th><th>decided otherwise</th></tr>
{{range .Compare}}<tr><td>{{s .Name}}</td><td>{{nums .}}</td><td>{{.Refused.Legit}} ({{pct .Refused.LegitShare}})</td><td>{{.Refused.Abusive}}</td><td>{{.Disagree}}</td></tr>
{{end}}</table>
{{if .Curves}}<h3>Refused share of legitimate requests</h3>{{curve .Curves "count"}}{{curve .Curves "rate"}}{{end}}
{{if .WorstMinutes}}<h3>Worst minutes</h3><table><tr><th>minute</th><th>refused</th><th>key</th><th>its refused</th><th>its requests</th><th>its busiest second</th></tr>
{{range .WorstMinutes}}<tr><td>{{ts .Start}}</td><td>{{.Refused}}</td><td>{{s .Key}}</td><td>{{.KeyRefused}}</td><td>{{.KeyRequests}}</td><td>{{.PeakSecond}}</td></tr>
{{end}}</table>{{end}}
{{with .Timeline}}<h3>Timeline of {{s .Key}}</h3>{{timeline .}}{{end}}
{{end}}
</body></html>
`))

func renderHTML(w io.Writer, r *Report) error { return page.Execute(w, r) }

var palette = []string{"#1a56db", "#c81e1e", "#057a55", "#9f580a", "#7e3af2", "#0694a2"}

// curveSVG draws the curves over the count axis ("count") or over the
// rate/window axis ("rate"): x on a log scale, y the refused share.
func curveSVG(curves []Curve, axis string) template.HTML {
	const W, H, L, B = 640.0, 260.0, 60.0, 40.0
	var sel []Curve
	for _, c := range curves {
		isCount := c.Param == "capacity" || c.Param == "limit"
		if (axis == "count") == isCount && len(c.Points) > 0 {
			sel = append(sel, c)
		}
	}
	if len(sel) == 0 {
		return ""
	}
	minX, maxX, maxY := math.Inf(1), math.Inf(-1), 0.0
	for _, c := range sel {
		for _, p := range c.Points {
			minX, maxX, maxY = math.Min(minX, p.X), math.Max(maxX, p.X), math.Max(maxY, p.Share)
		}
	}
	if maxY == 0 {
		maxY = 0.01
	}
	lx := func(x float64) float64 {
		if maxX <= minX {
			return L + (W-L-10)/2
		}
		return L + (math.Log(x)-math.Log(minX))/(math.Log(maxX)-math.Log(minX))*(W-L-10)
	}
	ly := func(y float64) float64 { return H - B - y/maxY*(H-B-10) }
	var b strings.Builder
	title := sel[0].Param
	if axis == "count" {
		title = "capacity K / limit N"
	}
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" role="img"><title>refused share over %s</title>`, W, H, template.HTMLEscapeString(title))
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#888"/><line x1="%.0f" y1="10" x2="%.0f" y2="%.0f" stroke="#888"/>`, L, H-B, W-10, H-B, L, L, H-B)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="11" text-anchor="end">%s</text><text x="%.0f" y="%.0f" font-size="11" text-anchor="end">0%%</text>`, L-4, 14.0, Percent(maxY), L-4, H-B)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="11" text-anchor="middle">%s (log scale)</text>`, (W+L)/2, H-6, template.HTMLEscapeString(title))
	for i, c := range sel {
		col := palette[i%len(palette)]
		var pts []string
		for _, p := range c.Points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", lx(p.X), ly(p.Share)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`, col, strings.Join(pts, " "))
		for _, p := range c.Points {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"><title>%s %s=%s: %s</title></circle>`, lx(p.X), ly(p.Share), col,
				c.Algorithm, c.Param, template.HTMLEscapeString(p.Label), Percent(p.Share))
		}
		fmt.Fprintf(&b, `<text x="%.0f" y="%d" font-size="11" fill="%s">%s</text>`, W-180, 20+14*i, col, c.Algorithm)
	}
	if first := sel[0].Points; len(first) > 0 {
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="11">%s</text><text x="%.0f" y="%.0f" font-size="11" text-anchor="end">%s</text>`,
			L, H-B+14, template.HTMLEscapeString(first[0].Label), W-10, H-B+14, template.HTMLEscapeString(first[len(first)-1].Label))
	}
	b.WriteString("</svg>")
	return template.HTML(b.String()) // every text from the data is escaped above
}

// timelineSVG draws one row of ticks per column: an admitted arrival as a
// short green tick, a refused one as a tall red one.
func timelineSVG(tl *Timeline) template.HTML {
	if len(tl.Rows) == 0 {
		return ""
	}
	const W, row, L = 640.0, 26.0, 170.0
	H := row*float64(len(tl.Columns)) + 24
	span := tl.Rows[len(tl.Rows)-1].At - tl.Rows[0].At
	x := func(at float64) float64 {
		if span <= 0 {
			return L + 5
		}
		return L + 5 + (at-tl.Rows[0].At)/span*(W-L-15)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" role="img"><title>arrivals of one key and each limiter's decisions</title>`, W, H)
	for c, name := range tl.Columns {
		y := row*float64(c) + 18
		fmt.Fprintf(&b, `<text x="4" y="%.0f" font-size="11">%s</text>`, y, template.HTMLEscapeString(safe(name)))
		for _, r := range tl.Rows {
			if r.Allowed[c] {
				fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#057a55"/>`, x(r.At), y-4, x(r.At), y)
			} else {
				fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#c81e1e" stroke-width="1.5"/>`, x(r.At), y-12, x(r.At), y+2)
			}
		}
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="11">%.3f s</text><text x="%.0f" y="%.0f" font-size="11" text-anchor="end">%.3f s</text></svg>`,
		L+5, H-4, tl.Rows[0].At, W-10, H-4, tl.Rows[len(tl.Rows)-1].At)
	return template.HTML(b.String()) // names are escaped above
}
