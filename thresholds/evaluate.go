package thresholds

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/internal/human"
)

// Verdict of one threshold: the same words as a check's.
type Verdict string

// Verdicts.
const (
	Pass    Verdict = "pass"
	Fail    Verdict = "fail"
	Unknown Verdict = "unknown"
)

// Result is one threshold judged on a history.
type Result struct {
	Threshold
	// Key is Threshold.Key(), for readers of the JSON.
	Key     string  `json:"key"`
	Verdict Verdict `json:"verdict"`
	// Observed is the measured value in the limit's unit (see Limit); 0
	// when the verdict is unknown.
	Observed float64 `json:"observed"`
	// Summary is one line for a table: what was measured, on how many
	// requests, against the limit.
	Summary string `json:"summary"`
}

// Classify says whether an event was admitted, rejected or an error under
// the declared response contract.
type Classify func(*history.Event) history.Outcome

// Evaluate judges each threshold on h. An event's latency is Recv − Sent;
// it counts for the latency statistics when the event was admitted or
// rejected (a decision). Rates are per second of the scope's span: the
// phase record's, else its events' (first send to last receive); the
// run's is its length (the end record's, else the last receive).
func Evaluate(h *history.History, classify Classify, ts []Threshold) []Result {
	out := make([]Result, 0, len(ts))
	scopes := map[string]*scope{}
	for _, t := range ts {
		sc, ok := scopes[t.Phase]
		if !ok {
			sc = newScope(h, classify, t.Phase)
			scopes[t.Phase] = sc
		}
		out = append(out, sc.judge(t))
	}
	return out
}

// scope is what the thresholds of the run or of one phase are judged on.
type scope struct {
	phase     string
	requests  int64
	outcomes  map[history.Outcome]int64
	latencies []int64 // sorted
	span      int64   // ns
	// missing: the phase is not in the history.
	missing bool
}

func newScope(h *history.History, classify Classify, phase string) *scope {
	s := &scope{phase: phase, outcomes: map[history.Outcome]int64{}}
	first, last := int64(math.MaxInt64), int64(0)
	for i := range h.Events {
		e := &h.Events[i]
		if phase != "" && e.Phase != phase {
			continue
		}
		s.requests++
		o := classify(e)
		s.outcomes[o]++
		if o == history.Admitted || o == history.Rejected {
			s.latencies = append(s.latencies, e.Recv-e.Sent)
		}
		first, last = min(first, e.Sent), max(last, e.Recv)
	}
	slices.Sort(s.latencies)
	switch {
	case phase == "" && h.End != nil:
		s.span = h.End.Elapsed
	case phase == "":
		s.span = max(last, 0)
	default:
		s.missing = true
		for _, ph := range h.Phases {
			if ph.Name == phase {
				s.span, s.missing = ph.End-ph.Start, false
			}
		}
		if s.span <= 0 && s.requests > 0 {
			s.span = last - first
		}
		if s.requests > 0 {
			s.missing = false
		}
	}
	return s
}

func (s *scope) where() string {
	if s.phase == "" {
		return ""
	}
	return " in phase " + s.phase
}

func (s *scope) judge(t Threshold) Result {
	r := Result{Threshold: t, Key: t.Key(), Verdict: Unknown}
	if s.missing {
		r.Summary = fmt.Sprintf("phase %s is not in the history (the run stopped before it?)", s.phase)
		return r
	}
	var what string
	switch {
	case t.Metric == Latency:
		if len(s.latencies) == 0 {
			r.Summary = "no admitted or rejected request" + s.where() + " to measure latency on"
			return r
		}
		r.Observed = s.latency(t.Stat)
		what = fmt.Sprintf("%s latency %s over %s decision(s)%s", t.Stat, Format(t, r.Observed), human.Count(int64(len(s.latencies))), s.where())
	default:
		n := s.count(t.Metric)
		switch t.Stat {
		case Count:
			r.Observed = float64(n)
			what = fmt.Sprintf("%s %s%s", human.Count(n), t.Metric, s.where())
		case Share:
			if s.requests == 0 {
				r.Summary = "no requests" + s.where()
				return r
			}
			r.Observed = float64(n) / float64(s.requests)
			what = fmt.Sprintf("%s %s (%s of %s requests)%s", t.Metric, Format(t, r.Observed), human.Count(n), human.Count(s.requests), s.where())
		case Rate:
			if s.span <= 0 {
				r.Summary = "no time span" + s.where() + " to measure a rate over"
				return r
			}
			r.Observed = float64(n) / time.Duration(s.span).Seconds()
			what = fmt.Sprintf("%s %s (%s over %s)%s", t.Metric, Format(t, r.Observed), human.Count(n), time.Duration(s.span).Round(time.Millisecond), s.where())
		}
	}
	r.Verdict = Fail
	if t.holds(r.Observed) {
		r.Verdict = Pass
	}
	r.Summary = fmt.Sprintf("%s; threshold %s %s", what, t.Op, Format(t, t.Limit))
	return r
}

func (s *scope) count(metric string) int64 {
	switch metric {
	case Admitted:
		return s.outcomes[history.Admitted]
	case Rejected:
		return s.outcomes[history.Rejected]
	case Errors:
		return s.requests - s.outcomes[history.Admitted] - s.outcomes[history.Rejected]
	}
	return s.requests
}

// latency is the statistic stat of the sorted latencies (non-empty), in ns.
func (s *scope) latency(stat string) float64 {
	l := s.latencies
	switch stat {
	case "min":
		return float64(l[0])
	case "max":
		return float64(l[len(l)-1])
	case "avg":
		var sum float64
		for _, x := range l {
			sum += float64(x)
		}
		return sum / float64(len(l))
	case "med":
		return float64(rank(l, 0.5))
	}
	q, _ := percentile(stat)
	return float64(rank(l, q))
}

// rank is the nearest-rank percentile q of sorted l (non-empty).
func rank(l []int64, q float64) int64 {
	i := int(math.Ceil(q*float64(len(l)))) - 1
	return l[min(max(i, 0), len(l)-1)]
}

// Format writes v in t's unit: 4.2ms, 1.5%, 11,870, 5/s.
func Format(t Threshold, v float64) string {
	switch {
	case t.Metric == Latency:
		return human.Duration(time.Duration(math.Round(v)))
	case t.Stat == Share:
		return trim(strconv.FormatFloat(v*100, 'f', 2, 64)) + "%"
	case t.Stat == Rate:
		if v < 1000 {
			return trim(strconv.FormatFloat(v, 'f', 2, 64)) + "/s"
		}
		return human.Rate(v)
	}
	return human.Count(int64(v))
}

func trim(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}
