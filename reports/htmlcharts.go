package reports

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// latencyGap is how many buckets apart two buckets with decisions may be
// for the latency line to join them: four times the median distance
// between such buckets (at least 5), so steady sparse traffic draws a line
// and only silences far longer than its rhythm (idle phases) break it.
func latencyGap(n int, has func(i int) bool) int {
	var gaps []int
	prev := -1
	for i := 0; i < n; i++ {
		if has(i) {
			if prev >= 0 {
				gaps = append(gaps, i-prev)
			}
			prev = i
		}
	}
	if len(gaps) == 0 {
		return 5
	}
	slices.Sort(gaps)
	return max(5, 4*gaps[len(gaps)/2])
}

func cumulative(v []int) ([]float64, float64) {
	out := make([]float64, len(v)+1)
	for i, n := range v {
		out[i+1] = out[i] + float64(n)
	}
	return out, out[len(out)-1]
}

func (t *Timeline) ends() []float64 {
	xs := make([]float64, t.Buckets+1)
	for i := range xs {
		xs[i] = float64(t.Start + int64(i)*t.Width)
	}
	return xs
}

func admissionsPlot(pg *page, d *Document, dm domain, k *KeyTimeline, s *Series, labels bool) {
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
	p := newPlot(pg, dm, 0, top*1.08+0.5)
	legend := []legendItem{{"adm", "admitted"}, {"rej", "rejected"}}
	if maxE > 0 {
		legend = append(legend, legendItem{"err", "no decision"})
	}
	if env != nil {
		legend = append(legend, legendItem{"env", "envelope " + envelopeName(k)})
	}
	p.open("admissions of "+k.Key, "Admitted and rejected requests, cumulative", legend, true)
	p.shade(d, k.Key, labels)
	p.axes("requests (cumulative)", countLabel)
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
	p.series("admitted", "adm", "", t.Start, t.Width, adm[1:])
	p.series("rejected", "rej", "", t.Start, t.Width, rej[1:])
	if maxE > 0 {
		p.series("no decision", "err", "", t.Start, t.Width, errs[1:])
	}
	if env != nil {
		p.series("envelope", "env", "", t.Start, t.Width, k.Envelope)
	}
	p.close()
}

func envelopeName(k *KeyTimeline) string {
	l := k.Limit
	if l.Algorithm.Bucketed() {
		return fmt.Sprintf("K + r·t (K=%d, r=%g/s)", l.Capacity, l.R())
	}
	return fmt.Sprintf("N per window (N=%d, W=%s)", l.Count, l.Window)
}

func levelPlot(pg *page, d *Document, dm domain, k *KeyTimeline) {
	t := d.Timeline
	lo, hi := 0.0, float64(k.Limit.Capacity)
	for _, v := range k.Level {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	pad := (hi - lo) * 0.08
	p := newPlot(pg, dm, lo-pad, hi+pad)
	name := "tokens"
	if !k.Limit.Algorithm.Bucketed() {
		name = "remaining in window"
	}
	title := "Bucket level estimate (simulated on admitted send times; below 0 = admitted beyond the policy)"
	if len(d.Faults) > 0 {
		title = "Bucket level estimate (simulated on admitted send times, but those the failure mode decided; below 0 = beyond the policy)"
	}
	p.open("simulated level of "+k.Key, title,
		[]legendItem{{"lvl", name}, {"cap", "capacity"}}, true)
	p.shade(d, k.Key, false)
	if lo < 0 {
		y0, y1 := p.Y(0), p.Y(p.y0)
		fmt.Fprintf(p.pg, "<rect class=\"debt\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\"/>\n", f1(p.left), f1(y0), f1(p.w-p.left-p.right), f1(y1-y0))
	}
	p.axes(name, countLabel)
	p.hline(0, "zero")
	p.hline(float64(k.Limit.Capacity), "cap")
	xs := make([]float64, t.Buckets)
	for i := range xs {
		xs[i] = float64(t.Start + int64(i+1)*t.Width)
	}
	p.line(append([]float64{float64(t.Start)}, xs...), append([]float64{float64(k.Limit.Capacity)}, k.Level...), "lvl")
	p.series(name, "lvl", "", t.Start, t.Width, k.Level)
	p.close()
}

// joinGaps places the values that are not NaN at their bins' centres
// (bin i is [x0 + i·dx, x0 + (i+1)·dx)), joining bins up to gap apart and
// breaking the line (a NaN point) between two further apart.
func joinGaps(x0, dx int64, vals []float64, gap int) (xs, ys []float64) {
	prev := -1
	for i, v := range vals {
		if math.IsNaN(v) {
			continue
		}
		if prev >= 0 && i-prev > gap {
			xs, ys = append(xs, 0), append(ys, math.NaN())
		}
		prev = i
		xs = append(xs, float64(x0)+(float64(i)+0.5)*float64(dx))
		ys = append(ys, v)
	}
	return xs, ys
}

// maxOf is the largest value of v that is not NaN (0 for none).
func maxOf(v []float64) float64 {
	top := 0.0
	for _, x := range v {
		if !math.IsNaN(x) {
			top = math.Max(top, x)
		}
	}
	return top
}

// perBucket is v as floats, NaN where has is false.
func perBucket[T int | int64](v []T, has func(i int) bool) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = math.NaN()
		if has(i) {
			out[i] = float64(x)
		}
	}
	return out
}

func latencyPlot(pg *page, d *Document, dm domain, k *KeyTimeline, s *Series) {
	t := d.Timeline
	has := func(i int) bool { return s.Admitted[i]+s.Rejected[i] > 0 }
	v50, v99 := perBucket(s.LatencyP50, has), perBucket(s.LatencyP99, has)
	gap := latencyGap(t.Buckets, has)
	xs, p50 := joinGaps(t.Start, t.Width, v50, gap)
	_, p99 := joinGaps(t.Start, t.Width, v99, gap)
	if len(xs) == 0 {
		return
	}
	p := newPlot(pg, dm, 0, maxOf(v99)*1.1)
	u := timeUnit(p.y1 - p.y0)
	p.open("decision latency of "+k.Key, "Decision latency per bucket of "+dur(t.Width)+" (receive − send of admitted and rejected)",
		[]legendItem{{"p50", "p50"}, {"p99", "p99"}}, true)
	p.shade(d, k.Key, false)
	p.axes("decision latency ("+u.name+")", func(v float64) string { return num(v / u.ns) })
	p.line(xs, p99, "p99")
	p.line(xs, p50, "p50")
	p.series("p50", "p50", "ns", t.Start, t.Width, v50)
	p.series("p99", "p99", "ns", t.Start, t.Width, v99)
	p.close()
}

// ratePanel draws requests per second over the run as stacked bars of
// admitted, rejected and errors (their sum is what was sent), with the
// fault windows shaded.
func ratePanel(pg *page, d *Document, dm domain) {
	tr := d.Timeline.Traffic
	if tr == nil || tr.Bins == 0 {
		return
	}
	p := newPlot(pg, dm, 0, tr.peakRate()*1.1+0.5)
	hasErr := false
	for _, n := range tr.All.Errors {
		hasErr = hasErr || n > 0
	}
	legend := []legendItem{{"bar-a", "admitted"}, {"bar-r", "rejected"}}
	if hasErr {
		legend = append(legend, legendItem{"bar-e", "errors"})
	}
	binNote := "per second"
	if tr.Width != 1e9 {
		binNote = "in bins of " + dur(tr.Width) + ", as rates per second"
	}
	p.open("requests per second", "Requests sent per second: admitted + rejected + errors ("+binNote+")", legend, true)
	p.shade(d, "", true)
	p.axes("requests per second", countLabel)
	sent := make([]float64, tr.Bins)
	adm, rej, errs := make([]float64, tr.Bins), make([]float64, tr.Bins), make([]float64, tr.Bins)
	for i := 0; i < tr.Bins; i++ {
		adm[i], rej[i], errs[i] = tr.perSecondOf(tr.All.Admitted[i]), tr.perSecondOf(tr.All.Rejected[i]), tr.perSecondOf(tr.All.Errors[i])
		sent[i] = adm[i] + rej[i] + errs[i]
		x0, x1 := p.X(float64(tr.Start+int64(i)*tr.Width)), p.X(float64(tr.Start+int64(i+1)*tr.Width))
		x0, x1 = math.Max(x0, p.left), math.Min(x1, p.w-p.right)
		if x1-x0 > 3 {
			x1 -= 1 // a hairline between bars that have room for one
		}
		if x1 <= x0 {
			continue
		}
		base := 0.0
		for _, part := range []struct {
			v     float64
			class string
		}{{adm[i], "bar-a"}, {rej[i], "bar-r"}, {errs[i], "bar-e"}} {
			if part.v <= 0 {
				continue
			}
			yTop, yBase := p.Y(base+part.v), p.Y(base)
			fmt.Fprintf(p.pg, "<rect class=\"%s\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\"/>", part.class, f1(x0), f1(yTop), f1(x1-x0), f1(yBase-yTop))
			base += part.v
		}
	}
	p.pg.WriteString("\n")
	p.frame()
	p.series("sent", "sent", "/s", tr.Start, tr.Width, sent)
	p.series("admitted", "bar-a", "/s", tr.Start, tr.Width, adm)
	p.series("rejected", "bar-r", "/s", tr.Start, tr.Width, rej)
	if hasErr {
		p.series("errors", "bar-e", "/s", tr.Start, tr.Width, errs)
	}
	p.close()
}

// Lane geometry: sub-rows of a lane hold requests that overlap in time; a
// lane is laneMinH to laneMaxH tall whatever its number of sub-rows.
const (
	laneRowGap  = 1.0
	laneMaxRows = 12
	laneMinH    = 18.0
	laneMaxH    = 72.0
	lanePad     = 6.0
	laneBinnedH = 34.0
)

// laneRowH is the height of one of rows sub-rows.
func laneRowH(rows int) float64 {
	rows = max(rows, 1)
	h := min(max(float64(rows)*6, laneMinH), laneMaxH)
	return (h+laneRowGap)/float64(rows) - laneRowGap
}

// lanesPlot draws one lane per instance, like Jepsen's timelines: each
// request a bar from send to receive coloured by its outcome (requests
// that overlap stack in sub-rows), or, when there are too many to draw one
// by one, per-bin bars of the instance's admitted, rejected and errors.
func lanesPlot(pg *page, d *Document, dm domain) {
	tr := d.Timeline.Traffic
	if tr == nil || len(tr.Instances) == 0 {
		return
	}
	p := newPlot(pg, dm, 0, 1)
	type lane struct {
		inst     int
		rows     []float64 // each sub-row's last end, px
		assigned []int     // per op of the lane: its sub-row
		ops      []Op
	}
	lanes := make([]*lane, len(tr.Instances))
	idx := map[int]*lane{}
	for i, it := range tr.Instances {
		lanes[i] = &lane{inst: it.Instance}
		idx[it.Instance] = lanes[i]
	}
	const minW = 1.5
	for i := 0; i < tr.Ops.Len(); i++ {
		op := tr.Ops.Op(i)
		ln := idx[op.Instance]
		if ln == nil {
			continue
		}
		x0 := p.X(float64(op.Sent))
		x1 := math.Max(p.X(float64(op.Recv)), x0+minW)
		row := -1
		for r, end := range ln.rows {
			if end <= x0-0.5 {
				row = r
				break
			}
		}
		if row < 0 && len(ln.rows) < laneMaxRows {
			row = len(ln.rows)
			ln.rows = append(ln.rows, 0)
		}
		if row < 0 {
			// Every sub-row is busy: overlap the one that frees first.
			row = 0
			for r, end := range ln.rows {
				if end < ln.rows[row] {
					row = r
				}
			}
		}
		ln.rows[row] = math.Max(ln.rows[row], x1)
		ln.ops = append(ln.ops, op)
		ln.assigned = append(ln.assigned, row)
	}
	heights := make([]float64, len(lanes))
	total := 0.0
	for i, ln := range lanes {
		if tr.Ops != nil {
			rows := max(len(ln.rows), 1)
			heights[i] = float64(rows)*(laneRowH(rows)+laneRowGap) - laneRowGap + 2*lanePad
		} else {
			heights[i] = laneBinnedH + 2*lanePad
		}
		total += heights[i]
	}
	p.h = p.top + total + p.bottom
	what := "each request a bar from send to receive, stacked where requests overlap"
	if tr.Ops == nil {
		what = fmt.Sprintf("%d requests are too many to draw one by one (more than %d): per bin of %s, the bar is the bin's requests against the busiest bin", d.Stats.Requests, MaxLaneOps, dur(tr.Width))
	}
	p.open("requests by instance", "Requests by instance ("+what+")",
		[]legendItem{{"bar-a", "admitted"}, {"bar-r", "rejected"}, {"bar-e", "error"}}, false)
	p.shade(d, "", false)
	p.timeAxis()
	p.yTitle("instance")
	peak := 1
	for _, it := range tr.Instances {
		for b := 0; b < tr.Bins; b++ {
			peak = max(peak, it.Admitted[b]+it.Rejected[b]+it.Errors[b])
		}
	}
	y := p.top
	for i, ln := range lanes {
		it := &tr.Instances[i]
		if i > 0 {
			fmt.Fprintf(p.pg, "<line class=\"lane\" x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\"/>\n", f1(p.left), f1(y), f1(p.w-p.right), f1(y))
		}
		label := fmt.Sprintf("inst %d", ln.inst)
		url := ""
		if ln.inst >= 0 && ln.inst < len(d.Run.Instances) {
			url = d.Run.Instances[ln.inst]
		}
		fmt.Fprintf(p.pg, "<text x=\"%s\" y=\"%s\" text-anchor=\"end\">%s<title>instance %d %s: %d requests</title></text>\n",
			f1(p.left-6), f1(y+heights[i]/2+4), esc(label), ln.inst, esc(url), it.Requests)
		if tr.Ops != nil {
			var b strings.Builder
			rh := laneRowH(len(ln.rows))
			for j, op := range ln.ops {
				x0 := p.X(float64(op.Sent))
				x1 := math.Max(p.X(float64(op.Recv)), x0+minW)
				ry := y + lanePad + float64(ln.assigned[j])*(rh+laneRowGap)
				fmt.Fprintf(&b, "<rect class=\"%s\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\"><title>%s</title></rect>",
					opClass(op.Outcome), f1(x0), f1(ry), f1(x1-x0), f1(rh), esc(opTip(&op)))
			}
			p.pg.WriteString(b.String())
			p.pg.WriteString("\n")
		} else {
			base := y + lanePad + laneBinnedH
			for b := 0; b < tr.Bins; b++ {
				x0, x1 := p.X(float64(tr.Start+int64(b)*tr.Width)), p.X(float64(tr.Start+int64(b+1)*tr.Width))
				x0, x1 = math.Max(x0, p.left), math.Min(x1, p.w-p.right)
				if x1 <= x0 {
					continue
				}
				h := base
				for _, part := range []struct {
					n     int
					class string
				}{{it.Admitted[b], "bar-a"}, {it.Rejected[b], "bar-r"}, {it.Errors[b], "bar-e"}} {
					if part.n == 0 {
						continue
					}
					ph := float64(part.n) / float64(peak) * laneBinnedH
					fmt.Fprintf(p.pg, "<rect class=\"%s\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\"/>", part.class, f1(x0), f1(h-ph), f1(x1-x0), f1(ph))
					h -= ph
				}
			}
			p.pg.WriteString("\n")
		}
		y += heights[i]
	}
	p.close()
}

func opClass(outcome byte) string {
	switch outcome {
	case 'a':
		return "bar-a"
	case 'r':
		return "bar-r"
	}
	return "bar-e"
}

func opTip(op *Op) string {
	st := "no response"
	if op.Status != 0 {
		st = fmt.Sprint(op.Status)
	}
	what := map[byte]string{'a': "admitted", 'r': "rejected"}[op.Outcome]
	if what == "" {
		what = "error"
	}
	return fmt.Sprintf("request %d, key %s: %s (%s), sent %s, answered in %s", op.ID, op.Key, what, st, dur(op.Sent), dur(op.Recv-op.Sent))
}
