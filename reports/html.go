package reports

import (
	"fmt"
	"html"
	"io"
	"strings"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/internal/human"
)

// HTML renders one self-contained page: no network, no external script,
// font or stylesheet; one small inline script shows values under the
// pointer, and the page reads fully without it. It opens with the verdict,
// the evidence gate and the run's counts, then the checks, what the run
// did not verify, errors by status, the evidence, the measured parameters
// beside the declared ones, and inline SVG plots: requests per second with
// fault windows shaded, one lane per instance with every request coloured
// by outcome (Jepsen's timelines), and for every timeline key (and each of
// its instances) cumulative admitted and rejected requests against the
// policy envelope, the simulated bucket level and decision latency, with
// the intervals of violation evidence shaded. The key/instance selector
// uses CSS :target, so the first key shows without any link followed.
type HTML struct{}

// Render implements Renderer.
func (HTML) Render(w io.Writer, d *Document) error {
	pg := &page{}
	title := fmt.Sprintf("rlverify: %s — %s against %s", badge(d.Verdict), orDash(d.Run.Plan), suiteName(d))
	htmlHead(pg, title)
	fmt.Fprintf(pg, "<header><h1>rlverify %s</h1><p>plan <b>%s</b> against <b>%s</b> · %s</p><p class=\"headline\">%s</p></header>\n",
		verdictBadge(d.Verdict), esc(orDash(d.Run.Plan)), esc(suiteName(d)), esc(tally(d.Checks)), esc(Headline(d)))
	htmlNotes(pg, d)
	htmlCards(pg, d)
	htmlCheckTable(pg, d)
	htmlThresholds(&pg.Builder, d)
	htmlNotVerified(pg, d)
	htmlErrors(pg, d)
	htmlEvidence(pg, d)
	htmlMeasured(pg, d)
	htmlTraffic(pg, d)
	htmlTimeline(pg, d)
	htmlKeys(pg, d)
	htmlRun(pg, d)
	htmlPhases(pg, d)
	if figs := figureLines(d.Checks); len(figs) > 0 {
		pg.WriteString("<h2>Figures</h2>\n<ul class=\"mono\">\n")
		for _, l := range figs {
			fmt.Fprintf(pg, "<li>%s</li>\n", esc(l))
		}
		pg.WriteString("</ul>\n")
	}
	fmt.Fprintf(pg, "<footer class=\"muted\"><p>%s · run %s · started %s</p></footer>\n",
		esc(d.Schema), esc(orDash(d.Run.ID)), esc(d.Run.Start.UTC().Format("2006-01-02 15:04:05 MST")))
	htmlTail(pg)
	_, err := io.WriteString(w, pg.String())
	return err
}

func htmlHead(pg *page, title string) {
	fmt.Fprintf(pg, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>%s</title>\n<style>%s</style>\n</head>\n<body>\n", esc(title), htmlStyle)
}

// htmlTail closes the page with the hover data and the script that reads it.
func htmlTail(pg *page) {
	if len(pg.hover) > 0 {
		fmt.Fprintf(pg, "<script type=\"application/json\" id=\"rlv-hover\">%s</script>\n<script>%s</script>\n", pg.hoverData(), htmlScript)
	}
	pg.WriteString("</body>\n</html>\n")
}

func esc(s string) string { return html.EscapeString(s) }

func verdictBadge(v checks.Verdict) string {
	return fmt.Sprintf("<span class=\"badge %s\">%s</span>", esc(string(v)), esc(badge(v)))
}

func htmlNotes(pg *page, d *Document) {
	for _, w := range d.Warnings {
		fmt.Fprintf(pg, "<p class=\"note\"><b>Warning:</b> %s</p>\n", esc(w))
	}
	if d.Interrupted {
		fmt.Fprintf(pg, "<p class=\"note\"><b>Interrupted:</b> %s (verdicts judge what was recorded)</p>\n", esc(d.Reason))
	}
	if d.Truncated {
		pg.WriteString("<p class=\"note\">The history's last line was cut off and skipped.</p>\n")
	}
}

// htmlCards is the run at a glance: the evidence gate, the counts, the
// decision latency and the length.
func htmlCards(pg *page, d *Document) {
	pg.WriteString("<div class=\"cards\">\n")
	card := func(class, key, valClass, val string) {
		fmt.Fprintf(pg, "<div class=\"%s\"><div class=\"k\">%s</div><div class=\"%s\">%s</div></div>\n",
			strings.TrimSpace("card "+class), esc(key), strings.TrimSpace("v "+valClass), val)
	}
	if g := d.Check(checks.EvidenceCheck); g != nil {
		card("gate", "evidence gate", "", verdictBadge(g.Verdict)+" "+esc(g.Summary))
	}
	card("", "requests sent", "", esc(human.Count(d.Stats.Requests)))
	card("", "admitted", "adm", esc(human.Count(d.Stats.Admitted)))
	card("", "rejected", "rej", esc(human.Count(d.Stats.Rejected)))
	card("", "errors", "err", esc(human.Count(d.Stats.Errors)))
	if l := d.Latency; l != nil {
		card("", "decision latency p50 / p99", "", esc(dur(l.P50)+" / "+dur(l.P99)))
	}
	if d.Elapsed > 0 {
		card("", "elapsed", "", esc(dur(d.Elapsed)))
	}
	pg.WriteString("</div>\n")
}

func htmlCheckTable(pg *page, d *Document) {
	pg.WriteString("<h2>Checks</h2>\n<table>\n<tr><th>Check</th><th>Verdict</th><th>Summary</th></tr>\n")
	for _, r := range d.Checks {
		if r.Name == checks.EvidenceCheck {
			fmt.Fprintf(pg, "<tr class=\"gate\"><td>%s<span class=\"what\">gate: no verdict without evidence</span></td><td>%s</td><td>%s</td></tr>\n", esc(r.Name), verdictBadge(r.Verdict), esc(r.Summary))
			continue
		}
		fmt.Fprintf(pg, "<tr><td>%s</td><td>%s</td><td>%s</td></tr>\n", esc(r.Name), verdictBadge(r.Verdict), esc(r.Summary))
	}
	pg.WriteString("</table>\n")
}

func htmlNotVerified(pg *page, d *Document) {
	if len(d.NotVerified) == 0 {
		return
	}
	pg.WriteString("<h3>Not verified by this run</h3>\n<ul class=\"unverified\">\n")
	for _, u := range d.NotVerified {
		fmt.Fprintf(pg, "<li><b>%s</b>: %s</li>\n", esc(u.Check), esc(u.Reason))
	}
	pg.WriteString("</ul>\n")
}

func htmlErrors(pg *page, d *Document) {
	if len(d.Errors) == 0 {
		return
	}
	pg.WriteString("<h3>Errors by status</h3>\n<table>\n<tr><th>Status</th><th>Requests</th><th>Sent to / error</th><th>The target answered</th></tr>\n")
	for _, e := range d.Errors {
		what, detail := fmt.Sprint(e.Status), e.URL
		if e.Status == 0 {
			what, detail = "no response", e.Err
		}
		fmt.Fprintf(pg, "<tr><td>%s</td><td class=\"num\">%s</td><td class=\"mono\">%s</td><td class=\"mono\">%s</td></tr>\n", esc(what), human.Count(e.Count), esc(orDash(detail)), esc(orDash(e.Body)))
	}
	pg.WriteString("</table>\n")
}

func htmlEvidence(pg *page, d *Document) {
	for _, r := range d.Checks {
		if (r.Verdict != checks.Fail && r.Verdict != checks.Unknown) || len(r.Evidence) == 0 {
			continue
		}
		fmt.Fprintf(pg, "<h3>Evidence: %s %s</h3>\n<ul>\n", esc(r.Name), verdictBadge(r.Verdict))
		for _, ev := range r.Evidence {
			fmt.Fprintf(pg, "<li>%s", esc(ev.Message))
			if ls := evidenceLines(ev); len(ls) > 0 {
				pg.WriteString("<ul class=\"mono\">")
				for _, l := range ls {
					fmt.Fprintf(pg, "<li>%s</li>", esc(l))
				}
				pg.WriteString("</ul>")
			}
			pg.WriteString("</li>\n")
		}
		pg.WriteString("</ul>\n")
	}
}

func htmlMeasured(pg *page, d *Document) {
	ms := measured(d.Checks)
	if len(ms) == 0 {
		return
	}
	pg.WriteString("<h2>Measured against declared</h2>\n<table>\n<tr><th>Parameter</th><th>Declared</th><th>Measured</th><th>Verdict</th></tr>\n")
	for _, m := range ms {
		fmt.Fprintf(pg, "<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n", esc(m.Name), esc(m.Declared), esc(m.Measured), verdictBadge(m.Verdict))
	}
	pg.WriteString("</table>\n")
}

func htmlKeys(pg *page, d *Document) {
	if len(d.Keys) == 0 {
		return
	}
	pg.WriteString("<h2>Keys</h2>\n<table>\n<tr>")
	for _, h := range keyHead {
		fmt.Fprintf(pg, "<th>%s</th>", esc(h))
	}
	pg.WriteString("</tr>\n")
	for _, r := range keyRows(d.Keys) {
		fmt.Fprintf(pg, "<tr><td><code>%s</code></td><td>%s</td><td class=\"num\">%s</td><td class=\"num\">%s</td><td class=\"num\">%s</td><td class=\"num\">%s</td><td>%s</td></tr>\n",
			esc(r[0]), esc(r[1]), esc(r[2]), esc(r[3]), esc(r[4]), esc(r[5]), esc(r[6]))
	}
	pg.WriteString("</table>\n")
}

func htmlRun(pg *page, d *Document) {
	pg.WriteString("<h2>Run</h2>\n<table>\n")
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(pg, "<tr><th>%s</th><td>%s</td></tr>\n", esc(k), esc(v))
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
	row("requests", statsLine(d.Stats))
	if l := d.Latency; l != nil {
		row("decision latency", fmt.Sprintf("p50 %s, p90 %s, p99 %s, max %s", dur(l.P50), dur(l.P90), dur(l.P99), dur(l.Max)))
	}
	if d.Elapsed > 0 {
		row("elapsed", dur(d.Elapsed))
	}
	if d.Footprint != nil && d.Footprint.Samples > 2 {
		row("footprint", d.Footprint.Describe())
	}
	for _, n := range d.Run.Notes {
		row("note", n)
	}
	pg.WriteString("</table>\n")
}

func htmlPhases(pg *page, d *Document) {
	if len(d.Phases) > 0 {
		pg.WriteString("<h2>Phases</h2>\n<table>\n<tr>")
		for _, h := range phaseHead {
			fmt.Fprintf(pg, "<th>%s</th>", esc(h))
		}
		pg.WriteString("</tr>\n")
		for _, ph := range d.Phases {
			pg.WriteString("<tr>")
			for i, c := range phaseRowOf(ph).cells() {
				if i == 2 {
					fmt.Fprintf(pg, "<td class=\"num\">%s</td>", esc(c))
				} else {
					fmt.Fprintf(pg, "<td>%s</td>", esc(c))
				}
			}
			pg.WriteString("</tr>\n")
		}
		pg.WriteString("</table>\n")
	}
	if len(d.Faults) > 0 {
		pg.WriteString("<h2>Faults</h2>\n<ul>\n")
		for _, f := range d.Faults {
			fmt.Fprintf(pg, "<li>%s %s %s from %s to %s</li>\n", esc(f.Kind), esc(f.Target), esc(f.Param), dur(f.Start), dur(f.End))
		}
		pg.WriteString("</ul>\n")
	}
}

// htmlTraffic draws the whole run: requests per second and the instance
// lanes.
func htmlTraffic(pg *page, d *Document) {
	t := d.Timeline
	if t == nil || t.Traffic == nil {
		return
	}
	pg.WriteString("<h2>Traffic</h2>\n<p class=\"muted\">Every request of the run, by send time. Shaded: <span style=\"color:#9a6700\">fault windows</span>; dotted lines: phase starts. Hover a plot for its values.</p>\n")
	dm := timelineDomain(t)
	ratePanel(pg, d, dm)
	lanesPlot(pg, d, dm)
}

func viewID(k, inst int) string {
	if inst < 0 {
		return fmt.Sprintf("v%d", k)
	}
	return fmt.Sprintf("v%d-i%d", k, inst)
}

func htmlTimeline(pg *page, d *Document) {
	t := d.Timeline
	if t == nil || len(t.Keys) == 0 {
		return
	}
	fmt.Fprintf(pg, "<h2>Timeline by key</h2>\n<p class=\"muted\">Buckets of %s, for drawing only (the checks judge every request). Shaded: <span style=\"color:#9a6700\">fault windows</span>, <span style=\"color:#cf222e\">intervals of violation evidence</span>.", dur(t.Width))
	if t.OmittedKeys > 0 {
		fmt.Fprintf(pg, " %d less busy key(s) not drawn.", t.OmittedKeys)
	}
	pg.WriteString("</p>\n<nav class=\"keys\">\n")
	for ki := range t.Keys {
		k := &t.Keys[ki]
		fmt.Fprintf(pg, "<span><a href=\"#%s\"><code>%s</code></a> <span class=\"muted\">%d req</span>", viewID(ki, -1), esc(k.Key), k.Requests)
		for _, s := range k.Instances {
			fmt.Fprintf(pg, " <span class=\"inst\"><a href=\"#%s\">inst %d</a></span>", viewID(ki, s.Instance), s.Instance)
		}
		pg.WriteString("</span>\n")
	}
	pg.WriteString("</nav>\n<div class=\"views\">\n")
	// The first key's view goes last: it shows unless another view is the
	// :target (a later sibling can be hidden by an earlier :target).
	for ki := len(t.Keys) - 1; ki >= 0; ki-- {
		k := &t.Keys[ki]
		for _, s := range k.Instances {
			keyView(pg, d, ki, k, &s, "view")
		}
		if ki > 0 {
			keyView(pg, d, ki, k, &k.All, "view")
		}
	}
	keyView(pg, d, 0, &t.Keys[0], &t.Keys[0].All, "view dflt")
	pg.WriteString("</div>\n")
}

func keyView(pg *page, d *Document, ki int, k *KeyTimeline, s *Series, class string) {
	id := viewID(ki, s.Instance)
	fmt.Fprintf(pg, "<section class=\"%s\" id=\"%s\">\n<h3><code>%s</code>", class, id, esc(k.Key))
	if s.Instance >= 0 {
		fmt.Fprintf(pg, " on instance %d", s.Instance)
		if s.Instance < len(d.Run.Instances) {
			fmt.Fprintf(pg, " <span class=\"muted\">(%s)</span>", esc(d.Run.Instances[s.Instance]))
		}
	}
	fmt.Fprintf(pg, " <span class=\"muted\">%d request(s)", s.Requests)
	if k.Tier != "" {
		fmt.Fprintf(pg, ", tier %s", esc(k.Tier))
	}
	if k.Limit != nil {
		fmt.Fprintf(pg, ", limit %s", esc(k.Limit.Describe()))
	}
	pg.WriteString("</span></h3>\n")
	if k.OmittedInstances > 0 && s.Instance < 0 {
		fmt.Fprintf(pg, "<p class=\"muted\">%d less busy instance(s) have no view of their own.</p>\n", k.OmittedInstances)
	}
	dm := timelineDomain(d.Timeline)
	admissionsPlot(pg, d, dm, k, s, s.Instance < 0)
	if s.Instance < 0 && len(k.Level) > 0 {
		levelPlot(pg, d, dm, k)
	}
	latencyPlot(pg, d, dm, k, s)
	pg.WriteString("</section>\n")
}
