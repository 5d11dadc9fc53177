package reports

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rlverify/rlverify/checks"
)

// JUnit renders JUnit XML for CI test reports: one <testsuite> per
// target/limiter (one for a result, one per column for a comparison), one
// <testcase> per check. A failed check has a <failure> whose message is the
// check's summary and whose text is the evidence; a skipped check a
// <skipped>. An unknown verdict (the check could not decide, e.g. timing
// uncertainty) is an <error> of type "unknown": JUnit's "could not be
// carried out" rather than "found a defect". CI test views show it in red,
// while rlverify's exit code fails the job only on a failed check.
type JUnit struct{}

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
	SystemOut  string          `xml:"system-out,omitempty"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	Skipped   *junitSkip    `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

type junitSkip struct {
	Message string `xml:"message,attr"`
}

// Render implements Renderer.
func (JUnit) Render(w io.Writer, d *Document) error {
	return writeJUnit(w, []junitSuite{junitSuiteOf(d, "")})
}

// RenderComparison implements ComparisonRenderer.
func (JUnit) RenderComparison(w io.Writer, c *Comparison) error {
	var ss []junitSuite
	for _, col := range c.Columns {
		if col.Document != nil {
			ss = append(ss, junitSuiteOf(col.Document, col.Name))
		}
	}
	return writeJUnit(w, ss)
}

func writeJUnit(w io.Writer, ss []junitSuite) error {
	all := junitSuites{Name: "rlverify", Suites: ss}
	var secs float64
	for _, s := range ss {
		all.Tests += s.Tests
		all.Failures += s.Failures
		all.Errors += s.Errors
		all.Skipped += s.Skipped
		var f float64
		fmt.Sscan(s.Time, &f)
		secs += f
	}
	all.Time = fmt.Sprintf("%.3f", secs)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(all); err != nil {
		return fmt.Errorf("report: junit: %w", err)
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// suiteName names the thing attacked: the limiter, else the target.
func suiteName(d *Document) string {
	switch {
	case d.Run.Limiter != "":
		return d.Run.Limiter
	case d.Run.Target != "":
		return d.Run.Target
	}
	return "target"
}

// junitSuiteOf is d's suite; column names the implementation of a
// comparison ("" for a single result).
func junitSuiteOf(d *Document, column string) junitSuite {
	name := column
	if name == "" {
		name = suiteName(d)
	}
	plan := orDash(d.Run.Plan)
	s := junitSuite{
		Name: plan + " · " + name,
		Time: fmt.Sprintf("%.3f", time.Duration(d.Elapsed).Seconds()),
	}
	if !d.Run.Start.IsZero() {
		s.Timestamp = d.Run.Start.UTC().Format("2006-01-02T15:04:05")
	}
	prop := func(k, v string) {
		if v != "" {
			s.Properties = append(s.Properties, junitProperty{k, v})
		}
	}
	prop("plan", d.Run.Plan)
	prop("target", d.Run.Target)
	prop("limiter", d.Run.Limiter)
	prop("env", d.Run.Env)
	prop("store", d.Run.Store)
	prop("policy", d.Policy.Source)
	prop("run_id", d.Run.ID)
	prop("verdict", string(d.Verdict))
	prop("headline", Headline(d))
	// CI tools split a class name on dots into packages: the target (a URL)
	// stays out of it (it is a property), and a comparison's column, which
	// must tell the cases apart, is one segment with no dots or slashes.
	classname := "rlverify." + classSegment(plan)
	if column != "" {
		classname += "." + classSegment(column)
	}
	for _, r := range d.Checks {
		tc := junitCase{Name: r.Name, Classname: classname, Time: "0.000"}
		switch r.Verdict {
		case checks.Fail:
			s.Failures++
			tc.Failure = &junitProblem{Message: r.Summary, Type: "violation", Text: problemText(r)}
		case checks.Unknown:
			s.Errors++
			tc.Error = &junitProblem{Message: r.Summary, Type: "unknown", Text: problemText(r)}
		case checks.Skip, checks.Explained:
			s.Skipped++
			tc.Skipped = &junitSkip{Message: r.Summary}
		default:
			tc.SystemOut = r.Summary + figureSuffix(r)
		}
		s.Tests++
		s.Cases = append(s.Cases, tc)
	}
	junitThresholds(&s, d, classname)
	if d.Verdict == checks.Interrupted || d.Verdict == checks.Incomplete || d.Verdict == checks.Modified {
		// A cut run is an error of its own, so a CI that counts failures
		// and errors never shows it green.
		s.Errors++
		s.Tests++
		s.Cases = append(s.Cases, junitCase{Name: "run " + string(d.Verdict), Classname: classname, Time: "0.000",
			Error: &junitProblem{Message: d.Reason, Type: string(d.Verdict), Text: Headline(d) + "\n"}})
	}
	var out strings.Builder
	fmt.Fprintf(&out, "requests %s\n", statsLine(d.Stats))
	for _, l := range d.Policy.Limits {
		fmt.Fprintf(&out, "limit %s\n", l)
	}
	for _, n := range d.Run.Notes {
		fmt.Fprintf(&out, "note: %s\n", n)
	}
	if d.Interrupted {
		fmt.Fprintf(&out, "INTERRUPTED: %s\n", d.Reason)
	}
	for _, w := range d.Warnings {
		fmt.Fprintf(&out, "WARNING: %s\n", w)
	}
	s.SystemOut = out.String()
	return s
}

func problemText(r checks.Result) string {
	var b strings.Builder
	b.WriteString(r.Summary + "\n")
	for _, ev := range r.Evidence {
		fmt.Fprintf(&b, "- %s\n", ev.Message)
		for _, l := range evidenceLines(ev) {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	if f := figureSuffix(r); f != "" {
		b.WriteString(strings.TrimSpace(f) + "\n")
	}
	return b.String()
}

// figureSuffix is "\nfigures: a=1 b=2" or "".
func figureSuffix(r checks.Result) string {
	if len(r.Figures) == 0 {
		return ""
	}
	return "\nfigures: " + figureText(r.Figures)
}

// classSegment is s as one segment of a dotted class name: every run of
// characters other than letters, digits, '-' and '_' becomes one '_'.
func classSegment(s string) string {
	var b strings.Builder
	under := false
	for _, r := range s {
		ok := r == '-' || r == '_' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
		switch {
		case ok:
			b.WriteRune(r)
			under = false
		case !under:
			b.WriteByte('_')
			under = true
		}
	}
	if out := strings.Trim(b.String(), "_"); out != "" {
		return out
	}
	return "_"
}
