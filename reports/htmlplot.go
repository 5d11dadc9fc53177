package reports

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/history"
)

// page is an HTML page being written, with the data its hover script reads:
// one entry per plot that shows values under the pointer.
type page struct {
	strings.Builder
	hover []hoverPlot
}

// hoverPlot is what the script needs to show a plot's values at the
// pointer: the plot area (viewBox units), its time domain (ns) and series.
type hoverPlot struct {
	Left   float64       `json:"l"`
	Right  float64       `json:"r"`
	T0     float64       `json:"t0"`
	T1     float64       `json:"t1"`
	Series []hoverSeries `json:"s"`
}

// hoverSeries is one series' values on its own grid of equal bins: value
// i belongs to [X0 + i·DX, X0 + (i+1)·DX).
type hoverSeries struct {
	Name string `json:"n"`
	// Class is the series' CSS class (its colour swatch).
	Class string `json:"c"`
	// Unit formats the values: "" a count, "/s" a rate, "ns" a duration.
	Unit string    `json:"u"`
	X0   int64     `json:"x0"`
	DX   int64     `json:"dx"`
	V    hoverVals `json:"v"`
}

// hoverVals are written with at most 4 decimals; NaN (no value) is null.
type hoverVals []float64

// MarshalJSON implements json.Marshaler.
func (v hoverVals) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 4*len(v)+2)
	b = append(b, '[')
	for i, x := range v {
		if i > 0 {
			b = append(b, ',')
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			b = append(b, "null"...)
			continue
		}
		b = strconv.AppendFloat(b, math.Round(x*1e4)/1e4, 'f', -1, 64)
	}
	return append(b, ']'), nil
}

// hoverData is the page's hover entries as JSON for a <script
// type="application/json"> element (json escapes <, > and &, so the text
// cannot close the element).
func (pg *page) hoverData() string {
	b, err := json.Marshal(pg.hover)
	if err != nil {
		// Only NaN could fail, and hoverVals writes it as null.
		return "[]"
	}
	return string(b)
}

// plot draws one SVG chart with a time x-axis.
type plot struct {
	pg               *page
	w, h             float64
	left, right, top float64
	bottom           float64
	x0, x1, y0, y1   float64
	// hover is this plot's entry in pg.hover; -1 when it shows no values.
	hover int
}

const (
	plotW = 1160
	plotH = 250
)

// domain is the time range (ns) every plot of a page shares, so they align.
type domain struct{ x0, x1 float64 }

// timelineDomain spans t's buckets and its traffic's bins.
func timelineDomain(t *Timeline) domain {
	dm := domain{float64(t.Start), float64(t.End())}
	if tr := t.Traffic; tr != nil {
		dm.x0, dm.x1 = math.Min(dm.x0, float64(tr.Start)), math.Max(dm.x1, float64(tr.End()))
	}
	return dm
}

func newPlot(pg *page, dm domain, y0, y1 float64) *plot {
	if y1 <= y0 {
		y1 = y0 + 1
	}
	if dm.x1 <= dm.x0 {
		dm.x1 = dm.x0 + 1
	}
	return &plot{pg: pg, w: plotW, h: plotH, left: 78, right: 16, top: 30, bottom: 44,
		x0: dm.x0, x1: dm.x1, y0: y0, y1: y1, hover: -1}
}

func (p *plot) X(ns float64) float64 {
	return p.left + (ns-p.x0)/(p.x1-p.x0)*(p.w-p.left-p.right)
}

func (p *plot) Y(v float64) float64 {
	return p.h - p.bottom - (v-p.y0)/(p.y1-p.y0)*(p.h-p.top-p.bottom)
}

func f1(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) }

// legendItem is one entry of a plot's legend: the CSS class of its swatch
// and its text.
type legendItem struct{ class, text string }

// open starts the SVG: title and legend on the top line. With hover the
// plot gets an entry in the page's hover data (filled by series).
func (p *plot) open(label, title string, legend []legendItem, hover bool) {
	hv := ""
	if hover {
		p.hover = len(p.pg.hover)
		p.pg.hover = append(p.pg.hover, hoverPlot{Left: p.left, Right: p.w - p.right, T0: p.x0, T1: p.x1})
		hv = fmt.Sprintf(" data-h=\"%d\"", p.hover)
	}
	fmt.Fprintf(p.pg, "<svg class=\"plot\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"%s\"%s>\n", int(p.w), int(p.h), esc(label), hv)
	fmt.Fprintf(p.pg, "<text class=\"title\" x=\"%s\" y=\"16\">%s</text>\n", f1(p.left), esc(title))
	x := p.w - p.right
	for i := len(legend) - 1; i >= 0; i-- {
		x -= float64(len([]rune(legend[i].text)))*6.2 + 34
		fmt.Fprintf(p.pg, "<line class=\"ln %s\" x1=\"%s\" y1=\"12\" x2=\"%s\" y2=\"12\"/><text x=\"%s\" y=\"16\">%s</text>\n",
			legend[i].class, f1(x), f1(x+20), f1(x+24), esc(legend[i].text))
	}
}

// series adds a series to the plot's hover data.
func (p *plot) series(name, class, unit string, x0, dx int64, v []float64) {
	if p.hover < 0 || dx <= 0 {
		return
	}
	hp := &p.pg.hover[p.hover]
	hp.Series = append(hp.Series, hoverSeries{Name: name, Class: class, Unit: unit, X0: x0, DX: dx, V: v})
}

func (p *plot) close() {
	if p.hover >= 0 {
		fmt.Fprintf(p.pg, "<line class=\"cross\" x1=\"0\" y1=\"%s\" x2=\"0\" y2=\"%s\" style=\"display:none\"/>\n", f1(p.top), f1(p.h-p.bottom))
	}
	p.pg.WriteString("</svg>\n")
}

// unit is how an axis shows nanoseconds: the unit's name and its size.
type unit struct {
	name string
	ns   float64
}

// timeUnit picks the unit for an axis spanning span ns.
func timeUnit(span float64) unit {
	switch {
	case span >= 1.5e9:
		return unit{"s", 1e9}
	case span >= 1.5e6:
		return unit{"ms", 1e6}
	case span >= 1.5e3:
		return unit{"µs", 1e3}
	}
	return unit{"ns", 1}
}

// num formats an axis tick.
func num(v float64) string {
	if math.Abs(v) < 1e-9 {
		return "0"
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// axes draws the grid, the ticks, the axes and their titles: yTitle on the
// y axis (its unit in it), time since the run start on the x axis. yf
// formats a y tick.
func (p *plot) axes(yTitle string, yf func(float64) string) {
	ys := niceStep((p.y1 - p.y0) / 5)
	for v := math.Ceil(p.y0/ys) * ys; v <= p.y1+ys*1e-9; v += ys {
		y := p.Y(v)
		fmt.Fprintf(p.pg, "<line class=\"grid\" x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\"/><text x=\"%s\" y=\"%s\" text-anchor=\"end\">%s</text>\n",
			f1(p.left), f1(y), f1(p.w-p.right), f1(y), f1(p.left-6), f1(y+4), esc(yf(v)))
	}
	p.timeAxis()
	p.yTitle(yTitle)
}

// timeAxis draws the time grid and ticks, both axis lines and the x
// axis's title: time since the run start, in the unit of the ticks.
func (p *plot) timeAxis() {
	u := timeUnit(p.x1 - p.x0)
	xs := niceStep((p.x1 - p.x0) / 10)
	for v := math.Ceil(p.x0/xs) * xs; v <= p.x1+xs*1e-9; v += xs {
		x := p.X(v)
		fmt.Fprintf(p.pg, "<line class=\"grid\" x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\"/><text x=\"%s\" y=\"%s\" text-anchor=\"middle\">%s</text>\n",
			f1(x), f1(p.top), f1(x), f1(p.h-p.bottom), f1(x), f1(p.h-p.bottom+15), esc(num(v/u.ns)))
	}
	p.frame()
	fmt.Fprintf(p.pg, "<text class=\"axt\" x=\"%s\" y=\"%s\" text-anchor=\"middle\">time since run start (%s)</text>\n",
		f1((p.left+p.w-p.right)/2), f1(p.h-6), u.name)
}

// yTitle writes the y axis's title, turned along the axis.
func (p *plot) yTitle(title string) {
	fmt.Fprintf(p.pg, "<text class=\"axt\" transform=\"translate(16 %s) rotate(-90)\" text-anchor=\"middle\">%s</text>\n", f1((p.top+p.h-p.bottom)/2), esc(title))
}

// frame draws the x and y axis lines.
func (p *plot) frame() {
	fmt.Fprintf(p.pg, "<line class=\"axis\" x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\"/>\n", f1(p.left), f1(p.h-p.bottom), f1(p.w-p.right), f1(p.h-p.bottom))
	fmt.Fprintf(p.pg, "<line class=\"axis\" x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\"/>\n", f1(p.left), f1(p.top), f1(p.left), f1(p.h-p.bottom))
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
	fmt.Fprintf(p.pg, "<rect class=\"%s\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\"><title>%s</title></rect>\n",
		class, f1(x0), f1(p.top), f1(x1-x0), f1(p.h-p.top-p.bottom), esc(tip))
}

// hline draws a horizontal line at value v.
func (p *plot) hline(v float64, class string) {
	y := p.Y(v)
	fmt.Fprintf(p.pg, "<line class=\"ln %s\" x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\"/>\n", class, f1(p.left), f1(y), f1(p.w-p.right), f1(y))
}

// line draws a polyline through (xs[i], ys[i]), dropping points that do not
// change the drawing (repeated pixels, the middle of flat runs). A NaN y
// breaks the line; a point alone between breaks is drawn as a dot.
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
	fmt.Fprintf(p.pg, "<path class=\"ln %s\" d=\"%s\"/>\n", class, s.String())
}

// shadeFaults shades fault windows.
func (p *plot) shadeFaults(faults []history.Fault) {
	for _, f := range faults {
		end := f.End
		if end == 0 {
			end = int64(p.x1)
		}
		p.band(float64(f.Start), float64(end), "fault", fmt.Sprintf("fault %s %s %s … %s", f.Kind, f.Param, dur(f.Start), dur(f.End)))
	}
}

// shadePhases marks the phase starts of d, labelled where there is room.
func (p *plot) shadePhases(d *Document, labels bool) {
	lastLabel := math.Inf(-1)
	for _, ph := range d.Phases {
		x := p.X(float64(ph.Start))
		if x < p.left || x > p.w-p.right {
			continue
		}
		fmt.Fprintf(p.pg, "<line class=\"phase\" x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\"/>", f1(x), f1(p.top), f1(x), f1(p.h-p.bottom))
		// A label only where it does not run into the previous one.
		if labels && x-lastLabel > 90 && x < p.w-p.right-40 {
			lastLabel = x
			fmt.Fprintf(p.pg, "<text class=\"phl\" x=\"%s\" y=\"%s\">%s</text>", f1(x+3), f1(p.top+11), esc(ph.Name))
		}
		p.pg.WriteString("\n")
	}
}

// shade draws the fault windows, the phase starts and the violation
// intervals of key ("" for none).
func (p *plot) shade(d *Document, key string, labels bool) {
	p.shadeFaults(d.Faults)
	p.shadePhases(d, labels)
	if key == "" {
		return
	}
	// Overlapping intervals (one violation cited by several checks, or a
	// whole-run interval beside short ones) are shaded as their union, so
	// they do not darken the plot; a strip along the top marks each part,
	// and its tooltip lists every piece of evidence in it.
	type span struct {
		from, to int64
		tips     []string
	}
	var spans []span
	for _, r := range d.Checks {
		if r.Verdict != checks.Fail {
			continue
		}
		for _, ev := range r.Evidence {
			if ev.Key == key && ev.To >= ev.From {
				spans = append(spans, span{ev.From, ev.To, []string{r.Name + ": " + ev.Message}})
			}
		}
	}
	sort.SliceStable(spans, func(i, j int) bool { return spans[i].from < spans[j].from })
	var union []span
	for _, sp := range spans {
		if n := len(union); n > 0 && sp.from <= union[n-1].to {
			u := &union[n-1]
			u.to = max(u.to, sp.to)
			u.tips = append(u.tips, sp.tips...)
			continue
		}
		union = append(union, sp)
	}
	for _, sp := range union {
		tip := strings.Join(sp.tips, "\n")
		p.band(float64(sp.from), float64(sp.to), "viol", tip)
		from, to := math.Max(float64(sp.from), p.x0), math.Min(float64(sp.to), p.x1)
		x0, x1 := p.X(from), math.Max(p.X(to), p.X(from)+2)
		fmt.Fprintf(p.pg, "<rect class=\"violbar\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"4\"><title>%s</title></rect>\n", f1(x0), f1(p.top), f1(x1-x0), esc(tip))
	}
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

// countLabel formats a count tick.
func countLabel(v float64) string { return num(v) }
