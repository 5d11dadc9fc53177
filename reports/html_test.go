package reports

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

func TestTrafficWidth(t *testing.T) {
	for _, tc := range []struct {
		span, want time.Duration
	}{
		{24 * time.Millisecond, 500 * time.Microsecond},
		{6 * time.Second, 100 * time.Millisecond},
		{19 * time.Second, 500 * time.Millisecond},
		{20 * time.Second, time.Second},
		{10 * time.Minute, time.Second},
		{time.Hour, 10 * time.Second},
	} {
		t.Run(tc.span.String(), func(t *testing.T) {
			require.Equal(t, tc.want, time.Duration(trafficWidth(int64(tc.span))))
		})
	}
}

func TestTraffic(t *testing.T) {
	h, _, d := fixture(t)
	tr := d.Timeline.Traffic
	require.NotNil(t, tr)
	sum := func(v []int) (n int64) {
		for _, x := range v {
			n += int64(x)
		}
		return n
	}
	require.Equal(t, d.Stats.Admitted, sum(tr.All.Admitted))
	require.Equal(t, d.Stats.Rejected, sum(tr.All.Rejected))
	require.Equal(t, d.Stats.Errors, sum(tr.All.Errors))
	require.Len(t, tr.Instances, 2)
	var perInst int64
	for i, s := range tr.Instances {
		require.Equal(t, i, s.Instance)
		require.Len(t, s.Admitted, tr.Bins)
		perInst += s.Requests
	}
	require.Equal(t, int64(len(h.Events)), perInst)
	require.LessOrEqual(t, tr.Start, int64(10_000_000))
	require.GreaterOrEqual(t, tr.End(), int64(1_150_000_000))

	// Every request once, in send order, with its outcome.
	ops := tr.Ops
	require.Equal(t, len(h.Events), ops.Len())
	require.Equal(t, int(d.Stats.Admitted), strings.Count(ops.Outcome, "a"))
	require.Equal(t, int(d.Stats.Rejected), strings.Count(ops.Outcome, "r"))
	require.Equal(t, int(d.Stats.Errors), strings.Count(ops.Outcome, "e"))
	for i := 1; i < ops.Len(); i++ {
		require.LessOrEqual(t, ops.Sent[i-1], ops.Sent[i])
	}
	first := ops.Op(0)
	require.Equal(t, "free-a", first.Key)
	require.Equal(t, Op{}, (&Ops{ID: []uint64{1}}).Op(0), "columns of unequal length give the zero Op")
}

// manyRequests is a history with more requests than the lanes draw one by
// one, over two instances.
func manyRequests() *history.History {
	h := &history.History{Run: history.Run{Instances: []string{"http://127.0.0.1:1", "http://127.0.0.1:2"}}, End: &history.End{Elapsed: 30e9}}
	for i := range MaxLaneOps + 100 {
		at := int64(i) * int64(30e9) / int64(MaxLaneOps+100)
		status := 200
		if i%3 == 0 {
			status = 429
		}
		h.Events = append(h.Events, history.Event{ID: uint64(i + 1), Key: "free-a", Instance: i % 2, Sent: at, Recv: at + 2e6, Status: status})
	}
	return h
}

func TestLanesBinnedWhenTooMany(t *testing.T) {
	h := manyRequests()
	p := policy.Default()
	d := Build(h, p, []checks.Result{{Name: "oversell", Verdict: checks.Pass}})
	tr := d.Timeline.Traffic
	require.Nil(t, tr.Ops)
	require.Equal(t, int64(time.Second), tr.Width, "30 s run: one bin per second")
	var buf bytes.Buffer
	require.NoError(t, HTML{}.Render(&buf, d))
	page := buf.String()
	require.Contains(t, page, "too many to draw one by one (more than 2500)")
	lanes := page[strings.Index(page, `aria-label="requests by instance"`):]
	lanes = lanes[:strings.Index(lanes, "</svg>")]
	require.Contains(t, lanes, `<rect class="bar-a"`)
	require.Contains(t, lanes, `<rect class="bar-r"`)
	require.NotContains(t, lanes, "<title>request ", "no request is drawn on its own")
}

func TestHoverValsJSON(t *testing.T) {
	b, err := json.Marshal(hoverVals{1, 2.123456, math.NaN(), 0, -3.5, math.Inf(1)})
	require.NoError(t, err)
	require.Equal(t, "[1,2.1235,null,0,-3.5,null]", string(b))
}

func TestLatencyGap(t *testing.T) {
	at := func(idx ...int) func(int) bool {
		return func(i int) bool {
			for _, j := range idx {
				if i == j {
					return true
				}
			}
			return false
		}
	}
	for _, tc := range []struct {
		name string
		has  func(int) bool
		want int
	}{
		{"nothing", at(), 5},
		{"dense", at(0, 1, 2, 3, 4), 5},
		{"every third bucket", at(0, 3, 6, 9, 12, 15), 12},
		{"every third, one silence", at(0, 3, 6, 9, 60, 63, 66), 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, latencyGap(100, tc.has))
		})
	}
	nan := math.NaN()
	xs, ys := joinGaps(0, 10, []float64{1, nan, nan, 2, nan, nan, nan, nan, 3}, 3)
	require.Equal(t, []float64{5, 35, 0, 85}, xs)
	require.Equal(t, 1.0, ys[0])
	require.Equal(t, 2.0, ys[1])
	require.True(t, math.IsNaN(ys[2]), "5 buckets apart is more than 3: the line breaks")
	require.Equal(t, 3.0, ys[3])
}

// TestLevelLeavesOutFaultWindows: admissions while the store is down are
// the failure mode's, so the simulated bucket does not spend them.
func TestLevelLeavesOutFaultWindows(t *testing.T) {
	p := policy.Default()
	h := &history.History{Faults: []history.Fault{{Kind: "store-down", Start: 1e9, End: 2e9}}, End: &history.End{Elapsed: 5e9}}
	for i := range 100 {
		at := int64(1e9) + int64(i)*1e7 // 100 admitted inside the window
		h.Events = append(h.Events, history.Event{ID: uint64(i + 1), Key: "free-a", Sent: at, Recv: at + 1e6, Status: 200})
	}
	d := Build(h, p, nil)
	k := d.Timeline.Keys[0]
	for _, v := range k.Level {
		require.GreaterOrEqual(t, v, 0.0)
	}
	h.Faults = nil
	d = Build(h, p, nil)
	require.Less(t, d.Timeline.Keys[0].Level[len(d.Timeline.Keys[0].Level)-1], 0.0, "without the fault window the same admissions overdraw the bucket")
}

func TestHTMLPanels(t *testing.T) {
	_, _, d := fixture(t)
	var buf bytes.Buffer
	require.NoError(t, HTML{}.Render(&buf, d))
	page := buf.String()
	// Every plot has titled axes, the x axis in the unit of its ticks.
	plots := strings.Count(page, `<svg class="plot"`)
	require.Equal(t, plots, strings.Count(page, ">time since run start (ms)</text>"))
	require.Equal(t, 2*plots, strings.Count(page, `class="axt"`))
	for _, title := range []string{">requests per second</text>", ">instance</text>", ">requests (cumulative)</text>", ">tokens</text>", ">decision latency (ms)</text>"} {
		require.Contains(t, page, title)
	}
	// Hover data for every plot but the lanes, read by the inline script.
	require.Equal(t, plots-1, strings.Count(page, ` data-h="`))
	start := strings.Index(page, `<script type="application/json" id="rlv-hover">`)
	require.Positive(t, start)
	data := page[start+len(`<script type="application/json" id="rlv-hover">`):]
	data = data[:strings.Index(data, "</script>")]
	var hover []hoverPlot
	require.NoError(t, json.Unmarshal([]byte(data), &hover))
	require.Len(t, hover, plots-1)
	rate := hover[0]
	require.Equal(t, []string{"sent", "admitted", "rejected", "errors"}, []string{rate.Series[0].Name, rate.Series[1].Name, rate.Series[2].Name, rate.Series[3].Name})
	tr := d.Timeline.Traffic
	require.Equal(t, tr.perSecondOf(tr.All.Admitted[0]+tr.All.Rejected[0]+tr.All.Errors[0]), rate.Series[0].V[0])
	// The document's new parts.
	require.Contains(t, page, "<h3>Errors by status</h3>")
	require.Contains(t, page, "<td>no response</td><td class=\"num\">1</td>")
	require.Contains(t, page, "<h3>Not verified by this run</h3>")
	require.Contains(t, page, "<li><b>isolation</b>: only one tier</li>")
	// Jepsen-style lanes: one per instance, every request a bar with its
	// outcome and times in its tooltip.
	require.Equal(t, len(d.Timeline.Traffic.Instances), strings.Count(page, "<title>instance "))
	require.Contains(t, page, "<title>request 1, key free-a: admitted (200), sent 10ms, answered in 2ms</title>")
	require.Equal(t, len(tr.Ops.ID), strings.Count(page, "<title>request "))
}

func TestHTMLGateAndMeasured(t *testing.T) {
	_, _, d := fixture(t)
	gate := checks.Result{Name: checks.EvidenceCheck, Verdict: checks.Unknown, Summary: "100 of 100 requests got 404 from http://127.0.0.1:1/v1"}
	cal := checks.Result{Name: "calibration", Verdict: checks.Fail, Summary: "capacity is not as declared",
		Measured: []checks.Measurement{{Name: "capacity", Declared: "10", Measured: "11 <x>", Verdict: checks.Fail}}}
	d.Checks = append([]checks.Result{gate}, append(d.Checks, cal)...)
	var buf bytes.Buffer
	require.NoError(t, HTML{}.Render(&buf, d))
	page := buf.String()
	require.Contains(t, page, `<div class="card gate"><div class="k">evidence gate</div><div class="v"><span class="badge unknown">UNKNOWN</span> 100 of 100 requests got 404 from http://127.0.0.1:1/v1</div></div>`)
	require.Contains(t, page, `<tr class="gate"><td>evidence<span class="what">gate: no verdict without evidence</span></td><td><span class="badge unknown">UNKNOWN</span></td>`)
	require.Contains(t, page, "<h2>Measured against declared</h2>")
	require.Contains(t, page, `<tr><td>capacity</td><td>10</td><td>11 &lt;x&gt;</td><td><span class="badge fail">FAIL</span></td></tr>`)
}

func TestComparisonOverlays(t *testing.T) {
	c := fixtureComparison(t)
	var buf bytes.Buffer
	require.NoError(t, HTML{}.RenderComparison(&buf, c))
	page := buf.String()
	require.Contains(t, page, "<h2>Overlays</h2>")
	// Admitted, rejected and errors per second, admitted cumulative,
	// latency p99 and the busiest key: one line per implementation each.
	for _, class := range []string{`class="ln ov c0"`, `class="ln ov c1"`} {
		require.Equal(t, 6, strings.Count(page, class), class)
	}
	require.Equal(t, 1, strings.Count(page, `class="ln env ov"`))
	// Both columns share the fixture's fault window: it is shaded once per
	// overlay, not once per implementation.
	overlays := page[strings.Index(page, "<h2>Overlays</h2>"):strings.Index(page, `<section class="impl"`)]
	require.Equal(t, 6, strings.Count(overlays, `<rect class="fault"`))
	require.Contains(t, overlays, "faulty/&lt;other&gt;")
}
