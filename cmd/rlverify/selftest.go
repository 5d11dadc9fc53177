package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/checks"
)

func selftestCmd() *cobra.Command {
	var only string
	c := &cobra.Command{
		Use:   "selftest",
		Short: "Prove every checker: each plan against a limiter that keeps the invariant (pass) and one that breaks it (fail)",
		Long: `Run the mutation matrix on the embedded environment: for every checker, the
same plan against a correct reference limiter (the checker must pass) and the
faulty variant written to break that checker's invariant (it must fail).
Prints the matrix as Markdown (the README's copy is produced by this command)
and exits 1 if any row is not as expected. Needs redis-server on PATH for the
rows marked redis (an in-process emulation is used otherwise).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			results, err := rlverify.Selftest(c.Context(), rlverify.SelftestOptions{Check: only, OnRow: func(r rlverify.MatrixResult) {
				fmt.Fprintf(c.ErrOrStderr(), "selftest: %-16s %-17s %-32s %s\n", r.Row.Root, r.Row.Plan, r.Row.Bad, okWord(r))
			}})
			if err != nil {
				return fromLib(err)
			}
			writeMatrix(c.OutOrStdout(), results)
			for _, r := range results {
				if !r.OK() {
					return &exitError{code: ExitFail}
				}
			}
			return nil
		},
	}
	c.Flags().StringVar(&only, "check", "", "run only the rows whose defect is rooted at this check")
	return c
}

func okWord(r rlverify.MatrixResult) string {
	switch {
	case r.Err != nil:
		return "ERROR: " + r.Err.Error()
	case r.OK():
		return "ok"
	}
	return "NOT AS EXPECTED: " + strings.Join(r.Problems(), "; ")
}

func writeMatrix(w io.Writer, rs []rlverify.MatrixResult) {
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
		root := r.Row.Root + ": " + string(rlverify.ResultVerdict(r.Bad, r.Row.Root))
		var expl []string
		for _, e := range r.Row.Explained {
			expl = append(expl, e+": "+string(rlverify.ResultVerdict(r.Bad, e)))
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
