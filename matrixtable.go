package rlverify

import (
	"fmt"
	"io"
	"strings"

	"github.com/rlverify/rlverify/checks"
)

// Word is the result in a word: ok, NOT AS EXPECTED or ERROR, with why.
func (r MatrixResult) Word() string {
	switch {
	case r.Err != nil:
		return "ERROR: " + r.Err.Error()
	case r.OK():
		return "ok"
	}
	return "NOT AS EXPECTED: " + strings.Join(r.Problems(), "; ")
}

// WriteMatrix writes the mutation matrix's results as a Markdown table.
func WriteMatrix(w io.Writer, rs []MatrixResult) {
	fmt.Fprintln(w, "| plan | store | correct limiter | verdict | limiter with a defect | root cause (fails) | explained by it | what the faulty run showed |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, r := range rs {
		store := "memory"
		if r.Row.Store != "" {
			store = r.Row.Store
		}
		if r.Row.Instances > 1 {
			store += fmt.Sprintf(", %d instances", r.Row.Instances)
		}
		ev := strings.ReplaceAll(r.BadEvidence, "|", "/")
		if r.Err != nil {
			ev = "error: " + strings.ReplaceAll(r.Err.Error(), "|", "/")
		} else if !r.OK() {
			ev = "NOT AS EXPECTED: " + strings.ReplaceAll(strings.Join(r.Problems(), "; "), "|", "/")
		}
		if len(ev) > 160 {
			ev = ev[:157] + "…"
		}
		good, bad := r.Row.Good, r.Row.Bad
		if r.Row.GoodSetting != "" {
			good += " (" + r.Row.GoodSetting + ")"
			bad += " (" + r.Row.BadSetting + ")"
		}
		goodV := "pass"
		for _, x := range r.Good {
			if x.Verdict != checks.Pass && x.Verdict != checks.Skip {
				goodV = string(x.Verdict) + " (" + x.Name + ")"
			}
		}
		root := r.Row.Root + ": " + string(ResultVerdict(r.Bad, r.Row.Root))
		var expl []string
		for _, e := range r.Row.Explained {
			expl = append(expl, e+": "+string(ResultVerdict(r.Bad, e)))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Row.Plan, store, good, goodV, bad, root, dashIfEmpty(strings.Join(expl, ", ")), ev)
	}
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
