package reports

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

const chromiumPath = "/usr/bin/chromium"

// chromium runs headless Chromium on page with args, returning stdout and
// stderr. Every network feature it would use on its own is switched off.
func chromium(t *testing.T, page string, args ...string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	base := []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--hide-scrollbars", "--user-data-dir=" + t.TempDir(), "--enable-logging=stderr", "--v=0",
	}
	cmd := exec.CommandContext(ctx, chromiumPath, append(append(base, args...), "file://"+page)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	err := cmd.Run()
	require.NoError(t, err, "chromium %s: %s", strings.Join(args, " "), stderr.String())
	return stdout.String(), stderr.String()
}

func needChromium(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing and CI=true: install the Debian package chromium (apt-get install -y chromium)", chromiumPath)
		}
		t.Skipf("%s not found: apt-get install -y chromium to run this test", chromiumPath)
	}
	if testing.Short() {
		t.Skip("-short: skipping headless Chromium")
	}
}

// pageDoc judges testdata/pages/NAME.jsonl (a history recorded by rlverify
// attack) with the live checks, against the policy it declares.
func pageDoc(t testing.TB, name string) *Document {
	t.Helper()
	h, err := history.ReadFile(filepath.Join("testdata", "pages", name+".jsonl"))
	require.NoError(t, err)
	var p policy.Policy
	require.NoError(t, json.Unmarshal(h.Run.Declared, &p))
	require.NoError(t, p.Validate())
	return Build(h, &p, checks.Judge(h, &p, checks.Options{}))
}

// pageComparison compares the three failure modes of the store-outage
// fixtures, as rlverify compare --limiter token-bucket@fail-open … does.
func pageComparison(t testing.TB) *Comparison {
	var cols []Column
	for _, mode := range []string{"fail-open", "fail-closed", "fail-local"} {
		cols = append(cols, Column{Name: "token-bucket@" + mode, Document: pageDoc(t, "compare-"+mode)})
	}
	return Compare("store-outage", cols)
}

// colour is an RGB colour the screenshot must show, and what it stands for.
type colour struct {
	r, g, b uint32
	what    string
}

var (
	cAdmitted = colour{0x2d, 0xa4, 0x4e, "admitted bars"}
	cRejected = colour{0xe5, 0x53, 0x4b, "rejected bars"}
	cEnvelope = colour{0x09, 0x69, 0xda, "envelope, p50"}
	cFail     = colour{0xcf, 0x22, 0x2e, "FAIL badge, violation strip"}
	cPass     = colour{0x1a, 0x7f, 0x37, "PASS badge, admitted line"}
	cFault    = colour{0xf4, 0xea, 0xcd, "fault window over white"}
)

// TestHTMLInChromium renders a passing run, a failing one, a run with a
// fault window, a comparison and the golden fixture in headless Chromium.
// Each screenshot must show a real page (not blank, not one colour, with
// the colours of its panels), the DOM must hold the panels and plots, the
// hover script must show the value under a pointer moved onto the
// requests-per-second panel, and the console must stay clean. With
// RLVERIFY_SCREENSHOTS=DIR the screenshots are kept there to look at.
// Skipped when Chromium is absent, except in CI.
func TestHTMLInChromium(t *testing.T) {
	needChromium(t)
	type page struct {
		name    string
		render  func(*bytes.Buffer) error
		height  int
		colours []colour
		dom     []string
		// probe is the plot (data-h index) the pointer is moved onto, the
		// x (viewBox units) it goes to, and what the box must then say.
		probe probe
	}
	_, _, fixtureDoc := fixture(t)
	pass, fail, fault := pageDoc(t, "pass"), pageDoc(t, "fail"), pageDoc(t, "fault")
	cmp := pageComparison(t)
	require.Equal(t, checks.Pass, pass.Verdict)
	require.Equal(t, checks.Fail, fail.Verdict)
	require.NotEmpty(t, fault.Faults)
	panels := []string{`aria-label="requests per second"`, `aria-label="requests by instance"`, `<rect class="bar-a"`, `class="axt"`, `>time since run start (s)</text>`, `>requests per second</text>`}
	pages := []page{
		{name: "pass", render: func(b *bytes.Buffer) error { return HTML{}.Render(b, pass) }, height: 2400,
			colours: []colour{cPass, cAdmitted, cRejected, cEnvelope},
			dom:     append([]string{`<tr class="gate">`, "Not verified by this run", `<path class="ln p99"`, "inst 2"}, panels...),
			probe:   rateProbe(t, pass)},
		{name: "fail", render: func(b *bytes.Buffer) error { return HTML{}.Render(b, fail) }, height: 2800,
			colours: []colour{cFail, cAdmitted, cRejected, cEnvelope},
			dom:     append([]string{`<rect class="viol"`, `<rect class="violbar"`, "Evidence: instances", "explained by instances"}, panels...),
			probe:   rateProbe(t, fail)},
		{name: "fault", render: func(b *bytes.Buffer) error { return HTML{}.Render(b, fault) }, height: 2400,
			colours: []colour{cPass, cAdmitted, cRejected, cFault},
			dom:     append([]string{`<rect class="fault"`, "store-down"}, panels...),
			probe:   rateProbe(t, fault)},
		{name: "compare", render: func(b *bytes.Buffer) error { return HTML{}.RenderComparison(b, cmp) }, height: 3000,
			colours: []colour{cPass, cFault, {0x00, 0x72, 0xb2, "first implementation"}, {0xe6, 0x9f, 0x00, "second implementation"}, {0x00, 0x9e, 0x73, "third implementation"}},
			dom: []string{"<h2>Overlays</h2>", `class="ln ov c0"`, `class="ln ov c1"`, `class="ln ov c2"`, `aria-label="Admitted per second"`,
				`aria-label="Decision latency p99 per bin"`, `aria-label="busiest key, admitted"`, "token-bucket@fail-closed"},
			probe: overlayProbe(t, cmp)},
		{name: "fixture", render: func(b *bytes.Buffer) error { return HTML{}.Render(b, fixtureDoc) }, height: 1600,
			colours: []colour{cPass, cFail, cEnvelope},
			dom: []string{`<path class="ln adm"`, `<path class="ln env"`, `<path class="ln lvl"`, `<path class="ln p99"`, `<rect class="viol"`,
				`<rect class="fault"`, "Errors by status", "no decision"},
			probe: rateProbe(t, fixtureDoc)},
	}
	keep := os.Getenv("RLVERIFY_SCREENSHOTS")
	for _, pg := range pages {
		t.Run(pg.name, func(t *testing.T) {
			dir := t.TempDir()
			var buf bytes.Buffer
			require.NoError(t, pg.render(&buf))
			requireSelfContained(t, buf.String())
			file := filepath.Join(dir, pg.name+".html")
			require.NoError(t, os.WriteFile(file, buf.Bytes(), 0o644))

			shot := filepath.Join(dir, "shot.png")
			_, stderr := chromium(t, file, "--screenshot="+shot, fmt.Sprintf("--window-size=1280,%d", pg.height))
			requireCleanConsole(t, stderr)
			if keep != "" {
				b, err := os.ReadFile(shot)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(keep, pg.name+".png"), b, 0o644))
			}
			requireScreenshot(t, shot, 1280, pg.height, pg.colours)

			// The hover script: move the pointer onto a plot, read the box.
			// The page with the probe serves for the DOM checks too.
			hovered := pg.probe.page(t, buf.String())
			file = filepath.Join(dir, pg.name+"-hover.html")
			require.NoError(t, os.WriteFile(file, []byte(hovered), 0o644))
			dom, stderr := chromium(t, file, "--dump-dom")
			requireCleanConsole(t, stderr)
			require.Contains(t, dom, `<svg class="plot"`)
			for _, s := range pg.dom {
				require.Contains(t, dom, s)
			}
			m := regexp.MustCompile(`(?s)<pre id="probe">(.*?)</pre>`).FindStringSubmatch(dom)
			require.NotNil(t, m, "the probe wrote nothing")
			box := strings.ReplaceAll(m[1], "\u00a0", " ")
			for _, want := range pg.probe.want {
				require.Contains(t, box, want, "hover box for %s", pg.probe.what)
			}
			if keep != "" {
				shot := filepath.Join(keep, pg.name+"-hover.png")
				_, stderr := chromium(t, file, "--screenshot="+shot, fmt.Sprintf("--window-size=1280,%d", pg.height))
				requireCleanConsole(t, stderr)
			}
		})
	}
}

// probe moves the pointer onto plot (its data-h index) at x (viewBox
// units) and expects want in the hover box.
type probe struct {
	plot int
	x    float64
	want []string
	what string
}

// page is src with a script that moves the pointer onto the plot after
// the page's own script ran, then copies the hover box into <pre
// id="probe">.
func (pr probe) page(t *testing.T, src string) string {
	t.Helper()
	script := fmt.Sprintf(`<pre id="probe"></pre><script>(function(){
var svg=document.querySelector('svg[data-h="%d"]');
var r=svg.getBoundingClientRect(),vb=svg.viewBox.baseVal;
var x=r.left+%g*r.width/vb.width,y=r.top+r.height/2;
svg.dispatchEvent(new MouseEvent('mousemove',{clientX:x,clientY:y,bubbles:true}));
var tip=document.querySelector('div.tip');
var out=[];if(tip&&tip.style.display==='block'){out.push(tip.querySelector('b').textContent);
tip.querySelectorAll('div').forEach(function(d){out.push(d.childNodes[1].textContent+'='+d.querySelector('.v').textContent);});}
document.getElementById('probe').textContent=out.join('\n');
})();</script>
</body>`, pr.plot, pr.x)
	require.Equal(t, 1, strings.Count(src, "</body>"))
	return strings.Replace(src, "</body>", script, 1)
}

// rateProbe points at the middle of the busiest bin of d's
// requests-per-second panel (the first plot with hover data), where the
// box must show that bin's sent and admitted rates.
func rateProbe(t *testing.T, d *Document) probe {
	tr := d.Timeline.Traffic
	require.NotNil(t, tr)
	best := 0
	for i := 0; i < tr.Bins; i++ {
		if tr.All.Admitted[i]+tr.All.Rejected[i]+tr.All.Errors[i] > tr.All.Admitted[best]+tr.All.Rejected[best]+tr.All.Errors[best] {
			best = i
		}
	}
	p := newPlot(&page{}, timelineDomain(d.Timeline), 0, 1)
	x := p.X(float64(tr.Start) + (float64(best)+0.5)*float64(tr.Width))
	sent := tr.perSecondOf(tr.All.Admitted[best] + tr.All.Rejected[best] + tr.All.Errors[best])
	return probe{plot: 0, x: x, what: "the busiest bin of requests per second", want: []string{
		"at ", "sent=" + jsNum(sent) + "/s", "admitted=" + jsNum(tr.perSecondOf(tr.All.Admitted[best])) + "/s",
	}}
}

// overlayProbe points at the first overlay (admitted per second), in the
// first implementation's busiest bin: the box lists every implementation.
func overlayProbe(t *testing.T, c *Comparison) probe {
	d := c.Columns[0].Document
	tr := d.Timeline.Traffic
	best := 0
	for i := 0; i < tr.Bins; i++ {
		if tr.All.Admitted[i] > tr.All.Admitted[best] {
			best = i
		}
	}
	dm := timelineDomain(d.Timeline)
	for _, col := range c.Columns[1:] {
		o := timelineDomain(col.Document.Timeline)
		dm.x0, dm.x1 = min(dm.x0, o.x0), max(dm.x1, o.x1)
	}
	p := newPlot(&page{}, dm, 0, 1)
	x := p.X(float64(tr.Start) + (float64(best)+0.5)*float64(tr.Width))
	want := []string{c.Columns[0].Name + "=" + jsNum(tr.perSecondOf(tr.All.Admitted[best])) + "/s"}
	for _, col := range c.Columns[1:] {
		want = append(want, col.Name+"=")
	}
	// The matrix has no hover data: the first overlay is plot 0.
	return probe{plot: 0, x: x, what: "admitted per second of every implementation", want: want}
}

// jsNum formats v as the hover script's num does.
func jsNum(v float64) string {
	if v == float64(int64(v)) {
		s := fmt.Sprintf("%d", int64(v))
		for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
			s = s[:i] + "," + s[i:]
		}
		return s
	}
	switch a := max(v, -v); {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// requireScreenshot checks the PNG at file: its size, many colours, none
// covering almost all of it, and each of want somewhere.
func requireScreenshot(t *testing.T, file string, w, h int, want []colour) {
	t.Helper()
	fh, err := os.Open(file)
	require.NoError(t, err, "no screenshot written")
	defer fh.Close()
	st, err := fh.Stat()
	require.NoError(t, err)
	require.Greater(t, st.Size(), int64(20_000), "screenshot is suspiciously small")
	img, err := png.Decode(fh)
	require.NoError(t, err)
	require.Equal(t, image.Rect(0, 0, w, h), img.Bounds())
	colours := map[uint32]int{}
	found := make([]bool, len(want))
	for y := 0; y < h; y += 2 {
		for x := 0; x < w; x += 2 {
			r, g, b, _ := img.At(x, y).RGBA()
			r, g, b = r>>8, g>>8, b>>8
			colours[r<<16|g<<8|b]++
			for i, c := range want {
				found[i] = found[i] || near(r, g, b, c.r, c.g, c.b)
			}
		}
	}
	require.Greater(t, len(colours), 50, "the screenshot is nearly one colour")
	top := 0
	for _, n := range colours {
		top = max(top, n)
	}
	require.Less(t, top, (w/2)*(h/2)*97/100, "one colour covers almost the whole screenshot")
	for i, c := range want {
		require.True(t, found[i], "colour #%02x%02x%02x (%s) missing from the screenshot", c.r, c.g, c.b, c.what)
	}
}

func near(r, g, b, wr, wg, wb uint32) bool {
	d := func(a, b uint32) uint32 {
		if a > b {
			return a - b
		}
		return b - a
	}
	return d(r, wr) < 12 && d(g, wg) < 12 && d(b, wb) < 12
}

func requireCleanConsole(t *testing.T, stderr string) {
	t.Helper()
	for _, bad := range []string{"Uncaught", "ERROR:CONSOLE", ":CONSOLE", "Refused to", "net::ERR_"} {
		require.NotContains(t, stderr, bad, "chromium logged a page problem:\n%s", stderr)
	}
}
