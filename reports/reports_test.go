package reports

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// fixture builds the document of testdata/history.jsonl with the fixed
// check results of testdata/checks.json (not the live checkers, so the
// goldens change only when a renderer does).
func fixture(t testing.TB) (*history.History, *policy.Policy, *Document) {
	t.Helper()
	h, err := history.ReadFile("testdata/history.jsonl")
	require.NoError(t, err)
	var p policy.Policy
	require.NoError(t, json.Unmarshal(h.Run.Declared, &p))
	require.NoError(t, p.Validate())
	b, err := os.ReadFile("testdata/checks.json")
	require.NoError(t, err)
	var rs []checks.Result
	require.NoError(t, json.Unmarshal(b, &rs))
	return h, &p, Build(h, &p, rs)
}

// fixtureComparison compares the fixture with a passing variant of it.
func fixtureComparison(t testing.TB) *Comparison {
	h, p, d := fixture(t)
	h2 := *h
	h2.Run.Limiter = "faulty/<other>"
	var rs []checks.Result
	for _, r := range d.Checks {
		r.Verdict, r.Evidence = checks.Pass, nil
		if r.Name == "oversell" {
			r.Figures = map[string]float64{"max_overrun": 0}
		}
		rs = append(rs, r)
	}
	rs = append(rs, checks.Result{Name: "headers", Verdict: checks.Pass, Summary: "only in the second column"})
	d2 := Build(&h2, p, rs)
	return Compare("fixture-plan", []Column{{Name: "token-bucket", Document: d}, {Name: "faulty/<other>", Document: d2}})
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	file := filepath.Join("testdata", name+".golden")
	if *update {
		require.NoError(t, os.WriteFile(file, got, 0o644))
		return
	}
	want, err := os.ReadFile(file)
	require.NoError(t, err, "run go test ./reports -update to create the golden files")
	require.Equal(t, string(want), string(got), "%s differs; after checking the change, run go test ./reports -update", file)
}

func TestGoldenDocument(t *testing.T) {
	_, _, d := fixture(t)
	for _, f := range FormatNames() {
		t.Run(f, func(t *testing.T) {
			r, err := Lookup(f)
			require.NoError(t, err)
			var buf bytes.Buffer
			require.NoError(t, r.Render(&buf, d))
			golden(t, "result."+Extension(f), buf.Bytes())
		})
	}
}

func TestGoldenComparison(t *testing.T) {
	c := fixtureComparison(t)
	for _, f := range FormatNames() {
		t.Run(f, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, RenderComparison(&buf, f, c))
			golden(t, "comparison."+Extension(f), buf.Bytes())
		})
	}
}

func TestTextColorOnlyWhenAsked(t *testing.T) {
	_, _, d := fixture(t)
	var plain, color bytes.Buffer
	require.NoError(t, Text{}.Render(&plain, d))
	require.NoError(t, Text{Color: true}.Render(&color, d))
	require.NotContains(t, plain.String(), "\x1b[")
	require.Contains(t, color.String(), "\x1b[31;1mFAIL\x1b[0m")
}

func TestJSONRoundTrip(t *testing.T) {
	_, _, d := fixture(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "result.json")
	var buf bytes.Buffer
	require.NoError(t, JSON{}.Render(&buf, d))
	require.NoError(t, os.WriteFile(file, buf.Bytes(), 0o644))
	back, err := ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, d.Timeline, back.Timeline)
	require.Equal(t, d.Checks, back.Checks)
	// Every format renders the same from the re-read document.
	for _, f := range FormatNames() {
		r, _ := Lookup(f)
		var a, b bytes.Buffer
		require.NoError(t, r.Render(&a, d))
		require.NoError(t, r.Render(&b, back))
		require.Equal(t, a.String(), b.String(), f)
	}
	// The compact arrays are still valid, ordinary JSON.
	var anyDoc map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &anyDoc))
	require.Contains(t, buf.String(), `"request_ids": [1, 2, 3,`)

	// ReadAny tells a comparison from a result.
	c := fixtureComparison(t)
	buf.Reset()
	require.NoError(t, RenderComparison(&buf, "json", c))
	cf := filepath.Join(dir, "comparison.json")
	require.NoError(t, os.WriteFile(cf, buf.Bytes(), 0o644))
	dd, cc, err := ReadAny(cf)
	require.NoError(t, err)
	require.Nil(t, dd)
	require.Equal(t, c.Checks, cc.Checks)
	require.Equal(t, c.Columns[1].Metrics, cc.Columns[1].Metrics)
	_, err = ReadFile(cf)
	require.ErrorContains(t, err, "is a comparison")
	dd, cc, err = ReadAny(file)
	require.NoError(t, err)
	require.NotNil(t, dd)
	require.Nil(t, cc)

	require.NoError(t, os.WriteFile(file, []byte(`{"schema":"rlverify.result/v0"}`), 0o644))
	_, err = ReadFile(file)
	require.ErrorContains(t, err, `has schema "rlverify.result/v0"`)
}

func TestCompactScalarArrays(t *testing.T) {
	in := "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"s\": [\n    \"x, ]\\\" [\",\n    \"y\"\n  ],\n  \"o\": [\n    {\n      \"b\": []\n    }\n  ]\n}"
	got := string(compactScalarArrays([]byte(in)))
	require.Equal(t, "{\n  \"a\": [1, 2],\n  \"s\": [\"x, ]\\\" [\", \"y\"],\n  \"o\": [\n    {\n      \"b\": []\n    }\n  ]\n}", got)
}

func TestJUnitWellFormed(t *testing.T) {
	_, _, d := fixture(t)
	for name, render := range map[string]func(io.Writer) error{
		"result":     func(w io.Writer) error { return JUnit{}.Render(w, d) },
		"comparison": func(w io.Writer) error { return JUnit{}.RenderComparison(w, fixtureComparison(t)) },
	} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, render(&buf))
			// Every token decodes: well-formed XML.
			dec := xml.NewDecoder(bytes.NewReader(buf.Bytes()))
			for {
				_, err := dec.Token()
				if err == io.EOF {
					break
				}
				require.NoError(t, err)
			}
			// The shape CI parsers read.
			var got struct {
				XMLName  xml.Name `xml:"testsuites"`
				Tests    int      `xml:"tests,attr"`
				Failures int      `xml:"failures,attr"`
				Errors   int      `xml:"errors,attr"`
				Skipped  int      `xml:"skipped,attr"`
				Suites   []struct {
					Name  string `xml:"name,attr"`
					Tests int    `xml:"tests,attr"`
					Time  string `xml:"time,attr"`
					Cases []struct {
						Name      string `xml:"name,attr"`
						Classname string `xml:"classname,attr"`
						Time      string `xml:"time,attr"`
						Failure   *struct {
							Message string `xml:"message,attr"`
							Text    string `xml:",chardata"`
						} `xml:"failure"`
						Error   *struct{} `xml:"error"`
						Skipped *struct{} `xml:"skipped"`
					} `xml:"testcase"`
				} `xml:"testsuite"`
			}
			require.NoError(t, xml.Unmarshal(buf.Bytes(), &got))
			require.NotEmpty(t, got.Suites)
			s := got.Suites[0]
			require.Equal(t, "fixture-plan · token-bucket", s.Name)
			require.Equal(t, "1.150", s.Time)
			require.Len(t, s.Cases, 4)
			for _, c := range s.Cases {
				require.NotEmpty(t, c.Name)
				require.NotEmpty(t, c.Classname)
				require.NotEmpty(t, c.Time)
			}
			require.NotNil(t, s.Cases[0].Failure)
			require.Contains(t, s.Cases[0].Failure.Text, "<b>not bold</b>")
			require.Contains(t, s.Cases[0].Failure.Text, "requests 1, 2, 3")
			require.NotNil(t, s.Cases[1].Error)
			require.NotNil(t, s.Cases[3].Skipped)
			if name == "result" {
				require.Equal(t, 4, got.Tests)
				require.Equal(t, []int{1, 1, 1}, []int{got.Failures, got.Errors, got.Skipped})
			} else {
				require.Len(t, got.Suites, 2)
				require.Equal(t, 9, got.Tests)
			}
		})
	}
}

var (
	reAttrURL = regexp.MustCompile(`(?i)\s(src|href|xlink:href|action|data|poster|srcset)\s*=\s*"([^"]*)"`)
	reExtern  = regexp.MustCompile(`(?i)<(link|iframe|img|object|embed|base|frame|meta http-equiv)\b|@import|url\(`)
	reScript  = regexp.MustCompile(`(?is)<script([^>]*)>(.*?)</script>`)
	// reFetch are the ways a script could reach the network.
	reFetch = regexp.MustCompile(`fetch\(|XMLHttpRequest|WebSocket|EventSource|sendBeacon|import\(|importScripts|\.src\s*=|location\s*=|window\.open|document\.write`)
)

// requireSelfContained asserts page loads nothing: no external src/href,
// no link/img elements, no CSS url(), and http(s) addresses only in text
// (outside every tag). Scripts are inline: the hover script (no network
// call in it) and its JSON data, nothing else.
func requireSelfContained(t *testing.T, page string) {
	t.Helper()
	scripts := reScript.FindAllStringSubmatch(page, -1)
	require.LessOrEqual(t, len(scripts), 2, "the hover data and the hover script, no other")
	require.Equal(t, len(scripts), strings.Count(strings.ToLower(page), "<script"), "every <script> is closed")
	for _, s := range scripts {
		attrs := strings.TrimSpace(s[1])
		require.True(t, attrs == "" || attrs == `type="application/json" id="rlv-hover"`, "script attributes %q", attrs)
		require.Nil(t, reFetch.FindStringIndex(s[2]), "script reaches out: %q", reFetch.FindString(s[2]))
	}
	for _, m := range reAttrURL.FindAllStringSubmatch(page, -1) {
		require.True(t, strings.HasPrefix(m[2], "#"), "attribute %s=%q points outside the page", m[1], m[2])
	}
	require.Nil(t, reExtern.FindStringIndex(page), "page has %q", reExtern.FindString(page))
	for _, scheme := range []string{"http://", "https://", "//fonts", "file:"} {
		for off := 0; ; {
			i := strings.Index(page[off:], scheme)
			if i < 0 {
				break
			}
			i += off
			open, closed := strings.LastIndex(page[:i], "<"), strings.LastIndex(page[:i], ">")
			require.Greater(t, closed, open, "%s inside a tag at offset %d: %s", scheme, i, page[max(open, 0):min(i+40, len(page))])
			off = i + len(scheme)
		}
	}
}

func TestHTMLSelfContained(t *testing.T) {
	_, _, d := fixture(t)
	var buf bytes.Buffer
	require.NoError(t, HTML{}.Render(&buf, d))
	page := buf.String()
	requireSelfContained(t, page)
	require.Contains(t, page, "http://127.0.0.1:18080", "instance URLs appear as text")
	require.NotContains(t, page, "<b>not bold</b>", "evidence is escaped")
	require.Contains(t, page, "&lt;b&gt;not bold&lt;/b&gt;")
	// One view per key and per instance of a multi-instance key; the first
	// key's view is the default.
	for _, id := range []string{`id="v0"`, `id="v0-i0"`, `id="v0-i1"`, `id="v1"`} {
		require.Contains(t, page, id)
	}
	require.Contains(t, page, `<section class="view dflt" id="v0">`)
	require.Equal(t, 2+3+2+2+3, strings.Count(page, `<svg class="plot"`), "requests per second and the lanes, 3 plots for each key, 2 per instance view")
	require.Contains(t, page, `class="viol"`)
	require.Contains(t, page, `class="fault"`)

	buf.Reset()
	require.NoError(t, HTML{}.RenderComparison(&buf, fixtureComparison(t)))
	requireSelfContained(t, buf.String())
}

func TestMarkdownEscapes(t *testing.T) {
	_, _, d := fixture(t)
	var buf bytes.Buffer
	require.NoError(t, Markdown{}.Render(&buf, d))
	md := buf.String()
	require.Contains(t, md, "**Verdict: FAIL**")
	require.Contains(t, md, `\| &lt;b&gt;not bold&lt;/b&gt; & \*not em\*`)
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "| ") {
			require.True(t, strings.HasSuffix(line, "|"), line)
		}
	}
}

func TestCompareMetrics(t *testing.T) {
	c := fixtureComparison(t)
	require.Equal(t, ComparisonSchema, c.Schema)
	require.Equal(t, checks.Fail, c.Verdict)
	require.Equal(t, []string{"oversell", "under-admission", "retry-after", "isolation", "headers"}, c.Checks)
	m := c.Columns[0].Metrics
	require.InDelta(t, 29.87, *m.OverrunPct, 0.01) // 13/10.01 − 1 from the evidence
	require.InDelta(t, 0.25, *m.RetryAfterErrorS, 1e-9)
	require.Equal(t, int64(55), m.Decisions) // 56 events, 1 without a decision
	require.Equal(t, checks.Fail, m.Verdict)
	require.Equal(t, float64(0), *c.Columns[1].Metrics.OverrunPct)
	require.Equal(t, checks.Verdict(""), c.Columns[0].verdictOf("headers"))
	var buf bytes.Buffer
	require.Error(t, RenderComparison(&buf, "pdf", c))
}

func TestTimeline(t *testing.T) {
	h, _, d := fixture(t)
	tl := d.Timeline
	require.NotNil(t, tl)
	require.LessOrEqual(t, tl.Buckets, MaxTimelineBuckets)
	require.LessOrEqual(t, tl.Start, int64(10_000_000))
	require.GreaterOrEqual(t, tl.End(), int64(1_150_000_000))
	require.Len(t, tl.Keys, 2)
	require.Equal(t, "free-a", tl.Keys[0].Key, "busiest first")
	require.Len(t, tl.Keys[0].Instances, 2)
	require.Empty(t, tl.Keys[1].Instances, "paid-b went to one instance")
	var total int64
	for _, k := range tl.Keys {
		sum := func(v []int) (n int64) {
			for _, x := range v {
				n += int64(x)
			}
			return n
		}
		require.Equal(t, k.Requests, sum(k.All.Admitted)+sum(k.All.Rejected)+sum(k.All.Errors))
		total += k.Requests
		require.Len(t, k.Envelope, tl.Buckets)
		require.Len(t, k.Level, tl.Buckets)
		for i := 1; i < len(k.Envelope); i++ {
			require.GreaterOrEqual(t, k.Envelope[i], k.Envelope[i-1])
		}
	}
	require.Equal(t, int64(len(h.Events)), total)
	// 13 admitted within 1 ms from a bucket of 10: the estimate goes to −3
	// (and further down in the steady phase, which admits 13/s against 5/s).
	minLevel := 0.0
	for _, v := range tl.Keys[0].Level[:tl.Bucket(20_000_000)] {
		minLevel = min(minLevel, v)
	}
	require.InDelta(t, -3, minLevel, 0.01)
	require.InDelta(t, 10.0, tl.Keys[0].Envelope[0], 0.1, "K + r·(one bucket)")
}

func TestTimelineLimits(t *testing.T) {
	p := policy.Default()
	h := &history.History{}
	// 30 keys, 12 instances, over 10 minutes with a few events at the ends:
	// at most 20 keys, 8 instances and 2000 buckets.
	var id uint64
	for k := range 30 {
		for i := range 12 + k {
			id++
			at := int64(i) * int64(600e9) / int64(12+k)
			h.Events = append(h.Events, history.Event{ID: id, Key: fmt.Sprintf("paid-%02d", k), Instance: i % 12, Sent: at, Recv: at + 1e6, Status: 200})
		}
	}
	tl := buildTimeline(h, p, outcomes(h, p), groupByKey(h))
	require.LessOrEqual(t, tl.Buckets, MaxTimelineBuckets)
	require.Len(t, tl.Keys, MaxTimelineKeys)
	require.Equal(t, 10, tl.OmittedKeys)
	require.Equal(t, "paid-29", tl.Keys[0].Key)
	require.Len(t, tl.Keys[0].Instances, MaxTimelineInstances)
	require.Equal(t, 4, tl.Keys[0].OmittedInstances)
	require.Nil(t, buildTimeline(&history.History{}, p, nil, keyGroups{}))
}

func TestLevelSims(t *testing.T) {
	const s = int64(1e9)
	win := func(a policy.Algorithm) policy.Limit {
		l := policy.Limit{Algorithm: a, Count: 2, Window: policy.Duration(s), Capacity: 2, Rate: 2}
		if a == policy.SlidingCounter {
			l.ErrorBound = 1
		}
		return l
	}
	// Sliding log: 2 per rolling second.
	sim := newSim(win(policy.SlidingLog), 0)
	sim.take(0)
	sim.take(s / 2)
	require.Equal(t, 0.0, sim.at(s/2))
	require.Equal(t, 1.0, sim.at(s+1))
	// Fixed window aligned to the epoch: a new window resets.
	sim = newSim(win(policy.FixedWindow), 0)
	sim.take(s - 10)
	sim.take(s - 5)
	sim.take(s - 1)
	require.Equal(t, -1.0, sim.at(s-1))
	require.Equal(t, 2.0, sim.at(s))
	// Sliding counter weighs the previous window.
	sim = newSim(win(policy.SlidingCounter), 0)
	sim.take(s / 2)
	sim.take(s / 2)
	require.InDelta(t, 1.0, sim.at(s+s/2), 1e-9)
	// Token bucket refills at r, capped at K.
	sim = newSim(policy.Limit{Algorithm: policy.TokenBucket, Capacity: 2, Rate: 2}, 0)
	sim.take(0)
	sim.take(0)
	sim.take(0)
	require.Equal(t, -1.0, sim.at(0))
	require.InDelta(t, 0.0, sim.at(s/2), 1e-9)
	require.Equal(t, 2.0, sim.at(10*s))
}

// TestFailModeNotDeclared: a policy without a failure section is reported
// "not declared", not the open its services fall back to.
func TestFailModeNotDeclared(t *testing.T) {
	p, err := policy.Parse("t.yaml", []byte("name: t\ntiers:\n  - name: a\n    limits:\n      - algorithm: token-bucket\n        capacity: 5\n        rate: 1/s\ndefault_tier: a\n"))
	require.NoError(t, err)
	require.Equal(t, "not declared", FailModeOf(p))
	require.Equal(t, policy.FailOpen, p.Failure.Mode)
	p, err = policy.Parse("t.yaml", []byte("name: t\ntiers:\n  - name: a\n    limits:\n      - algorithm: token-bucket\n        capacity: 5\n        rate: 1/s\ndefault_tier: a\nfailure:\n  mode: open\n"))
	require.NoError(t, err)
	require.Equal(t, "open", FailModeOf(p))
}
