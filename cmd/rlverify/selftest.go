package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/reports"
)

// matrixRow proves one checker: the same plan against a limiter that keeps
// the invariant (the checker must pass) and one that breaks it (it must fail).
type matrixRow struct {
	Check     string
	Plan      string
	Good, Bad string
	// Store is "redis" when the plan needs shared state.
	Store     string
	Instances int
	// Extra flags for both runs (e.g. a policy), and for each run alone.
	Args, GoodArgs, BadArgs []string
	// Setting describes GoodArgs/BadArgs when the limiter is the same.
	GoodSetting, BadSetting string
}

// mutationMatrix is the list `rlverify selftest` runs and the README prints.
var mutationMatrix = []matrixRow{
	{Check: "oversell", Plan: "concurrent-burst", Good: "token-bucket", Bad: "faulty/racy-token-bucket"},
	{Check: "oversell", Plan: "concurrent-burst", Good: "token-bucket", Bad: "faulty/racy-token-bucket", Store: "redis", Instances: 3},
	{Check: "oversell", Plan: "boundary-burst", Good: "sliding-log", Bad: "faulty/unweighted-fixed-window"},
	{Check: "oversell", Plan: "idle-refill", Good: "token-bucket", Bad: "faulty/uncapped-refill"},
	{Check: "under-admission", Plan: "idle-refill", Good: "token-bucket", Bad: "faulty/deduct-on-reject"},
	{Check: "token-bounds", Plan: "idle-refill", Good: "token-bucket", Bad: "faulty/uncapped-refill"},
	{Check: "retry-after", Plan: "retry-after", Good: "token-bucket", Bad: "faulty/short-retry-after"},
	{Check: "retry-after", Plan: "concurrent-burst", Good: "token-bucket", Bad: "faulty/no-retry-after"},
	{Check: "headers", Plan: "idle-refill", Good: "token-bucket", Bad: "faulty/uncapped-refill"},
	{Check: "isolation", Plan: "tenant-isolation", Good: "token-bucket", Bad: "faulty/shared-bucket"},
	{Check: "instances", Plan: "multi-instance", Good: "token-bucket", Bad: "faulty/local-only", Store: "redis", Instances: 3},
	{Check: "instances", Plan: "multi-instance-20", Good: "token-bucket", Bad: "faulty/local-only", Store: "redis", Instances: 20},
	{Check: "oversell", Plan: "clock-skew", Good: "token-bucket", Bad: "faulty/instance-clock", Store: "redis", Instances: 3},
	{Check: "fail-mode", Plan: "store-outage", Good: "token-bucket", Bad: "faulty/unguarded-store", Store: "redis"},
	{Check: "fail-mode", Plan: "rules-unavailable", Good: "token-bucket", Bad: "faulty/no-rule-defaults"},
	{Check: "downstream", Plan: "concurrent-burst", Good: "token-bucket", Bad: "faulty/forward-rejected"},
	{Check: "bypass", Plan: "bypass", Good: "token-bucket", Bad: "faulty/trust-xff"},
	{Check: "regions", Plan: "regions", Good: "token-bucket", Bad: "token-bucket", Store: "redis", Instances: 2,
		Args:        []string{"--regions", "2", "--region-sync", "50ms", "--region-latency", "10ms"},
		GoodArgs:    []string{"--region-mode", "replicated"},
		BadArgs:     []string{"--region-mode", "independent"},
		GoodSetting: "2 regions, replicated + reconciled every 50ms", BadSetting: "2 regions, independent quotas"},
}

// matrixResult is one row's outcome.
type matrixResult struct {
	Row         matrixRow
	GoodVerdict checks.Verdict
	BadVerdict  checks.Verdict
	BadEvidence string
	Err         error
}

// OK reports whether the row came out as it must: good passes, bad fails.
func (m matrixResult) OK() bool {
	return m.Err == nil && m.GoodVerdict == checks.Pass && m.BadVerdict == checks.Fail
}

// runMatrixRow runs both attacks of row in process.
func runMatrixRow(ctx context.Context, row matrixRow, dir string) matrixResult {
	res := matrixResult{Row: row}
	run := func(limiter, sub string, extra []string) (checks.Result, error) {
		args := []string{"attack", "--plan", row.Plan, "--limiter", limiter, "--format", "json",
			"--out", filepath.Join(dir, sub), "--quiet", "--checks", row.Check}
		if row.Store != "" {
			args = append(args, "--store", row.Store)
		}
		if row.Instances > 0 {
			args = append(args, "--instances", fmt.Sprint(row.Instances))
		}
		args = append(args, row.Args...)
		args = append(args, extra...)
		var out, errb bytes.Buffer
		err := Run(ctx, args, &out, &errb)
		var ee *exitError
		if err != nil && (!errors.As(err, &ee) || (ee.code != ExitPass && ee.code != ExitFail)) {
			return checks.Result{}, fmt.Errorf("%s: %v %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
		}
		var doc reports.Document
		if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
			return checks.Result{}, fmt.Errorf("%s: decode result: %w", strings.Join(args, " "), err)
		}
		for _, c := range doc.Checks {
			if c.Name == row.Check {
				return c, nil
			}
		}
		return checks.Result{}, fmt.Errorf("%s: no %s check in the result", strings.Join(args, " "), row.Check)
	}
	good, err := run(row.Good, "good", row.GoodArgs)
	if err != nil {
		res.Err = err
		return res
	}
	bad, err := run(row.Bad, "bad", row.BadArgs)
	if err != nil {
		res.Err = err
		return res
	}
	res.GoodVerdict, res.BadVerdict = good.Verdict, bad.Verdict
	res.BadEvidence = bad.Summary
	if len(bad.Evidence) > 0 {
		res.BadEvidence = bad.Evidence[0].Message
	}
	return res
}

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
			dir, err := os.MkdirTemp("", "rlverify-selftest-")
			if err != nil {
				return runErr(err)
			}
			defer os.RemoveAll(dir)
			var results []matrixResult
			for i, row := range mutationMatrix {
				if only != "" && row.Check != only {
					continue
				}
				r := runMatrixRow(c.Context(), row, filepath.Join(dir, fmt.Sprint(i)))
				results = append(results, r)
				fmt.Fprintf(c.ErrOrStderr(), "selftest: %-16s %-17s %s\n", row.Check, row.Plan, okWord(r))
				if c.Context().Err() != nil {
					break
				}
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
	c.Flags().StringVar(&only, "check", "", "run only the rows of this checker")
	return c
}

func okWord(r matrixResult) string {
	switch {
	case r.Err != nil:
		return "ERROR: " + r.Err.Error()
	case r.OK():
		return "ok"
	}
	return fmt.Sprintf("NOT AS EXPECTED (correct: %s, faulty: %s)", r.GoodVerdict, r.BadVerdict)
}

func writeMatrix(w io.Writer, rs []matrixResult) {
	fmt.Fprintln(w, "| checker | plan | store | correct limiter | verdict | faulty limiter | verdict | what the faulty run showed |")
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
		}
		if len(ev) > 140 {
			ev = ev[:137] + "…"
		}
		good, bad := r.Row.Good, r.Row.Bad
		if r.Row.GoodSetting != "" {
			good += " (" + r.Row.GoodSetting + ")"
			bad += " (" + r.Row.BadSetting + ")"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Row.Check, r.Row.Plan, store,
			good, r.GoodVerdict, bad, r.BadVerdict, ev)
	}
}
