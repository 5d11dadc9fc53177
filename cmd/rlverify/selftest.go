package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlverify/rlverify/checks"
)

// matrixRow proves one defect's diagnosis: the same plan against a
// limiter that keeps every promise (every check must pass or have nothing to
// judge) and one with one defect (its root check must fail, the checks it
// explains must say so, every other check must pass or have nothing to
// judge).
type matrixRow struct {
	Plan      string
	Good, Bad string
	// Store is "redis" when the plan needs shared state.
	Store     string
	Instances int
	// Extra flags for both runs (e.g. a policy), and for each run alone.
	Args, GoodArgs, BadArgs []string
	// Setting describes GoodArgs/BadArgs when the limiter is the same.
	GoodSetting, BadSetting string
	// Root is the check the defect is rooted at; Explained the checks whose
	// violations it explains.
	Root      string
	Explained []string
	// MayExplain are checks the defect shows in on some runs only (timing
	// decides): each passes or is explained by Root.
	MayExplain []string
}

// mutationMatrix is the diagnosis matrix `rlverify selftest` runs and the
// README prints.
var mutationMatrix = []matrixRow{
	{Plan: "concurrent-burst", Good: "token-bucket", Bad: "faulty/racy-token-bucket", Root: "oversell", Explained: []string{"downstream"}},
	{Plan: "concurrent-burst", Good: "token-bucket", Bad: "faulty/racy-token-bucket", Store: "redis", Instances: 3, Root: "oversell", Explained: []string{"instances", "downstream"}},
	{Plan: "boundary-burst", Good: "conservative/sliding-log", Bad: "faulty/unweighted-fixed-window", Root: "oversell", Explained: []string{"downstream"}},
	{Plan: "idle-refill", Good: "token-bucket", Bad: "faulty/uncapped-refill", Root: "oversell", Explained: []string{"token-bounds", "headers", "downstream"}},
	{Plan: "idle-refill", Good: "conservative/sliding-log", Bad: "faulty/deduct-on-reject", Root: "under-admission", Explained: []string{"headers"}},
	{Plan: "concurrent-burst", Good: "token-bucket", Bad: "faulty/remaining-off-by-one", Root: "token-bounds"},
	{Plan: "concurrent-burst", Good: "token-bucket", Bad: "faulty/long-reset", Root: "headers"},
	{Plan: "retry-after", Good: "token-bucket", Bad: "faulty/short-retry-after", Root: "retry-after"},
	{Plan: "concurrent-burst", Good: "token-bucket", Bad: "faulty/no-retry-after", Root: "retry-after"},
	{Plan: "tenant-isolation", Good: "token-bucket", Bad: "faulty/shared-bucket", Root: "isolation", Explained: []string{"under-admission", "retry-after"}},
	{Plan: "similar-keys", Good: "token-bucket", Bad: "faulty/shared-prefix", Root: "isolation", Explained: []string{"under-admission", "retry-after"}},
	{Plan: "multi-instance", Good: "token-bucket", Bad: "faulty/local-only", Store: "redis", Instances: 3, Root: "instances", Explained: []string{"oversell", "downstream"},
		// Round robin over instances that each keep their own count makes
		// consecutive answers report remaining counts no one bucket could.
		MayExplain: []string{"token-bounds"}},
	{Plan: "multi-instance-20", Good: "token-bucket", Bad: "faulty/local-only", Store: "redis", Instances: 20, Root: "instances", Explained: []string{"oversell", "downstream"}},
	{Plan: "clock-skew", Good: "token-bucket", Bad: "faulty/instance-clock", Store: "redis", Instances: 3, Root: "oversell", Explained: []string{"instances", "downstream"},
		// The skewed instance's remaining counts are impossible when it
		// answers just after another instance consumed.
		MayExplain: []string{"token-bounds"}},
	{Plan: "store-outage", Good: "token-bucket", Bad: "faulty/unguarded-store", Store: "redis", Root: "fail-mode"},
	{Plan: "rules-unavailable", Good: "token-bucket", Bad: "faulty/no-rule-defaults", Root: "fail-mode"},
	{Plan: "concurrent-burst", Good: "token-bucket", Bad: "faulty/forward-rejected", Root: "downstream"},
	{Plan: "bypass", Good: "token-bucket", Bad: "faulty/trust-xff", Root: "bypass", Explained: []string{"downstream"}},
	{Plan: "bypass", Good: "token-bucket", Bad: "faulty/racy-token-bucket", Root: "oversell", Explained: []string{"downstream"}},
	{Plan: "bypass", Good: "token-bucket", Bad: "faulty/local-only", Store: "redis", Instances: 3, Root: "instances", Explained: []string{"oversell", "downstream"}},
	{Plan: "precision", Good: "token-bucket", Bad: "token-bucket", BadArgs: []string{"--limiter-policy", "faster-refill"},
		GoodSetting: "as declared", BadSetting: "refilling 10% faster than declared", Root: "calibration", Explained: []string{"oversell"}},
	{Plan: "regions", Good: "token-bucket", Bad: "token-bucket", Store: "redis", Instances: 2,
		Args:        []string{"--regions", "2", "--region-sync", "50ms", "--region-latency", "10ms"},
		GoodArgs:    []string{"--region-mode", "replicated"},
		BadArgs:     []string{"--region-mode", "independent"},
		GoodSetting: "2 regions, replicated + reconciled every 50ms", BadSetting: "2 regions, independent quotas", Root: "regions", Explained: []string{"downstream"}},
}

// matrixResult is one row's outcome.
type matrixResult struct {
	Row         matrixRow
	Good, Bad   []checks.Result
	BadEvidence string
	Err         error
}

// OK reports whether the row came out as it must (see Problems).
func (m matrixResult) OK() bool { return m.Err == nil && len(m.Problems()) == 0 }

// Problems lists how the row departs from its expectation.
func (m matrixResult) Problems() []string {
	var out []string
	for _, r := range m.Good {
		if r.Verdict != checks.Pass && r.Verdict != checks.Skip {
			out = append(out, fmt.Sprintf("correct limiter: %s is %s (%s)", r.Name, r.Verdict, r.Summary))
		}
	}
	for _, r := range m.Bad {
		want := []checks.Verdict{checks.Pass, checks.Skip}
		switch {
		case r.Name == m.Row.Root:
			want = []checks.Verdict{checks.Fail}
		case slices.Contains(m.Row.Explained, r.Name):
			want = []checks.Verdict{checks.Explained}
		case slices.Contains(m.Row.MayExplain, r.Name):
			want = []checks.Verdict{checks.Pass, checks.Explained}
		}
		if !slices.Contains(want, r.Verdict) {
			out = append(out, fmt.Sprintf("faulty limiter: %s is %s, want %s (%s)", r.Name, r.Verdict, want[0], r.Summary))
		} else if r.Verdict == checks.Explained && r.ExplainedBy != m.Row.Root {
			out = append(out, fmt.Sprintf("faulty limiter: %s is explained by %s, want %s", r.Name, r.ExplainedBy, m.Row.Root))
		}
	}
	return out
}

// resultVerdict is the verdict of check name in rs.
func resultVerdict(rs []checks.Result, name string) checks.Verdict {
	for _, r := range rs {
		if r.Name == name {
			return r.Verdict
		}
	}
	return ""
}

// runMatrixRow runs both attacks of row in process, with every check.
func runMatrixRow(ctx context.Context, row matrixRow, dir string) matrixResult {
	res := matrixResult{Row: row}
	run := func(limiter, sub string, extra []string) ([]checks.Result, error) {
		args := []string{"--plan", row.Plan, "--limiter", limiter, "--out", filepath.Join(dir, sub), "--quiet"}
		if row.Store != "" {
			args = append(args, "--store", row.Store)
		}
		if row.Instances > 0 {
			args = append(args, "--instances", fmt.Sprint(row.Instances))
		}
		args = append(args, row.Args...)
		args = append(args, extra...)
		var f attackFlags
		fl := pflag.NewFlagSet("attack", pflag.ContinueOnError)
		addAttackFlags(fl, &f)
		if err := fl.Parse(args); err != nil {
			return nil, fmt.Errorf("%s: %w", strings.Join(args, " "), err)
		}
		r, err := attackOnce(ctx, &f, io.Discard, io.Discard)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", strings.Join(args, " "), err)
		}
		if r.runE != nil {
			return nil, fmt.Errorf("%s: the plan did not complete: %w", strings.Join(args, " "), r.runE)
		}
		return r.results, nil
	}
	var err error
	if res.Good, err = run(row.Good, "good", row.GoodArgs); err != nil {
		res.Err = err
		return res
	}
	if res.Bad, err = run(row.Bad, "bad", row.BadArgs); err != nil {
		res.Err = err
		return res
	}
	for _, r := range res.Bad {
		if r.Name == row.Root {
			res.BadEvidence = r.Summary
			if len(r.Evidence) > 0 {
				res.BadEvidence = r.Evidence[0].Message
			}
		}
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
				if only != "" && row.Root != only {
					continue
				}
				r := runMatrixRow(c.Context(), row, filepath.Join(dir, fmt.Sprint(i)))
				results = append(results, r)
				fmt.Fprintf(c.ErrOrStderr(), "selftest: %-16s %-17s %-32s %s\n", row.Root, row.Plan, row.Bad, okWord(r))
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
	c.Flags().StringVar(&only, "check", "", "run only the rows whose defect is rooted at this check")
	return c
}

func okWord(r matrixResult) string {
	switch {
	case r.Err != nil:
		return "ERROR: " + r.Err.Error()
	case r.OK():
		return "ok"
	}
	return "NOT AS EXPECTED: " + strings.Join(r.Problems(), "; ")
}

func writeMatrix(w io.Writer, rs []matrixResult) {
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
		root := r.Row.Root + ": " + string(resultVerdict(r.Bad, r.Row.Root))
		var expl []string
		for _, e := range r.Row.Explained {
			expl = append(expl, e+": "+string(resultVerdict(r.Bad, e)))
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
