package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rlverify/rlverify"
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
				fmt.Fprintf(c.ErrOrStderr(), "selftest: %-16s %-17s %-32s %s\n", r.Row.Root, r.Row.Plan, r.Row.Bad, r.Word())
			}})
			if err != nil {
				return fromLib(err)
			}
			rlverify.WriteMatrix(c.OutOrStdout(), results)
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
