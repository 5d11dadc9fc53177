package reports

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/thresholds"
)

// thresholdFixture is the fixture document with every check passing and
// two thresholds judged on its history: one passes, one fails.
func thresholdFixture(t *testing.T) *Document {
	t.Helper()
	h, p, _ := fixture(t)
	rs := []checks.Result{{Name: "oversell", Verdict: checks.Pass, Summary: "ok"}}
	d := Build(h, p, rs)
	var ts []thresholds.Threshold
	for _, s := range []string{"latency.p99<50ms", "phase.burst.admitted.count<5"} {
		th, err := thresholds.Parse(s)
		require.NoError(t, err)
		ts = append(ts, th)
	}
	require.Equal(t, checks.Pass, d.Verdict)
	d.SetThresholds(thresholds.Evaluate(h, outcomeBy(p), ts))
	return d
}

func TestThresholdsAreRowsOfEveryFormat(t *testing.T) {
	d := thresholdFixture(t)
	require.Equal(t, checks.Fail, d.Verdict, "a failed threshold fails the run")
	require.Equal(t, thresholds.Pass, d.Thresholds[0].Verdict)
	require.Equal(t, thresholds.Fail, d.Thresholds[1].Verdict)
	for _, f := range FormatNames() {
		t.Run(f, func(t *testing.T) {
			r, err := Lookup(f)
			require.NoError(t, err)
			var buf bytes.Buffer
			require.NoError(t, r.Render(&buf, d))
			out := buf.String()
			switch f {
			case "text":
				require.Regexp(t, `(?m)^THRESHOLD\s+VERDICT\s+SUMMARY$`, out)
				require.Regexp(t, `(?m)^latency\.p99<50ms\s+PASS\s+p99 latency \S+ over \d+ decision\(s\); threshold < 50ms$`, out)
				require.Regexp(t, `(?m)^phase\.burst\.admitted\.count<5\s+FAIL\s+\d+ admitted in phase burst; threshold < 5$`, out)
				require.Contains(t, out, "verdict: FAIL")
			case "md":
				require.Contains(t, out, "### Thresholds")
				require.Contains(t, out, "| `latency.p99<50ms` | PASS |")
				require.Contains(t, out, "| `phase.burst.admitted.count<5` | FAIL |")
			case "junit":
				var s junitSuites
				require.NoError(t, xml.Unmarshal(buf.Bytes(), &s))
				var names []string
				for _, c := range s.Suites[0].Cases {
					names = append(names, c.Name)
					if c.Name == "threshold phase.burst.admitted.count<5" {
						require.NotNil(t, c.Failure)
						require.Equal(t, "threshold", c.Failure.Type)
					}
				}
				require.Contains(t, names, "threshold latency.p99<50ms")
				require.Equal(t, 1, s.Failures)
			case "html":
				require.Contains(t, out, "<h2>Thresholds</h2>")
				require.Contains(t, out, "<code>phase.burst.admitted.count&lt;5</code></td><td><span class=\"badge fail\">FAIL</span>")
			case "json":
				var back Document
				require.NoError(t, json.Unmarshal(buf.Bytes(), &back))
				require.Equal(t, d.Thresholds, back.Thresholds)
				require.True(t, strings.Contains(out, `"key": "phase.burst.admitted.count"`), out)
			}
		})
	}
}

func TestComparisonHasAThresholdRow(t *testing.T) {
	d := thresholdFixture(t)
	c := Compare("fixture-plan", []Column{{Name: "a", Document: d}})
	require.Contains(t, c.Checks, "threshold phase.burst.admitted.count<5")
	var buf bytes.Buffer
	require.NoError(t, Text{}.RenderComparison(&buf, c))
	require.Regexp(t, `(?m)^threshold phase\.burst\.admitted\.count<5\s+FAIL$`, buf.String())
	require.Regexp(t, `(?m)^threshold latency\.p99<50ms\s+PASS$`, buf.String())
}
