package reports

import (
	"fmt"
	"strings"
	"time"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/internal/human"
)

// Second counts what happened in one second of a run (by send time).
type Second struct {
	// T is the second's start, in whole seconds since the run start.
	T        int   `json:"t"`
	Admitted int64 `json:"admitted"`
	Rejected int64 `json:"rejected"`
	Errors   int64 `json:"errors"`
	// Fault names the faults active during any part of the second.
	Fault string `json:"fault,omitempty"`
}

// MaxSeconds bounds the per-second table (longer runs are not tabulated).
const MaxSeconds = 600

// perSecond tabulates a history that has fault windows, second by second,
// so a reader sees the outage and the failure mode's answer in it. It is
// nil for runs without faults or longer than MaxSeconds.
func perSecond(h *history.History, elapsed int64, oc []history.Outcome) []Second {
	if len(h.Faults) == 0 || elapsed <= 0 || elapsed > int64(MaxSeconds)*int64(time.Second) {
		return nil
	}
	n := int(elapsed/int64(time.Second)) + 1
	out := make([]Second, n)
	for i := range out {
		out[i].T = i
	}
	for i := range h.Events {
		e := &h.Events[i]
		s := int(e.Sent / int64(time.Second))
		if s < 0 || s >= n {
			continue
		}
		switch oc[i] {
		case history.Admitted:
			out[s].Admitted++
		case history.Rejected:
			out[s].Rejected++
		default:
			out[s].Errors++
		}
	}
	markFaults(out, h.Faults, elapsed)
	return out
}

// markFaults names in each second of out the faults active during it.
func markFaults(out []Second, faults []history.Fault, elapsed int64) {
	n := len(out)
	for _, f := range faults {
		end := f.End
		if end == 0 {
			end = elapsed
		}
		for s := int(f.Start / int64(time.Second)); s <= int(end/int64(time.Second)) && s < n; s++ {
			if s >= 0 && !strings.Contains(out[s].Fault, f.Kind) {
				if out[s].Fault != "" {
					out[s].Fault += ","
				}
				out[s].Fault += f.Kind
			}
		}
	}
}

// perSecondRows renders columns of per-second tables side by side as rows
// of cells: "t", then "admitted/rejected/errors" per column, then faults.
func perSecondRows(cols [][]Second) (head []string, rows [][]string) {
	n := 0
	for _, c := range cols {
		n = max(n, len(c))
	}
	if n == 0 {
		return nil, nil
	}
	for i := 0; i < n; i++ {
		row := []string{fmt.Sprintf("%ds", i)}
		var faults []string
		for _, c := range cols {
			if i >= len(c) {
				row = append(row, "-")
				continue
			}
			s := c[i]
			row = append(row, human.Count(int64(s.Admitted))+"/"+human.Count(int64(s.Rejected))+"/"+human.Count(int64(s.Errors)))
			if s.Fault != "" && !contains(faults, s.Fault) {
				faults = append(faults, s.Fault)
			}
		}
		row = append(row, strings.Join(faults, ","))
		rows = append(rows, row)
	}
	return []string{"second", "admitted/rejected/errors", "fault"}, rows
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
