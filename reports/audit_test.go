package reports

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/checks"
)

// fixtureAudit is an audit of four plans: the fixture document (one
// oversell defect, an unknown), a passing plan that measured the capacity,
// a bypass plan whose variants bought quota, a plan not run and one that
// could not be run.
func fixtureAudit(t testing.TB) *Audit {
	_, p, d := fixture(t)
	h, _, _ := fixture(t)
	var pass []checks.Result
	for _, r := range d.Checks {
		r.Verdict, r.Evidence = checks.Pass, nil
		pass = append(pass, r)
	}
	pass = append(pass, checks.Result{Name: checks.CalibrationCheck, Verdict: checks.Pass, Summary: "2 parameters measured as declared",
		Measured: []checks.Measurement{{Name: "capacity", Declared: "10", Measured: "10", Verdict: checks.Pass}}})
	precision := Build(h, p, pass)
	precision.Elapsed = int64(1500 * time.Millisecond)
	bypass := Build(h, p, []checks.Result{
		{Name: "bypass", Verdict: checks.Fail, Summary: "1 variant bought quota the plain key did not get",
			Figures: map[string]float64{"variants": 3, "excess": 20},
			Evidence: []checks.Evidence{{Key: "free-x", Limit: "10@5/s", From: 0, To: int64(time.Second), Observed: 30, Bound: 15,
				RequestIDs: []uint64{7, 8, 9}, TotalIDs: 20, Message: "variant repeat (the key sent twice in one header) admitted 30 where one quota allows 15"}}},
		{Name: "oversell", Verdict: checks.Fail, Summary: "2 proven intervals over the limit (worst 3.00× the envelope)",
			Evidence: []checks.Evidence{{Key: "free-x", Limit: "10@5/s", From: 0, To: int64(100 * time.Millisecond), Observed: 30, Bound: 10,
				RequestIDs: []uint64{1, 2, 3}, TotalIDs: 30, Message: "30 requests admitted in 100ms; a bucket of K=10 refilling at 5/s allows at most 10"}}},
		{Name: "isolation", Verdict: checks.Explained, ExplainedBy: "oversell", Summary: "explained by oversell: 1 key pair shared a quota"},
	})
	bypass.Elapsed = int64(2 * time.Second)
	a := BuildAudit("http://127.0.0.1:8080 <&>", PolicySummary{Name: "default", Source: "builtin:default", Limits: []string{"free (free-…): token-bucket K=10 r=5/s"}}, []AuditColumn{
		{Plan: "concurrent-burst", Doc: d, Dir: "rlverify-audit/a1/concurrent-burst"},
		{Plan: "precision", Doc: precision, Dir: "rlverify-audit/a1/precision", Measured: precision.Checks[len(precision.Checks)-1].Measured},
		{Plan: "boundary-burst", Skip: "every limit is a bucket: no window edge to aim at"},
		{Plan: "bypass", Doc: bypass, Dir: "rlverify-audit/a1/bypass"},
		{Plan: "tiers", Err: errors.New("plan tiers: the target answered 405 to every request")},
	})
	for i := range a.Plans {
		if a.Plans[i].Dir != "" && a.Plans[i].Ran {
			a.Plans[i].Reports = []string{a.Plans[i].Dir + "/report.html", a.Plans[i].Dir + "/report.txt"}
		}
	}
	return a
}

func TestGoldenAudit(t *testing.T) {
	a := fixtureAudit(t)
	for _, f := range FormatNames() {
		t.Run(f, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, RenderAudit(&buf, f, a, false))
			golden(t, "audit."+Extension(f), buf.Bytes())
		})
	}
}

// The audit's reports carry, in every format, what a reviewer needs to
// say which property failed, on which requests, and what was measured
// against what was declared.
func TestAuditReportsCarryTheEvidence(t *testing.T) {
	a := fixtureAudit(t)
	require.Equal(t, checks.Fail, a.Verdict)
	require.Len(t, a.Defects, 2)
	require.Equal(t, "oversell", a.Defects[0].Check)
	require.Equal(t, []string{"concurrent-burst", "bypass"}, a.Defects[0].Plans)
	require.Equal(t, "bypass", a.Defects[0].Strongest.Plan, "3.00× beats 1.30×")
	require.Equal(t, []string{"isolation"}, a.Defects[0].Explains)
	require.Equal(t, int64(int64(1500*time.Millisecond)+int64(2*time.Second)+a.Plans[0].Elapsed), a.Elapsed)
	for _, f := range []string{"text", "md", "html", "junit"} {
		var buf bytes.Buffer
		require.NoError(t, RenderAudit(&buf, f, a, false))
		out := buf.String()
		for _, want := range []string{
			"2 defects", "oversell (2 plans)", // the headline
			"variant repeat",        // bypass's evidence
			"observed 30, bound 10", // measured against declared
			"requests 1, 2, 3 … (30 in all)",
			"bypass/report.html", // the plan's own report
		} {
			require.Contains(t, out, want, "format %s", f)
		}
	}
}

func TestAuditJUnitHasTimesAndProperties(t *testing.T) {
	a := fixtureAudit(t)
	var buf bytes.Buffer
	require.NoError(t, RenderAudit(&buf, "junit", a, false))
	var doc junitSuites
	require.NoError(t, xml.Unmarshal(buf.Bytes(), &doc))
	require.Len(t, doc.Suites, 1)
	s := doc.Suites[0]
	require.Equal(t, "4.650", s.Time, "the plans' run time")
	var sum float64
	for _, c := range s.Cases {
		var f float64
		_, err := fmt.Sscan(c.Time, &f)
		require.NoError(t, err)
		sum += f
		require.Equal(t, "rlverify.audit", c.Classname)
	}
	require.InDelta(t, 4.65, sum, 0.01, "each plan's time shared among the properties it judged")
	props := map[string]string{}
	for _, p := range s.Properties {
		props[p.Name] = p.Value
	}
	require.Equal(t, "fail", props["verdict"])
	require.Contains(t, props["plan.bypass"], "rlverify-audit/a1/bypass/report.html")
	require.Contains(t, props["measured.capacity"], "declared 10, measured 10")
	require.Contains(t, props["headline"], "2 defects")
}

func TestAuditJSONRoundTrip(t *testing.T) {
	a := fixtureAudit(t)
	var buf bytes.Buffer
	require.NoError(t, RenderAudit(&buf, "json", a, false))
	var back Audit
	require.NoError(t, json.Unmarshal(buf.Bytes(), &back))
	require.Equal(t, a.Defects, back.Defects)
	require.Equal(t, a.Plans, back.Plans)
	require.True(t, strings.HasPrefix(buf.String(), "{"))
}

// The audit's page in a real browser: self-contained, no console errors,
// the verdict colours drawn (the EXPLAINED badge on its own colour, not
// white on white), and the links to the plans' own reports in the DOM.
func TestAuditPageInChromium(t *testing.T) {
	needChromium(t)
	var buf bytes.Buffer
	require.NoError(t, RenderAudit(&buf, "html", fixtureAudit(t), false))
	// The only links out are relative ones to the plans' own reports,
	// beside the page (a click, never a load).
	local := regexp.MustCompile(`href="[a-z0-9-]+/report\.html"`)
	require.NotEmpty(t, local.FindAllString(buf.String(), -1))
	requireSelfContained(t, local.ReplaceAllString(buf.String(), `href="#plan"`))
	dir := t.TempDir()
	file := filepath.Join(dir, "audit.html")
	require.NoError(t, os.WriteFile(file, buf.Bytes(), 0o644))
	shot := filepath.Join(dir, "shot.png")
	_, stderr := chromium(t, file, "--screenshot="+shot, "--window-size=1280,1600")
	requireCleanConsole(t, stderr)
	if keep := os.Getenv("RLVERIFY_SCREENSHOTS"); keep != "" {
		b, err := os.ReadFile(shot)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(keep, "audit.png"), b, 0o644))
	}
	requireScreenshot(t, shot, 1280, 1600, []colour{cFail, cPass, {0x82, 0x50, 0xdf, "EXPLAINED badge"}})
	dom, stderr := chromium(t, file, "--dump-dom")
	requireCleanConsole(t, stderr)
	for _, s := range []string{`<a href="bypass/report.html">bypass</a>`, `<span class="badge explained">EXPLAINED</span>`, "<h2>Defects</h2>", "observed 30, bound 10 (3.00×)"} {
		require.Contains(t, dom, s)
	}
}

// TestAuditHeadlineNamesWhatIsKnown: a burst the tiers plan could not
// decide leaves oversell unknown; the headline names the defect found
// elsewhere first (calibration, on the paid tier), then what could not be
// judged, where, why and in how many other plans it was decided — and
// without a defect, what passed before what was not judged.
func TestAuditHeadlineNamesWhatIsKnown(t *testing.T) {
	h, p, _ := fixture(t)
	undecided := checks.Result{Name: "oversell", Verdict: checks.Unknown, Summary: "1 burst of key paid-t could not be decided: its spread (2.1s) is longer than the window"}
	passed := checks.Result{Name: "oversell", Verdict: checks.Pass, Summary: "30 requests admitted across 1 key stayed within their envelopes"}
	calib := checks.Result{Name: checks.CalibrationCheck, Verdict: checks.Fail, Summary: "1 parameter measured unlike the declared policy",
		Evidence: []checks.Evidence{{Key: "paid-precise", Bound: 50, Observed: 0.5, Message: "key paid-precise: the next token came 1.98s after its due time (refill 0.5/s, declared 50/s)"}}}
	for _, tc := range []struct {
		name      string
		precision []checks.Result
		verdict   checks.Verdict
		want      string
	}{
		{"defect elsewhere", []checks.Result{passed, calib}, checks.Fail,
			"1 defect: calibration (1 plan); the strongest: [precision] key paid-precise: the next token came 1.98s after its due time (refill 0.5/s, declared 50/s); oversell could not be judged in tiers (1 burst of key paid-t could not be decided: its spread (2.1s) is longer than the window), decided in 1 other plan"},
		{"no defect", []checks.Result{passed}, checks.Unknown,
			"no defect found: 0 of 14 properties passed over 2 plans, 13 not measured; oversell could not be judged in tiers (1 burst of key paid-t could not be decided: its spread (2.1s) is longer than the window), decided in 1 other plan"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pd := Build(h, p, tc.precision)
			a := BuildAudit("http://127.0.0.1:8080", PolicySummary{Name: "default"}, []AuditColumn{
				{Plan: "precision", Doc: pd},
				{Plan: "tiers", Doc: Build(h, p, []checks.Result{undecided})},
			})
			require.Equal(t, tc.verdict, a.Verdict)
			require.Equal(t, tc.want, AuditHeadline(a))
		})
	}
}
