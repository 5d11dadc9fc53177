package reports

import (
	"fmt"
	"io"
	"math"

	"github.com/rlverify/rlverify/history"
)

// RenderComparison implements ComparisonRenderer: the matrix, one overlay
// per metric with a colour per implementation, then each implementation's
// checks, evidence and busiest key.
func (HTML) RenderComparison(w io.Writer, c *Comparison) error {
	pg := &page{}
	htmlHead(pg, fmt.Sprintf("rlverify compare: %s — %s", badge(c.Verdict), orDash(c.Plan)))
	fmt.Fprintf(pg, "<header><h1>rlverify compare %s</h1><p>plan <b>%s</b> · %d implementation(s)</p></header>\n",
		verdictBadge(c.Verdict), esc(orDash(c.Plan)), len(c.Columns))
	pg.WriteString("<h2>Matrix</h2>\n<table>\n<tr><th></th>")
	for i, col := range c.Columns {
		fmt.Fprintf(pg, "<th>%s %s</th>", swatch(i), esc(col.Name))
	}
	pg.WriteString("</tr>\n<tr><th>verdict</th>")
	for _, col := range c.Columns {
		fmt.Fprintf(pg, "<td>%s</td>", verdictBadge(col.Metrics.Verdict))
	}
	pg.WriteString("</tr>\n")
	for _, name := range c.Checks {
		fmt.Fprintf(pg, "<tr><th>%s</th>", esc(name))
		for i := range c.Columns {
			if v := c.Columns[i].verdictOf(name); v != "" {
				fmt.Fprintf(pg, "<td>%s</td>", verdictBadge(v))
			} else {
				pg.WriteString("<td class=\"muted\">-</td>")
			}
		}
		pg.WriteString("</tr>\n")
	}
	names, cells := comparisonRows(c)
	for i, n := range names {
		fmt.Fprintf(pg, "<tr><th>%s</th>", esc(n))
		for _, cell := range cells[i] {
			fmt.Fprintf(pg, "<td class=\"num\">%s</td>", esc(cell))
		}
		pg.WriteString("</tr>\n")
	}
	pg.WriteString("</table>\n")
	htmlOverlays(pg, c)
	for i, col := range c.Columns {
		d := col.Document
		if d == nil {
			continue
		}
		fmt.Fprintf(pg, "<section class=\"impl\" style=\"border-left-color:%s\">\n<h2>%s %s</h2>\n<p class=\"muted\">%s</p>\n",
			overlayHex[i%overlayColours], esc(col.Name), verdictBadge(d.Verdict), esc(tally(d.Checks)))
		htmlCheckTable(pg, d)
		htmlNotVerified(pg, d)
		htmlErrors(pg, d)
		htmlEvidence(pg, d)
		htmlMeasured(pg, d)
		if t := d.Timeline; t != nil && len(t.Keys) > 0 {
			k := &t.Keys[0]
			fmt.Fprintf(pg, "<h3>Busiest key <code>%s</code></h3>\n", esc(k.Key))
			admissionsPlot(pg, d, timelineDomain(t), k, &k.All, true)
		}
		pg.WriteString("</section>\n")
	}
	pg.WriteString("<footer class=\"muted\"><p>" + esc(c.Schema) + "</p></footer>\n")
	htmlTail(pg)
	_, err := io.WriteString(w, pg.String())
	return err
}

// overlayHex are the colours of classes c0 … c7 (Okabe–Ito, distinguishable
// with the common colour-vision deficiencies).
var overlayHex = [overlayColours]string{"#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#000000", "#999999"}

func colourClass(i int) string { return fmt.Sprintf("c%d", i%overlayColours) }

func swatch(i int) string {
	return fmt.Sprintf("<span style=\"display:inline-block;width:14px;height:4px;vertical-align:middle;background:%s\"></span>", overlayHex[i%overlayColours])
}

// overlayMetric is one metric drawn for every implementation.
type overlayMetric struct {
	title, yTitle, unit string
	// values are the metric per bin of tr (NaN: no value), placed at the
	// bins' centres.
	values func(tr *Traffic) []float64
	// cumulative metrics are drawn at the bins' ends.
	cumulative bool
}

func rateOf(counts func(tr *Traffic, i int) int) func(tr *Traffic) []float64 {
	return func(tr *Traffic) []float64 {
		out := make([]float64, tr.Bins)
		for i := range out {
			out[i] = tr.perSecondOf(counts(tr, i))
		}
		return out
	}
}

// htmlOverlays draws one plot per metric with a line per implementation,
// on a shared time axis (each run's offsets from its own start: the same
// plan's schedule).
func htmlOverlays(pg *page, c *Comparison) {
	var cols []overlayCol
	dm := domain{math.Inf(1), math.Inf(-1)}
	hasErr := false
	for i, cc := range c.Columns {
		if cc.Document == nil || cc.Document.Timeline == nil || cc.Document.Timeline.Traffic == nil {
			continue
		}
		t := cc.Document.Timeline
		cols = append(cols, overlayCol{i, cc.Name, cc.Document, t.Traffic})
		tdm := timelineDomain(t)
		dm.x0, dm.x1 = math.Min(dm.x0, tdm.x0), math.Max(dm.x1, tdm.x1)
		hasErr = hasErr || cc.Document.Stats.Errors > 0
	}
	if len(cols) == 0 {
		return
	}
	pg.WriteString("<h2>Overlays</h2>\n<p>")
	for _, cl := range cols {
		fmt.Fprintf(pg, "%s <b>%s</b> &nbsp; ", swatch(cl.i), esc(cl.name))
	}
	pg.WriteString("</p>\n<p class=\"muted\">Each implementation's run on one time axis (offsets from its own start: the plan's schedule is the same). Shaded: fault windows. Hover a plot for every implementation's value.</p>\n")
	metrics := []overlayMetric{
		{title: "Admitted per second", yTitle: "admitted per second", unit: "/s", values: rateOf(func(tr *Traffic, i int) int { return tr.All.Admitted[i] })},
		{title: "Rejected per second", yTitle: "rejected per second", unit: "/s", values: rateOf(func(tr *Traffic, i int) int { return tr.All.Rejected[i] })},
	}
	if hasErr {
		metrics = append(metrics, overlayMetric{title: "Errors per second (no decision)", yTitle: "errors per second", unit: "/s", values: rateOf(func(tr *Traffic, i int) int { return tr.All.Errors[i] })})
	}
	metrics = append(metrics,
		overlayMetric{title: "Admitted requests, cumulative (every key)", yTitle: "admitted (cumulative)", cumulative: true, values: func(tr *Traffic) []float64 {
			v, _ := cumulative(tr.All.Admitted)
			return v[1:]
		}},
		overlayMetric{title: "Decision latency p99 per bin", yTitle: "decision latency p99", unit: "ns", values: func(tr *Traffic) []float64 {
			return perBucket(tr.All.LatencyP99, func(i int) bool { return tr.All.Admitted[i]+tr.All.Rejected[i] > 0 })
		}},
	)
	for _, m := range metrics {
		top := 0.0
		vals := make([][]float64, len(cols))
		for j, cl := range cols {
			vals[j] = m.values(cl.tr)
			top = math.Max(top, maxOf(vals[j]))
		}
		p := newPlot(pg, dm, 0, top*1.1+0.5)
		if m.unit == "ns" {
			p.y1 = top*1.1 + 1
		}
		title := m.title
		switch {
		case m.unit == "/s":
			title += binsNote(cols[0].tr)
		case !m.cumulative:
			title += " (bins of " + dur(cols[0].tr.Width) + ")"
		}
		p.open(m.title, title, nil, true)
		shadeFaultsOnce(p, cols)
		p.shadePhases(cols[0].d, true)
		yTitle, yf := m.yTitle, countLabel
		if m.unit == "ns" {
			u := timeUnit(p.y1 - p.y0)
			yTitle += " (" + u.name + ")"
			yf = func(v float64) string { return num(v / u.ns) }
		}
		p.axes(yTitle, yf)
		for j, cl := range cols {
			tr := cl.tr
			xs, ys := joinGaps(tr.Start, tr.Width, vals[j], latencyGap(tr.Bins, func(i int) bool { return !math.IsNaN(vals[j][i]) }))
			if m.cumulative {
				// A running total belongs to the bins' ends, from 0 at the start.
				xs, ys = []float64{float64(tr.Start)}, []float64{0}
				for i, v := range vals[j] {
					xs, ys = append(xs, float64(tr.Start+int64(i+1)*tr.Width)), append(ys, v)
				}
			}
			p.line(xs, ys, "ov "+colourClass(cl.i))
			p.series(cl.name, colourClass(cl.i), m.unit, tr.Start, tr.Width, vals[j])
		}
		p.close()
	}
	busiestKeyOverlay(pg, dm, cols)
}

// overlayCol is one implementation in the overlays: i is its column (and
// colour).
type overlayCol struct {
	i    int
	name string
	d    *Document
	tr   *Traffic
}

// shadeFaultsOnce shades the fault windows of every implementation, each
// window once: the same plan injects the same faults at nearly the same
// offsets, and shading them all would darken the band.
func shadeFaultsOnce(p *plot, cols []overlayCol) {
	near := (p.x1 - p.x0) / 100
	var drawn []history.Fault
	for _, cl := range cols {
		for _, f := range cl.d.Faults {
			dup := false
			for _, g := range drawn {
				dup = dup || (f.Kind == g.Kind && math.Abs(float64(f.Start-g.Start)) < near && math.Abs(float64(f.End-g.End)) < near)
			}
			if !dup {
				drawn = append(drawn, f)
			}
		}
	}
	p.shadeFaults(drawn)
}

// binsNote says how wide the rate bins are.
func binsNote(tr *Traffic) string {
	if tr.Width == 1e9 {
		return " (per second)"
	}
	return " (bins of " + dur(tr.Width) + ", as rates per second)"
}

// busiestKeyOverlay draws each implementation's busiest key, cumulative
// admitted, against the first one's envelope.
func busiestKeyOverlay(pg *page, dm domain, cols []overlayCol) {
	first := cols[0].d
	var env *KeyTimeline
	if t := first.Timeline; len(t.Keys) > 0 && len(t.Keys[0].Envelope) > 0 {
		env = &t.Keys[0]
	}
	top := 0.0
	for _, cl := range cols {
		if t := cl.d.Timeline; len(t.Keys) > 0 {
			_, n := cumulative(t.Keys[0].All.Admitted)
			top = math.Max(top, n)
		}
	}
	if top == 0 {
		return
	}
	var legend []legendItem
	if env != nil {
		top = math.Max(top, math.Min(env.Envelope[len(env.Envelope)-1], top*1.5))
		legend = []legendItem{{"env", "envelope " + envelopeName(env)}}
	}
	p := newPlot(pg, dm, 0, top*1.08+0.5)
	p.open("busiest key, admitted", "Busiest key: admitted requests, cumulative, against the policy envelope", legend, true)
	shadeFaultsOnce(p, cols)
	p.shadePhases(first, false)
	p.axes("admitted (cumulative)", countLabel)
	if env != nil {
		t := first.Timeline
		clip := make([]float64, len(env.Envelope)+1)
		for i, v := range append([]float64{env.Envelope[0]}, env.Envelope...) {
			clip[i] = math.Min(v, p.y1)
		}
		p.line(t.ends(), clip, "env ov")
	}
	for _, cl := range cols {
		t := cl.d.Timeline
		if len(t.Keys) == 0 {
			continue
		}
		adm, _ := cumulative(t.Keys[0].All.Admitted)
		p.line(t.ends(), adm, "ov "+colourClass(cl.i))
		p.series(cl.name, colourClass(cl.i), "", t.Start, t.Width, adm[1:])
	}
	if env != nil {
		p.series("envelope", "env", "", first.Timeline.Start, first.Timeline.Width, env.Envelope)
	}
	p.close()
}
