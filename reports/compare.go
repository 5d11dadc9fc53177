package reports

import (
	"fmt"
	"math"
	"strings"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/internal/human"
)

// ComparisonSchema names the version of the comparison document.
const ComparisonSchema = "rlverify.comparison/v1"

// Comparison is several implementations judged under one plan, side by
// side: what `rlverify compare` writes (as JSON, and in every other format).
// Build one with Compare.
type Comparison struct {
	Schema string `json:"schema"`
	Plan   string `json:"plan"`
	// Verdict merges the columns' verdicts (fail > unknown > pass).
	Verdict checks.Verdict `json:"verdict"`
	// Checks are the row names: every check of any column, in the order
	// they first appear, then "threshold EXPR" for every threshold.
	Checks  []string `json:"checks"`
	Columns []Column `json:"columns"`
}

// Column is one implementation.
type Column struct {
	// Name of the implementation (a limiter name, a target).
	Name string `json:"name"`
	// Metrics are derived from Document by Compare.
	Metrics Metrics `json:"metrics"`
	// Document is the implementation's full result.
	Document *Document `json:"document"`
}

// Metrics are the comparison's figure rows for one column. A nil pointer
// means "not measured in this run".
type Metrics struct {
	Verdict checks.Verdict `json:"verdict"`
	// Admitted requests in the run.
	Admitted int64 `json:"admitted"`
	// OverrunPct is the worst admitted/allowed ratio in oversell evidence
	// (or its max_overrun figure) − 1, in percent, 0 when nothing was over.
	// Without an oversell result it is the regions check's global overrun
	// over one quota (global_overrun_pct). Nil when neither ran.
	OverrunPct *float64 `json:"overrun_pct,omitempty"`
	// RetryAfterErrorS is the retry-after check's retry_after_max_error_s
	// figure: the largest (advised − needed) wait, seconds.
	RetryAfterErrorS *float64 `json:"retry_after_error_s,omitempty"`
	// Decisions, LatencyP50 and LatencyP99 (ns) are decision latency over
	// admitted and rejected requests (Recv − Sent).
	Decisions  int64 `json:"decisions"`
	LatencyP50 int64 `json:"latency_p50"`
	LatencyP99 int64 `json:"latency_p99"`
}

// Compare builds the comparison of cols under plan, computing each column's
// Metrics from its Document. cols is copied; their Documents are shared.
func Compare(plan string, cols []Column) *Comparison {
	c := &Comparison{Schema: ComparisonSchema, Plan: plan, Verdict: checks.Skip}
	seen := map[string]bool{}
	for _, col := range cols {
		if col.Document != nil {
			col.Metrics = metricsOf(col.Document)
			c.Verdict = checks.Merge(c.Verdict, col.Document.Verdict)
			for _, r := range col.Document.Checks {
				if !seen[r.Name] {
					seen[r.Name] = true
					c.Checks = append(c.Checks, r.Name)
				}
			}
			for _, r := range col.Document.Thresholds {
				if name := thresholdRow + r.Expr; !seen[name] {
					seen[name] = true
					c.Checks = append(c.Checks, name)
				}
			}
		}
		c.Columns = append(c.Columns, col)
	}
	if c.Verdict == checks.Skip {
		c.Verdict = checks.Pass
	}
	return c
}

func metricsOf(d *Document) Metrics {
	m := Metrics{Verdict: d.Verdict, Admitted: d.Stats.Admitted}
	if d.Latency != nil {
		m.Decisions, m.LatencyP50, m.LatencyP99 = d.Latency.Decisions, d.Latency.P50, d.Latency.P99
	}
	if r := d.Check("oversell"); r != nil && r.Verdict != checks.Skip {
		ratio := r.Figures["max_overrun"]
		for _, ev := range r.Evidence {
			if ev.Bound > 0 {
				ratio = math.Max(ratio, ev.Observed/ev.Bound)
			}
		}
		pct := math.Max(0, ratio-1) * 100
		m.OverrunPct = &pct
	}
	if r := d.Check("regions"); m.OverrunPct == nil && r != nil && r.Verdict != checks.Skip {
		if v, ok := r.Figures["global_overrun_pct"]; ok {
			m.OverrunPct = &v
		}
	}
	if r := d.Check("retry-after"); r != nil {
		if v, ok := r.Figures["retry_after_max_error_s"]; ok {
			m.RetryAfterErrorS = &v
		}
	}
	return m
}

// Check returns the result of the check called name, or nil.
func (d *Document) Check(name string) *checks.Result {
	for i := range d.Checks {
		if d.Checks[i].Name == name {
			return &d.Checks[i]
		}
	}
	return nil
}

// verdictOf returns the column's verdict of check name, "" when it did not run.
func (col *Column) verdictOf(name string) checks.Verdict {
	if col.Document == nil {
		return ""
	}
	if r := col.Document.Check(name); r != nil {
		return r.Verdict
	}
	if expr, ok := strings.CutPrefix(name, thresholdRow); ok {
		for _, r := range col.Document.Thresholds {
			if r.Expr == expr {
				return checks.Verdict(r.Verdict)
			}
		}
	}
	return ""
}

// thresholdRow starts the name of a threshold's row in a comparison.
const thresholdRow = "threshold "

// comparisonRows are the figure rows under the check rows, as text cells.
func comparisonRows(c *Comparison) (names []string, cells [][]string) {
	names = []string{"admitted", "overrun", "Retry-After error", "p50 decision latency", "p99 decision latency"}
	cells = make([][]string, len(names))
	for _, col := range c.Columns {
		m := col.Metrics
		cells[0] = append(cells[0], human.Count(int64(m.Admitted)))
		cells[1] = append(cells[1], pctCell(m.OverrunPct))
		if m.RetryAfterErrorS != nil {
			cells[2] = append(cells[2], fmt.Sprintf("%+.3fs", *m.RetryAfterErrorS))
		} else {
			cells[2] = append(cells[2], "-")
		}
		if m.Decisions > 0 {
			cells[3] = append(cells[3], dur(m.LatencyP50))
			cells[4] = append(cells[4], dur(m.LatencyP99))
		} else {
			cells[3] = append(cells[3], "-")
			cells[4] = append(cells[4], "-")
		}
	}
	return names, cells
}

func pctCell(p *float64) string {
	if p == nil {
		return "-"
	}
	if *p == 0 {
		return "0%"
	}
	return fmt.Sprintf("+%.1f%%", *p)
}
