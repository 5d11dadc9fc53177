package reports

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/thresholds"
)

func TestHeadlineSaysWhy(t *testing.T) {
	pass := func(figs map[string]float64) checks.Result {
		return checks.Result{Name: "oversell", Verdict: checks.Pass, Summary: "ok", Figures: figs}
	}
	failed := thresholds.Result{Threshold: thresholds.Threshold{Expr: "latency.p99<1ms"}, Verdict: thresholds.Fail, Summary: "p99 latency 3ms over 20 decision(s); threshold < 1ms"}
	for _, tc := range []struct {
		name string
		doc  Document
		want string
	}{
		{"a failed threshold is named", Document{Checks: []checks.Result{pass(nil)}, Thresholds: []thresholds.Result{failed}},
			"threshold latency.p99<1ms failed: p99 latency 3ms over 20 decision(s); threshold < 1ms"},
		{"a defect and a failed threshold", Document{Checks: []checks.Result{{Name: "oversell", Verdict: checks.Fail}}, Thresholds: []thresholds.Result{failed},
			Defects: []checks.Defect{{Check: "oversell", Summary: "too many"}}},
			"1 defect: oversell: too many; threshold latency.p99<1ms failed: p99 latency 3ms over 20 decision(s); threshold < 1ms"},
		{"the edge effect a fixed window declares", Document{Checks: []checks.Result{pass(map[string]float64{"boundary_ratio": 2, "worst_rolling_window": 20})}},
			"1 checks passed, 0 had nothing to judge; edge effect: 20 admitted within one window's length across a window edge, 2× the window's count (declared behaviour of a fixed window)"},
		{"no edge effect to speak of", Document{Checks: []checks.Result{pass(map[string]float64{"boundary_ratio": 1, "worst_rolling_window": 10})}},
			"1 checks passed, 0 had nothing to judge"},
		{"an unknown threshold", Document{Checks: []checks.Result{pass(nil)}, Thresholds: []thresholds.Result{{Threshold: thresholds.Threshold{Expr: "errors<1%"}, Verdict: thresholds.Unknown, Summary: "no requests"}}},
			"threshold errors<1% could not be judged: no requests"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Headline(&tc.doc))
		})
	}
}

func TestJUnitClassnameHasNoDotsFromTheTarget(t *testing.T) {
	for _, tc := range []struct{ plan, column, want string }{
		{"concurrent-burst", "", "rlverify.concurrent-burst"},
		{"concurrent-burst", "http://127.0.0.1:8080/v1/nope", "rlverify.concurrent-burst.http_127_0_0_1_8080_v1_nope"},
		{"my.plan", "x/time/rate", "rlverify.my_plan.x_time_rate"},
		{"-", "…", "rlverify.-._"},
	} {
		d := &Document{Run: history.Run{Plan: tc.plan, Target: "http://127.0.0.1:8080/v1/nope"}, Checks: []checks.Result{{Name: "oversell", Verdict: checks.Pass}}}
		s := junitSuiteOf(d, tc.column)
		require.Equal(t, tc.want, s.Cases[0].Classname)
	}
}
