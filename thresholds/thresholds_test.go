package thresholds

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/history"
)

func TestParse(t *testing.T) {
	ms := float64(time.Millisecond)
	for _, tc := range []struct {
		in                  string
		phase, metric, stat string
		op                  string
		limit               float64
	}{
		{"latency.p99<50ms", "", Latency, "p99", "<", 50 * ms},
		{" latency.p99.9 <= 1.5s ", "", Latency, "p99.9", "<=", 1500 * ms},
		{"latency.avg<200", "", Latency, "avg", "<", 200 * ms},
		{"errors<1%", "", Errors, Share, "<", 0.01},
		{"errors.share<0.05", "", Errors, Share, "<", 0.05},
		{"admitted.rate>=5/s", "", Admitted, Rate, ">=", 5},
		{"admitted.rate>=300/min", "", Admitted, Rate, ">=", 5},
		{"rejected.count==90", "", Rejected, Count, "==", 90},
		{"requests>1,000", "", Requests, Count, ">", 1000},
		{"requests.rate>100", "", Requests, Rate, ">", 100},
		{"phase.drain.admitted.count<=10", "drain", Admitted, Count, "<=", 10},
		{"phase.2-burst.latency.max<1s", "2-burst", Latency, "max", "<", 1000 * ms},
		{"phase.v1.errors.phase.errors<1%", "v1.errors.phase", Errors, Share, "<", 0.01},
	} {
		t.Run(tc.in, func(t *testing.T) {
			th, err := Parse(tc.in)
			require.NoError(t, err)
			require.Equal(t, tc.phase, th.Phase)
			require.Equal(t, tc.metric, th.Metric)
			require.Equal(t, tc.stat, th.Stat)
			require.Equal(t, tc.op, th.Op)
			require.InDelta(t, tc.limit, th.Limit, 1e-9)
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"latency.p99", "no comparison"},
		{"latency.p99<", "nothing to compare"},
		{"latency<50ms", "latency needs a statistic"},
		{"latency.p101<5ms", "want p50"},
		{"latency.p99<fast", "want a duration"},
		{"errors<120%", "percentage in 0 … 100%"},
		{"errors<2", "fraction in [0, 1]"},
		{"admitted.count<1.5", "whole number"},
		{"admitted.rate>x/s", "want a rate"},
		{"latnecy.p99<5ms", `unknown metric "latnecy.p99"`},
		{"requests.share<1", "requests.count or requests.rate"},
		{"phase.latency.p99<5ms", "want phase.NAME.METRIC"},
		{"errors.ratio<1%", "errors.count or errors.rate"},
		// Out of range, NaN and infinities (issue 26 item 13: a latency
		// of 2^63-1 ns overflowed the stack of the printer, NaN% was
		// accepted and decided a threshold by its operator alone).
		{"latency.p99<9223372036854775807ns", "at most 24h0m0s"},
		{"latency.p99<99999999999999999999ns", "at most 24h0m0s"},
		{"latency.p99<25h", "at most 24h0m0s"},
		{"latency.p99<1e308", "at most 24h0m0s"},
		{"latency.p99<Inf", "at most 24h0m0s"},
		{"latency.p99<NaN", "at most 24h0m0s"},
		{"latency.p99<-5", "want a duration such as"},
		{"errors<NaN%", "percentage in 0 … 100%"},
		{"errors<NaN", "fraction in [0, 1]"},
		{"errors<Inf%", "percentage in 0 … 100%"},
		{"admitted.rate<NaN/s", "want a rate"},
		{"admitted.rate<Inf/s", "want a rate"},
		{"admitted.rate<1e10/s", "at most 1e+09/s"},
		{"requests.count<9223372036854775807", "at most 9007199254740992 requests"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			_, err := Parse(tc.in)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
			require.Contains(t, err.Error(), tc.in, "the error names the threshold")
		})
	}
}

// run is a history of two phases: "drain", 20 requests of which 10
// admitted (latency 1ms … 10ms) and 10 rejected (2ms each) over 100ms, and
// "steady", 10 requests over 1s with 1 error (no response) and 9 admitted
// at 40ms. The run lasts 2s.
func run() *history.History {
	h := &history.History{End: &history.End{Elapsed: int64(2 * time.Second)}}
	add := func(phase string, sent, lat time.Duration, status int) {
		h.Events = append(h.Events, history.Event{ID: uint64(len(h.Events) + 1), Phase: phase, Sent: int64(sent), Recv: int64(sent + lat), Status: status})
	}
	for i := 0; i < 10; i++ {
		add("drain", 0, time.Duration(i+1)*time.Millisecond, 200)
		add("drain", 0, 2*time.Millisecond, 429)
	}
	for i := 0; i < 9; i++ {
		add("steady", time.Second+time.Duration(i)*100*time.Millisecond, 40*time.Millisecond, 200)
	}
	add("steady", 1900*time.Millisecond, 0, 0)
	h.Phases = []history.Phase{
		{Name: "drain", Start: 0, End: int64(100 * time.Millisecond), Requests: 20},
		{Name: "steady", Start: int64(time.Second), End: int64(2 * time.Second), Requests: 10},
	}
	return h
}

func TestEvaluate(t *testing.T) {
	h := run()
	for _, tc := range []struct {
		in       string
		verdict  Verdict
		observed float64
		summary  string
	}{
		{"phase.drain.admitted.count<=10", Pass, 10, "10 admitted in phase drain; threshold <= 10"},
		{"phase.drain.admitted.count<10", Fail, 10, "10 admitted in phase drain; threshold < 10"},
		{"phase.drain.latency.max<=10ms", Pass, float64(10 * time.Millisecond), "max latency 10ms over 20 decision(s) in phase drain; threshold <= 10ms"},
		{"phase.drain.latency.p50<2ms", Fail, float64(2 * time.Millisecond), "p50 latency 2ms"},
		{"latency.p99<50ms", Pass, float64(40 * time.Millisecond), "over 29 decision(s); threshold < 50ms"},
		{"latency.p99<40ms", Fail, float64(40 * time.Millisecond), ""},
		{"errors<1%", Fail, 1.0 / 30, "errors 3.33% (1 of 30 requests); threshold < 1%"},
		{"phase.drain.errors<1%", Pass, 0, "errors 0% (0 of 20 requests) in phase drain"},
		{"phase.steady.errors<=10%", Pass, 0.1, ""},
		{"phase.drain.admitted.rate>=100/s", Pass, 100, "admitted 100/s (10 over 100ms) in phase drain; threshold >= 100/s"},
		{"admitted.rate>=10/s", Fail, 9.5, "admitted 9.5/s (19 over 2s); threshold >= 10/s"},
		{"requests.count==30", Pass, 30, ""},
		{"phase.drain.rejected>50%", Fail, 0.5, ""},
		{"phase.steady.latency.avg<50ms", Pass, float64(40 * time.Millisecond), ""},
	} {
		t.Run(tc.in, func(t *testing.T) {
			th, err := Parse(tc.in)
			require.NoError(t, err)
			rs := Evaluate(h, (*history.Event).Outcome, []Threshold{th})
			require.Len(t, rs, 1)
			r := rs[0]
			require.Equal(t, tc.verdict, r.Verdict, r.Summary)
			require.InDelta(t, tc.observed, r.Observed, 1e-9)
			require.Contains(t, r.Summary, tc.summary)
			require.Equal(t, th.Key(), r.Key)
		})
	}
}

func TestEvaluateUnknownWithoutData(t *testing.T) {
	h := run()
	h.Events = h.Events[:0]
	h.Phases = append(h.Phases, history.Phase{Name: "pause", Start: 0, End: int64(time.Second)})
	for _, tc := range []struct{ in, why string }{
		{"latency.p99<50ms", "no admitted or rejected request to measure latency on"},
		{"errors<1%", "no requests"},
		{"phase.pause.latency.p50<1ms", "in phase pause"},
		{"phase.later.errors<1%", "phase later is not in the history"},
	} {
		th, err := Parse(tc.in)
		require.NoError(t, err)
		r := Evaluate(h, (*history.Event).Outcome, []Threshold{th})[0]
		require.Equal(t, Unknown, r.Verdict, tc.in)
		require.Contains(t, r.Summary, tc.why, tc.in)
	}
}

func TestCheckPhases(t *testing.T) {
	a, _ := Parse("phase.drain.errors<1%")
	b, _ := Parse("phase.drian.errors<1%")
	c, _ := Parse("errors<1%")
	require.NoError(t, CheckPhases([]Threshold{a, c}, []string{"drain", "steady"}))
	err := CheckPhases([]Threshold{a, b}, []string{"drain", "steady"})
	require.EqualError(t, err, `threshold phase.drian.errors<1%: no phase "drian" (phases: drain, steady)`)
}

// FuzzParse: Parse never panics; an accepted threshold has a finite limit
// in its statistic's range that formats (Format) without panicking, and
// parses again from its Expr to the same limit.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"latency.p99<50ms", "errors<1%", "admitted.rate>=5/s", "phase.drain.admitted.count<=10",
		"latency.p99<9223372036854775807ns", "errors<NaN%", "latency.avg<1e308", "requests.rate>300/min", "rejected.share<0.5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		th, err := Parse(s)
		if err != nil {
			return
		}
		require.False(t, math.IsNaN(th.Limit) || math.IsInf(th.Limit, 0), "%q → %v", s, th.Limit)
		require.GreaterOrEqual(t, th.Limit, 0.0)
		switch {
		case th.Metric == Latency:
			require.LessOrEqual(t, th.Limit, float64(MaxLatency))
		case th.Stat == Share:
			require.LessOrEqual(t, th.Limit, 1.0)
		case th.Stat == Count:
			require.LessOrEqual(t, th.Limit, float64(MaxCount))
		case th.Stat == Rate:
			require.LessOrEqual(t, th.Limit, MaxRate)
		}
		require.NotEmpty(t, Format(th, th.Limit))
		again, err := Parse(th.Expr)
		require.NoError(t, err, "%q parsed, its Expr %q did not", s, th.Expr)
		require.Equal(t, th.Limit, again.Limit)
	})
}
