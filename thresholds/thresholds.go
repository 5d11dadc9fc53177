// Package thresholds decides k6-style pass/fail criteria on a run —
// "latency.p99<50ms", "errors<1%", "phase.drain.admitted.count<=10" — from
// its history alone. A threshold is a metric of the whole run or of one
// phase, compared with a limit; its verdict is pass, fail, or unknown when
// the run has nothing to measure it on.
//
// thresholds is pure (no clock, no I/O) and imports only history (and
// internal/human to print numbers): the caller says how events are
// classified (the declared policy's statuses).
package thresholds

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Threshold is one parsed criterion. The zero value is not valid: build
// one with Parse.
type Threshold struct {
	// Expr is the criterion as written, without spaces.
	Expr string `json:"threshold"`
	// Phase scopes it to one phase of the plan ("" is the whole run).
	Phase string `json:"phase,omitempty"`
	// Metric is latency, requests, admitted, rejected or errors; Stat its
	// statistic (latency: p50 … p99.9, avg, med, min, max; the counts:
	// count, rate, share).
	Metric string `json:"metric"`
	Stat   string `json:"stat"`
	Op     string `json:"op"`
	// Limit is in the statistic's unit: ns (latency), a fraction in [0, 1]
	// (share), requests (count), requests per second (rate).
	Limit float64 `json:"limit"`
	// Source says where it was declared (a plan file, --threshold).
	Source string `json:"source,omitempty"`
}

// Metrics and statistics.
const (
	Latency  = "latency"
	Requests = "requests"
	Admitted = "admitted"
	Rejected = "rejected"
	Errors   = "errors"

	Count = "count"
	Rate  = "rate"
	Share = "share"
)

// Syntax is the grammar in one line, for error messages and help.
const Syntax = "[phase.NAME.]METRIC[.STAT] OP VALUE, e.g. latency.p99<50ms, errors<1%, admitted.rate>=5/s, phase.drain.admitted.count<=10 (METRIC: latency, requests, admitted, rejected, errors; OP: < <= > >= ==)"

var ops = []string{"<=", ">=", "==", "<", ">"}

// Parse reads one criterion (see Syntax).
func Parse(s string) (Threshold, error) {
	expr := strings.Join(strings.Fields(s), "")
	t := Threshold{Expr: expr}
	lhs, rhs := "", ""
	for _, op := range ops {
		if i := strings.Index(expr, op); i >= 0 {
			lhs, t.Op, rhs = expr[:i], op, expr[i+len(op):]
			break
		}
	}
	if t.Op == "" {
		return t, fmt.Errorf("threshold %q: no comparison; want %s", s, Syntax)
	}
	if rhs == "" {
		return t, fmt.Errorf("threshold %q: nothing to compare with after %s", s, t.Op)
	}
	if err := t.metric(lhs); err != nil {
		return t, fmt.Errorf("threshold %q: %w", s, err)
	}
	v, err := parseValue(t.Stat, rhs)
	if err != nil {
		return t, fmt.Errorf("threshold %q: %s: %w", s, t.Stat, err)
	}
	t.Limit = v
	return t, nil
}

// metric reads [phase.NAME.]METRIC[.STAT] into t.
func (t *Threshold) metric(lhs string) error {
	if rest, ok := strings.CutPrefix(lhs, "phase."); ok {
		// The phase name may hold dots: the metric is what follows its
		// last occurrence of a metric name.
		i := lastMetric(rest)
		if i <= 0 || rest[i-1] != '.' {
			return fmt.Errorf("want phase.NAME.METRIC, e.g. phase.drain.latency.p99")
		}
		t.Phase, lhs = rest[:i-1], rest[i:]
	}
	metric, stat, _ := strings.Cut(lhs, ".")
	t.Metric, t.Stat = metric, stat
	switch metric {
	case Latency:
		if stat == "" {
			return fmt.Errorf("latency needs a statistic: latency.p99, p50, p90, p95, p99.9, avg, med, min or max")
		}
		if _, ok := percentile(stat); !ok && stat != "avg" && stat != "med" && stat != "min" && stat != "max" {
			return fmt.Errorf("latency.%s: want p50, p90, p95, p99, p99.9 (any pNN), avg, med, min or max", stat)
		}
	case Requests:
		switch stat {
		case "":
			t.Stat = Count
		case Count, Rate:
		default:
			return fmt.Errorf("requests.%s: want requests.count or requests.rate", stat)
		}
	case Admitted, Rejected, Errors:
		switch stat {
		case "":
			t.Stat = Share
		case Count, Rate, Share:
		default:
			return fmt.Errorf("%s.%s: want %s (its share of the requests), %s.count or %s.rate", metric, stat, metric, metric, metric)
		}
	default:
		return fmt.Errorf("unknown metric %q: want latency, requests, admitted, rejected or errors (or phase.NAME.METRIC)", lhs)
	}
	return nil
}

// lastMetric is the index in s of the last metric name that starts a
// dot-separated part, or -1.
func lastMetric(s string) int {
	best := -1
	for _, m := range []string{Latency, Requests, Admitted, Rejected, Errors} {
		for i := 0; i < len(s); {
			j := strings.Index(s[i:], m)
			if j < 0 {
				break
			}
			at := i + j
			end := at + len(m)
			if (at == 0 || s[at-1] == '.') && (end == len(s) || s[end] == '.') && at > best {
				best = at
			}
			i = at + 1
		}
	}
	return best
}

// percentile reads pNN (p99, p99.9) as a fraction.
func percentile(stat string) (float64, bool) {
	n, ok := strings.CutPrefix(stat, "p")
	if !ok {
		return 0, false
	}
	q, err := strconv.ParseFloat(n, 64)
	if err != nil || !(q > 0 && q <= 100) {
		return 0, false
	}
	return q / 100, true
}

// Bounds on a limit. Each is far beyond any real run, and small enough
// that the limit converts to the statistic's integer type and prints
// (a latency of 2^63 ns became math.MinInt64 and overflowed the stack of
// the duration printer).
const (
	// MaxLatency is the largest latency limit: a day.
	MaxLatency = 24 * time.Hour
	// MaxCount is the largest count limit: 2^53, the largest whole number
	// a float64 holds exactly.
	MaxCount = 1 << 53
	// MaxRate is the largest rate limit, in requests per second.
	MaxRate = 1e9
)

// parseValue reads a limit in the unit of stat. NaN and infinities are
// refused everywhere: every comparison with NaN is false, so a NaN limit
// would decide a threshold by its operator alone.
func parseValue(stat, s string) (float64, error) {
	switch stat {
	case Share:
		if n, ok := strings.CutSuffix(s, "%"); ok {
			v, err := strconv.ParseFloat(n, 64)
			if err != nil || !(v >= 0 && v <= 100) {
				return 0, fmt.Errorf("%q: want a percentage in 0 … 100%%", s)
			}
			return v / 100, nil
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || !(v >= 0 && v <= 1) {
			return 0, fmt.Errorf("%q: want a percentage such as 1%% or a fraction in [0, 1]", s)
		}
		return v, nil
	case Count:
		v, err := strconv.ParseInt(strings.ReplaceAll(strings.ReplaceAll(s, ",", ""), "_", ""), 10, 64)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("%q: want a whole number of requests", s)
		}
		if v > MaxCount {
			return 0, fmt.Errorf("%q: want at most %d requests", s, int64(MaxCount))
		}
		return float64(v), nil
	case Rate:
		n, per := s, time.Second
		for suffix, d := range map[string]time.Duration{"/s": time.Second, "/min": time.Minute, "/m": time.Minute, "/h": time.Hour} {
			if x, ok := strings.CutSuffix(s, suffix); ok {
				n, per = x, d
			}
		}
		v, err := strconv.ParseFloat(n, 64)
		if err != nil || !(v >= 0 && v/per.Seconds() <= MaxRate) {
			return 0, fmt.Errorf("%q: want a rate such as 5/s, 300/min or 5 (per second), at most %g/s", s, MaxRate)
		}
		return v / per.Seconds(), nil
	}
	// Latency: a duration; a bare number is milliseconds, as in k6.
	bad := fmt.Errorf("%q: want a duration such as 50ms or 1.5s, at most %s (a bare number is milliseconds)", s, MaxLatency)
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		if !(v >= 0 && v*float64(time.Millisecond) <= float64(MaxLatency)) {
			return 0, bad
		}
		return v * float64(time.Millisecond), nil
	}
	// time.ParseDuration refuses an overflow as an invalid duration.
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > MaxLatency {
		return 0, bad
	}
	return float64(d), nil
}

// Key names what the threshold measures: [phase.NAME.]METRIC.STAT.
func (t Threshold) Key() string {
	k := t.Metric + "." + t.Stat
	if t.Phase != "" {
		k = "phase." + t.Phase + "." + k
	}
	return k
}

// holds reports whether observed satisfies the threshold.
func (t Threshold) holds(observed float64) bool {
	switch t.Op {
	case "<":
		return observed < t.Limit
	case "<=":
		return observed <= t.Limit
	case ">":
		return observed > t.Limit
	case ">=":
		return observed >= t.Limit
	}
	return observed == t.Limit
}

// CheckPhases returns an error naming the first threshold scoped to a
// phase not among phases.
func CheckPhases(ts []Threshold, phases []string) error {
	known := map[string]bool{}
	for _, p := range phases {
		known[p] = true
	}
	for _, t := range ts {
		if t.Phase != "" && !known[t.Phase] {
			return fmt.Errorf("threshold %s: no phase %q (phases: %s)", t.Expr, t.Phase, strings.Join(phases, ", "))
		}
	}
	return nil
}
