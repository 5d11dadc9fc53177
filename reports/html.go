package reports

import (
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/rlverify/rlverify/checks"
)

// HTML renders one self-contained page: no network, no external script,
// font or stylesheet, and no JavaScript at all. For every timeline key (and
// each of its instances) it draws inline SVG plots: cumulative admitted and
// rejected requests against the policy envelope, the simulated bucket level,
// and decision latency, with fault windows and the intervals of violation
// evidence shaded. The key/instance selector uses CSS :target, so the first
// key shows without any link followed.
type HTML struct{}

const htmlStyle = `
:root{--fg:#1f2328;--mut:#59636e;--bd:#d1d9e0;--pass:#1a7f37;--fail:#cf222e;--unk:#9a6700;--skip:#59636e}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);margin:0 auto;max-width:1240px;padding:16px 20px 40px}
h1{font-size:22px;margin:4px 0}h2{font-size:18px;margin:26px 0 8px;border-bottom:1px solid var(--bd);padding-bottom:4px}h3{font-size:15px;margin:14px 0 6px}
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid var(--bd);padding:3px 8px;text-align:left;vertical-align:top}th{background:#f6f8fa}
td.num{text-align:right;font-variant-numeric:tabular-nums}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
.muted{color:var(--mut)}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-weight:600;font-size:12px;color:#fff;letter-spacing:.03em}
.badge.pass{background:var(--pass)}.badge.fail{background:var(--fail)}.badge.unknown{background:var(--unk)}.badge.skip{background:var(--skip)}
h1 .badge{font-size:15px;vertical-align:middle}
.note{background:#fff8c5;border:1px solid #d4a72c;padding:6px 10px;border-radius:6px;margin:8px 0}
nav.keys{display:flex;flex-wrap:wrap;gap:4px 14px;margin:8px 0}
nav.keys a{text-decoration:none;color:#0969da}nav.keys .inst a{font-size:12px}
.view{display:none;border:1px solid var(--bd);border-radius:6px;padding:8px 12px;margin-top:8px}
.view:target{display:block}.dflt{display:block}.view:target~.dflt{display:none}
svg.plot{display:block;width:100%;height:auto;margin:6px 0}
svg text{font:11px system-ui,sans-serif;fill:var(--mut)}
svg .title{font-size:12.5px;font-weight:600;fill:var(--fg)}
svg .grid{stroke:#eaeef2;stroke-width:1}svg .axis{stroke:#8c959f;stroke-width:1}
svg .ln{fill:none;stroke-width:1.6;stroke-linejoin:round}
svg .adm{stroke:var(--pass)}svg .rej{stroke:var(--fail)}svg .err{stroke:#8c959f}
svg .env{stroke:#0969da;stroke-dasharray:6 4}svg .cap{stroke:#8250df;stroke-dasharray:3 3;stroke-width:1}
svg .lvl{stroke:#8250df}svg .p50{stroke:#0969da}svg .p99{stroke:#bc4c00}svg .p50,svg .p99{stroke-width:2.6;stroke-linecap:round}
svg .zero{stroke:#57606a;stroke-width:1}
svg rect.fault{fill:#d4a72c;fill-opacity:.22}svg rect.viol{fill:#cf222e;fill-opacity:.2;stroke:#cf222e;stroke-opacity:.6}
svg rect.debt{fill:#cf222e;fill-opacity:.06}
svg .phase{stroke:#8c959f;stroke-dasharray:2 3}
`

// Render implements Renderer.
func (HTML) Render(w io.Writer, d *Document) error {
	var b strings.Builder
	title := fmt.Sprintf("rlverify: %s — %s against %s", badge(d.Verdict), orDash(d.Run.Plan), suiteName(d))
	htmlHead(&b, title)
	fmt.Fprintf(&b, "<header><h1>rlverify %s</h1><p>plan <b>%s</b> against <b>%s</b> · %s</p></header>\n",
		verdictBadge(d.Verdict), esc(orDash(d.Run.Plan)), esc(suiteName(d)), esc(tally(d.Checks)))
	if d.Interrupted {
		fmt.Fprintf(&b, "<p class=\"note\"><b>Interrupted:</b> %s (verdicts judge what was recorded)</p>\n", esc(d.Reason))
	}
	if d.Truncated {
		b.WriteString("<p class=\"note\">The history's last line was cut off and skipped.</p>\n")
	}
	htmlCheckTable(&b, d)
	htmlThresholds(&b, d)
	htmlTimeline(&b, d)
	htmlEvidence(&b, d)
	htmlRun(&b, d)
	htmlPhases(&b, d)
	if figs := figureLines(d.Checks); len(figs) > 0 {
		b.WriteString("<h2>Figures</h2>\n<ul class=\"mono\">\n")
		for _, l := range figs {
			fmt.Fprintf(&b, "<li>%s</li>\n", esc(l))
		}
		b.WriteString("</ul>\n")
	}
	fmt.Fprintf(&b, "<footer class=\"muted\"><p>%s · run %s · started %s</p></footer>\n</body>\n</html>\n",
		esc(d.Schema), esc(orDash(d.Run.ID)), esc(d.Run.Start.UTC().Format("2006-01-02 15:04:05 MST")))
	_, err := io.WriteString(w, b.String())
	return err
}

// RenderComparison implements ComparisonRenderer.
func (HTML) RenderComparison(w io.Writer, c *Comparison) error {
	var b strings.Builder
	htmlHead(&b, fmt.Sprintf("rlverify compare: %s — %s", badge(c.Verdict), orDash(c.Plan)))
	fmt.Fprintf(&b, "<header><h1>rlverify compare %s</h1><p>plan <b>%s</b> · %d implementation(s)</p></header>\n",
		verdictBadge(c.Verdict), esc(orDash(c.Plan)), len(c.Columns))
	b.WriteString("<h2>Matrix</h2>\n<table>\n<tr><th></th>")
	for _, col := range c.Columns {
		fmt.Fprintf(&b, "<th>%s</th>", esc(col.Name))
	}
	b.WriteString("</tr>\n<tr><th>verdict</th>")
	for _, col := range c.Columns {
		fmt.Fprintf(&b, "<td>%s</td>", verdictBadge(col.Metrics.Verdict))
	}
	b.WriteString("</tr>\n")
	for _, name := range c.Checks {
		fmt.Fprintf(&b, "<tr><th>%s</th>", esc(name))
		for i := range c.Columns {
			if v := c.Columns[i].verdictOf(name); v != "" {
				fmt.Fprintf(&b, "<td>%s</td>", verdictBadge(v))
			} else {
				b.WriteString("<td class=\"muted\">-</td>")
			}
		}
		b.WriteString("</tr>\n")
	}
	names, cells := comparisonRows(c)
	for i, n := range names {
		fmt.Fprintf(&b, "<tr><th>%s</th>", esc(n))
		for _, cell := range cells[i] {
			fmt.Fprintf(&b, "<td class=\"num\">%s</td>", esc(cell))
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</table>\n")
	for _, col := range c.Columns {
		d := col.Document
		if d == nil {
			continue
		}
		fmt.Fprintf(&b, "<h2>%s %s</h2>\n<p class=\"muted\">%s</p>\n", esc(col.Name), verdictBadge(d.Verdict), esc(tally(d.Checks)))
		htmlCheckTable(&b, d)
		htmlEvidence(&b, d)
		if t := d.Timeline; t != nil && len(t.Keys) > 0 {
			k := &t.Keys[0]
			fmt.Fprintf(&b, "<h3>Busiest key <code>%s</code></h3>\n", esc(k.Key))
			admissionsPlot(&b, d, k, &k.All, true)
		}
	}
	b.WriteString("<footer class=\"muted\"><p>" + esc(c.Schema) + "</p></footer>\n</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func htmlHead(b *strings.Builder, title string) {
	fmt.Fprintf(b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>%s</title>\n<style>%s</style>\n</head>\n<body>\n", esc(title), htmlStyle)
}

func esc(s string) string { return html.EscapeString(s) }

func verdictBadge(v checks.Verdict) string {
	return fmt.Sprintf("<span class=\"badge %s\">%s</span>", esc(string(v)), esc(badge(v)))
}

func htmlRun(b *strings.Builder, d *Document) {
	b.WriteString("<h2>Run</h2>\n<table>\n")
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(b, "<tr><th>%s</th><td>%s</td></tr>\n", esc(k), esc(v))
		}
	}
	row("plan", d.Run.Plan)
	row("target", d.Run.Target)
	row("limiter", d.Run.Limiter)
	row("environment", d.Run.Env)
	row("store", d.Run.Store)
	for i, in := range d.Run.Instances {
		row(fmt.Sprintf("instance %d", i), in)
	}
	row("policy", fmt.Sprintf("%s (%s), fail mode %s", d.Policy.Name, d.Policy.Source, d.Policy.FailMode))
	for _, l := range d.Policy.Limits {
		row("limit", l)
	}
	row("requests", fmt.Sprintf("%d: admitted %d, rejected %d, errors %d", d.Stats.Requests, d.Stats.Admitted, d.Stats.Rejected, d.Stats.Errors))
	if l := d.Latency; l != nil {
		row("decision latency", fmt.Sprintf("p50 %s, p90 %s, p99 %s, max %s", dur(l.P50), dur(l.P90), dur(l.P99), dur(l.Max)))
	}
	if d.Elapsed > 0 {
		row("elapsed", dur(d.Elapsed))
	}
	for _, n := range d.Run.Notes {
		row("note", n)
	}
	b.WriteString("</table>\n")
}

func htmlCheckTable(b *strings.Builder, d *Document) {
	b.WriteString("<h2>Checks</h2>\n<table>\n<tr><th>Check</th><th>Verdict</th><th>Summary</th></tr>\n")
	for _, r := range d.Checks {
		fmt.Fprintf(b, "<tr><td>%s</td><td>%s</td><td>%s</td></tr>\n", esc(r.Name), verdictBadge(r.Verdict), esc(r.Summary))
	}
	b.WriteString("</table>\n")
}

func htmlEvidence(b *strings.Builder, d *Document) {
	for _, r := range d.Checks {
		if (r.Verdict != checks.Fail && r.Verdict != checks.Unknown) || len(r.Evidence) == 0 {
			continue
		}
		fmt.Fprintf(b, "<h3>Evidence: %s %s</h3>\n<ul>\n", esc(r.Name), verdictBadge(r.Verdict))
		for _, ev := range r.Evidence {
			fmt.Fprintf(b, "<li>%s", esc(ev.Message))
			if ls := evidenceLines(ev); len(ls) > 0 {
				b.WriteString("<ul class=\"mono\">")
				for _, l := range ls {
					fmt.Fprintf(b, "<li>%s</li>", esc(l))
				}
				b.WriteString("</ul>")
			}
			b.WriteString("</li>\n")
		}
		b.WriteString("</ul>\n")
	}
}

func htmlPhases(b *strings.Builder, d *Document) {
	if len(d.Phases) > 0 {
		b.WriteString("<h2>Phases</h2>\n<table>\n<tr><th>Phase</th><th>Kind</th><th>Requests</th><th>Span</th><th>Spread p50 / p99 / max</th><th>Aim error</th><th>Rate</th></tr>\n")
		for _, ph := range d.Phases {
			spread, aim, rate := "-", "-", "-"
			if ph.SpreadMax > 0 || ph.SpreadP99 > 0 {
				spread = fmt.Sprintf("%s / %s / %s", dur(ph.SpreadP50), dur(ph.SpreadP99), dur(ph.SpreadMax))
			}
			if ph.AimError != 0 {
				aim = dur(ph.AimError)
			}
			if ph.Wanted > 0 {
				rate = fmt.Sprintf("%.0f/s of %.0f/s, late %d, dropped %d", ph.Rate, ph.Wanted, ph.Late, ph.Dropped)
			}
			fmt.Fprintf(b, "<tr><td>%s</td><td>%s</td><td class=\"num\">%d</td><td>%s … %s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n",
				esc(ph.Name), esc(ph.Kind), ph.Requests, dur(ph.Start), dur(ph.End), esc(spread), esc(aim), esc(rate))
		}
		b.WriteString("</table>\n")
	}
	if len(d.Faults) > 0 {
		b.WriteString("<h2>Faults</h2>\n<ul>\n")
		for _, f := range d.Faults {
			fmt.Fprintf(b, "<li>%s %s %s from %s to %s</li>\n", esc(f.Kind), esc(f.Target), esc(f.Param), dur(f.Start), dur(f.End))
		}
		b.WriteString("</ul>\n")
	}
}

func viewID(k, inst int) string {
	if inst < 0 {
		return fmt.Sprintf("v%d", k)
	}
	return fmt.Sprintf("v%d-i%d", k, inst)
}

func htmlTimeline(b *strings.Builder, d *Document) {
	t := d.Timeline
	if t == nil || len(t.Keys) == 0 {
		return
	}
	fmt.Fprintf(b, "<h2>Timeline</h2>\n<p class=\"muted\">Buckets of %s, for drawing only (the checks judge every request). Shaded: <span style=\"color:#9a6700\">fault windows</span>, <span style=\"color:#cf222e\">intervals of violation evidence</span>.", dur(t.Width))
	if t.OmittedKeys > 0 {
		fmt.Fprintf(b, " %d less busy key(s) not drawn.", t.OmittedKeys)
	}
	b.WriteString("</p>\n<nav class=\"keys\">\n")
	for ki := range t.Keys {
		k := &t.Keys[ki]
		fmt.Fprintf(b, "<span><a href=\"#%s\"><code>%s</code></a> <span class=\"muted\">%d req</span>", viewID(ki, -1), esc(k.Key), k.Requests)
		for _, s := range k.Instances {
			fmt.Fprintf(b, " <span class=\"inst\"><a href=\"#%s\">inst %d</a></span>", viewID(ki, s.Instance), s.Instance)
		}
		b.WriteString("</span>\n")
	}
	b.WriteString("</nav>\n<div class=\"views\">\n")
	// The first key's view goes last: it shows unless another view is the
	// :target (a later sibling can be hidden by an earlier :target).
	for ki := len(t.Keys) - 1; ki >= 0; ki-- {
		k := &t.Keys[ki]
		for _, s := range k.Instances {
			keyView(b, d, ki, k, &s, "view")
		}
		if ki > 0 {
			keyView(b, d, ki, k, &k.All, "view")
		}
	}
	keyView(b, d, 0, &t.Keys[0], &t.Keys[0].All, "view dflt")
	b.WriteString("</div>\n")
}

func keyView(b *strings.Builder, d *Document, ki int, k *KeyTimeline, s *Series, class string) {
	id := viewID(ki, s.Instance)
	fmt.Fprintf(b, "<section class=\"%s\" id=\"%s\">\n<h3><code>%s</code>", class, id, esc(k.Key))
	if s.Instance >= 0 {
		fmt.Fprintf(b, " on instance %d", s.Instance)
		if s.Instance < len(d.Run.Instances) {
			fmt.Fprintf(b, " <span class=\"muted\">(%s)</span>", esc(d.Run.Instances[s.Instance]))
		}
	}
	fmt.Fprintf(b, " <span class=\"muted\">%d request(s)", s.Requests)
	if k.Tier != "" {
		fmt.Fprintf(b, ", tier %s", esc(k.Tier))
	}
	if k.Limit != nil {
		fmt.Fprintf(b, ", limit %s", esc(k.Limit.Describe()))
	}
	b.WriteString("</span></h3>\n")
	if k.OmittedInstances > 0 && s.Instance < 0 {
		fmt.Fprintf(b, "<p class=\"muted\">%d less busy instance(s) have no view of their own.</p>\n", k.OmittedInstances)
	}
	admissionsPlot(b, d, k, s, s.Instance < 0)
	if s.Instance < 0 && len(k.Level) > 0 {
		levelPlot(b, d, k)
	}
	latencyPlot(b, d, k, s)
	b.WriteString("</section>\n")
}

// plot draws one SVG chart with a time x-axis.
type plot struct {
	b                *strings.Builder
	w, h             float64
	left, right, top float64
	bottom           float64
	x0, x1, y0, y1   float64
}

const (
	plotW = 1160
	plotH = 230
)

func newPlot(b *strings.Builder, t *Timeline, y0, y1 float64) *plot {
	if y1 <= y0 {
		y1 = y0 + 1
	}
	return &plot{b: b, w: plotW, h: plotH, left: 64, right: 16, top: 28, bottom: 30,
		x0: float64(t.Start), x1: float64(t.End()), y0: y0, y1: y1}
}

func (p *plot) X(ns float64) float64 {
	return p.left + (ns-p.x0)/(p.x1-p.x0)*(p.w-p.left-p.right)
}

func (p *plot) Y(v float64) float64 {
	return p.h - p.bottom - (v-p.y0)/(p.y1-p.y0)*(p.h-p.top-p.bottom)
}

func f1(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) }

func (p *plot) open(label, title string, legend [][2]string) {
	fmt.Fprintf(p.b, "<svg class=\"plot\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"%s\">\n", int(p.w), int(p.h), esc(label))
	fmt.Fprintf(p.b, "<text class=\"title\" x=\"%s\" y=\"16\">%s</text>\n", f1(p.left), esc(title))
	x := p.w - p.right
	for i := len(legend) - 1; i >= 0; i-- {
		x -= float64(len([]rune(legend[i][1])))*6.2 + 34
		fmt.Fprintf(p.b, "<line class=\"ln %s\" x1=\"%s\" y1=\"12\" x2=\"%s\" y2=\"12\"/><text x=\"%s\" y=\"16\">%s</text>\n",
			legend[i][0], f1(x), f1(x+20), f1(x+24), esc(legend[i][1]))
	}
}

func (p *plot) close() { p.b.WriteString("</svg>\n") }

// axes draws the grid, the y ticks (formatted by yf) and the time ticks.
func (p *plot) axes(yf func(float64) string) {
	ys := niceStep((p.y1 - p.y0) / 5)
	for v := math.Ceil(p.y0/ys) * ys; v <= p.y1+ys*1e-9; v += ys {
		y := p.Y(v)
		fmt.Fprintf(p.b, "<line class=\"grid\" x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\"/><text x=\"%s\" y=\"%s\" text-anchor=\"end\">%s</text>\n",
			f1(p.left), f1(y), f1(p.w-p.right), f1(y), f1(p.left-6), f1(y+4), esc(yf(v)))
	}
	xs := niceStep((p.x1 - p.x0) / 10)
	for v := math.Ceil(p.x0/xs) * xs; v <= p.x1+xs*1e-9; v += xs {
		x := p.X(v)
		fmt.Fprintf(p.b, "<line class=\"grid\" x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\"/><text x=\"%s\" y=\"%s\" text-anchor=\"middle\">%s</text>\n",
			f1(x), f1(p.top), f1(x), f1(p.h-p.bottom), f1(x), f1(p.h-p.bottom+16), esc(timeLabel(v, xs)))
	}
	fmt.Fprintf(p.b, "<line class=\"axis\" x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\"/>\n", f1(p.left), f1(p.h-p.bottom), f1(p.w-p.right), f1(p.h-p.bottom))
	fmt.Fprintf(p.b, "<line class=\"axis\" x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\"/>\n", f1(p.left), f1(p.top), f1(p.left), f1(p.h-p.bottom))
}

// band shades [from, to] (ns) over the plot's height; at least 2 px wide.
func (p *plot) band(from, to float64, class, tip string) {
	from, to = math.Max(from, p.x0), math.Min(to, p.x1)
	if to < from {
		return
	}
	x0, x1 := p.X(from), p.X(to)
	if x1-x0 < 2 {
		x0, x1 = (x0+x1)/2-1, (x0+x1)/2+1
	}
	fmt.Fprintf(p.b, "<rect class=\"%s\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\"><title>%s</title></rect>\n",
		class, f1(x0), f1(p.top), f1(x1-x0), f1(p.h-p.top-p.bottom), esc(tip))
}

// hline draws a horizontal line at value v.
func (p *plot) hline(v float64, class string) {
	y := p.Y(v)
	fmt.Fprintf(p.b, "<line class=\"ln %s\" x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\"/>\n", class, f1(p.left), f1(y), f1(p.w-p.right), f1(y))
}

// line draws a polyline through (xs[i], ys[i]), dropping points that do not
// change the drawing (repeated pixels, the middle of flat runs).
func (p *plot) line(xs, ys []float64, class string) {
	if len(xs) == 0 {
		return
	}
	type pt struct{ x, y string }
	var s strings.Builder
	var pts []pt
	flush := func() {
		for i, q := range pts {
			if i == 0 {
				s.WriteString("M" + q.x + " " + q.y)
			} else {
				s.WriteString("L" + q.x + " " + q.y)
			}
		}
		if len(pts) == 1 {
			s.WriteString("h0.1")
		}
		pts = pts[:0]
	}
	for i := range xs {
		if math.IsNaN(ys[i]) {
			flush()
			continue
		}
		q := pt{f1(p.X(xs[i])), f1(p.Y(ys[i]))}
		if n := len(pts); n > 0 && pts[n-1] == q {
			continue
		}
		if n := len(pts); n >= 2 && pts[n-1].y == q.y && pts[n-2].y == q.y {
			pts[n-1] = q
			continue
		}
		pts = append(pts, q)
	}
	flush()
	if s.Len() == 0 {
		return
	}
	fmt.Fprintf(p.b, "<path class=\"ln %s\" d=\"%s\"/>\n", class, s.String())
}

// shade draws the fault windows, the phase starts and the violation
// intervals of key.
func (p *plot) shade(d *Document, key string, labels bool) {
	for _, f := range d.Faults {
		end := f.End
		if end == 0 {
			end = int64(p.x1)
		}
		p.band(float64(f.Start), float64(end), "fault", fmt.Sprintf("fault %s %s %s … %s", f.Kind, f.Param, dur(f.Start), dur(f.End)))
	}
	lastLabel := math.Inf(-1)
	for _, ph := range d.Phases {
		x := p.X(float64(ph.Start))
		if x < p.left || x > p.w-p.right {
			continue
		}
		fmt.Fprintf(p.b, "<line class=\"phase\" x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\"/>", f1(x), f1(p.top), f1(x), f1(p.h-p.bottom))
		// A label only where it does not run into the previous one.
		if labels && x-lastLabel > 90 && x < p.w-p.right-40 {
			lastLabel = x
			fmt.Fprintf(p.b, "<text x=\"%s\" y=\"%s\">%s</text>", f1(x+3), f1(p.top+11), esc(ph.Name))
		}
		p.b.WriteString("\n")
	}
	for _, r := range d.Checks {
		if r.Verdict != checks.Fail {
			continue
		}
		for _, ev := range r.Evidence {
			if ev.Key != key || ev.To < ev.From {
				continue
			}
			p.band(float64(ev.From), float64(ev.To), "viol", fmt.Sprintf("%s: %s", r.Name, ev.Message))
		}
	}
}

func (t *Timeline) ends() []float64 {
	xs := make([]float64, t.Buckets+1)
	for i := range xs {
		xs[i] = float64(t.Start + int64(i)*t.Width)
	}
	return xs
}

func cumulative(v []int) ([]float64, float64) {
	out := make([]float64, len(v)+1)
	for i, n := range v {
		out[i+1] = out[i] + float64(n)
	}
	return out, out[len(out)-1]
}

func admissionsPlot(b *strings.Builder, d *Document, k *KeyTimeline, s *Series, labels bool) {
	t := d.Timeline
	xs := t.ends()
	adm, maxA := cumulative(s.Admitted)
	rej, maxR := cumulative(s.Rejected)
	errs, maxE := cumulative(s.Errors)
	top := math.Max(maxA, math.Max(maxR, maxE))
	var env []float64
	if len(k.Envelope) > 0 {
		env = append([]float64{k.Envelope[0]}, k.Envelope...)
		// Fit the envelope up to where the key's requests end.
		last := 0
		for i := range s.Admitted {
			if s.Admitted[i]+s.Rejected[i]+s.Errors[i] > 0 {
				last = i
			}
		}
		top = math.Max(top, k.Envelope[last])
	}
	p := newPlot(b, t, 0, top*1.08+0.5)
	legend := [][2]string{{"adm", "admitted (cumulative)"}, {"rej", "rejected"}}
	if maxE > 0 {
		legend = append(legend, [2]string{"err", "no decision"})
	}
	if env != nil {
		legend = append(legend, [2]string{"env", "envelope " + envelopeName(k)})
	}
	p.open("admissions of "+k.Key, "Admitted and rejected over time", legend)
	p.shade(d, k.Key, labels)
	p.axes(countLabel)
	if env != nil {
		clip := make([]float64, len(env))
		for i, v := range env {
			clip[i] = math.Min(v, p.y1)
		}
		p.line(xs, clip, "env")
	}
	if maxE > 0 {
		p.line(xs, errs, "err")
	}
	p.line(xs, rej, "rej")
	p.line(xs, adm, "adm")
	p.close()
}

func envelopeName(k *KeyTimeline) string {
	l := k.Limit
	if l.Algorithm.Bucketed() {
		return fmt.Sprintf("K + r·t (K=%d, r=%g/s)", l.Capacity, l.R())
	}
	return fmt.Sprintf("N per window (N=%d, W=%s)", l.Count, l.Window)
}

func levelPlot(b *strings.Builder, d *Document, k *KeyTimeline) {
	t := d.Timeline
	lo, hi := 0.0, float64(k.Limit.Capacity)
	for _, v := range k.Level {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	pad := (hi - lo) * 0.08
	p := newPlot(b, t, lo-pad, hi+pad)
	name := "tokens"
	if !k.Limit.Algorithm.Bucketed() {
		name = "remaining in window"
	}
	p.open("simulated level of "+k.Key, "Bucket level estimate ("+name+", simulated on admitted send times; below 0 = admitted beyond the policy)",
		[][2]string{{"lvl", name}, {"cap", "capacity"}})
	p.shade(d, k.Key, false)
	if lo < 0 {
		y0, y1 := p.Y(0), p.Y(p.y0)
		fmt.Fprintf(p.b, "<rect class=\"debt\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\"/>\n", f1(p.left), f1(y0), f1(p.w-p.left-p.right), f1(y1-y0))
	}
	p.axes(countLabel)
	p.hline(0, "zero")
	p.hline(float64(k.Limit.Capacity), "cap")
	xs := make([]float64, t.Buckets)
	for i := range xs {
		xs[i] = float64(t.Start + int64(i+1)*t.Width)
	}
	p.line(append([]float64{float64(t.Start)}, xs...), append([]float64{float64(k.Limit.Capacity)}, k.Level...), "lvl")
	p.close()
}

func latencyPlot(b *strings.Builder, d *Document, k *KeyTimeline, s *Series) {
	t := d.Timeline
	var xs, p50, p99 []float64
	top := 0.0
	prev := -2
	for i := range s.LatencyP50 {
		if s.Admitted[i]+s.Rejected[i] == 0 {
			continue
		}
		if prev >= 0 && i > prev+1 {
			// No decisions in between: break the line.
			xs, p50, p99 = append(xs, 0), append(p50, math.NaN()), append(p99, math.NaN())
		}
		prev = i
		xs = append(xs, float64(t.Start)+(float64(i)+0.5)*float64(t.Width))
		p50 = append(p50, float64(s.LatencyP50[i]))
		p99 = append(p99, float64(s.LatencyP99[i]))
		top = math.Max(top, float64(s.LatencyP99[i]))
	}
	if len(xs) == 0 {
		return
	}
	p := newPlot(b, t, 0, top*1.1)
	p.open("decision latency of "+k.Key, "Decision latency per bucket (receive − send of admitted and rejected)",
		[][2]string{{"p50", "p50"}, {"p99", "p99"}})
	p.shade(d, k.Key, false)
	p.axes(func(v float64) string { return timeLabel(v, p.y1-p.y0) })
	p.line(xs, p99, "p99")
	p.line(xs, p50, "p50")
	p.close()
}

// niceStep returns 1, 2 or 5 × 10^k ≥ v (v > 0).
func niceStep(v float64) float64 {
	if !(v > 0) {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*e >= v*(1-1e-9) {
			return m * e
		}
	}
	return 10 * e
}

func countLabel(v float64) string {
	if math.Abs(v) < 1e-9 {
		return "0"
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// timeLabel formats ns v in the unit that suits step.
func timeLabel(v, step float64) string {
	unit, div := "s", 1e9
	switch {
	case step < 1e3:
		unit, div = "ns", 1
	case step < 1e6:
		unit, div = "µs", 1e3
	case step < 1e9:
		unit, div = "ms", 1e6
	}
	x := v / div
	if math.Abs(x) < 1e-9 {
		return "0"
	}
	return strconv.FormatFloat(x, 'g', 6, 64) + unit
}
