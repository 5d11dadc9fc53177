package main

import (
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/reports"
)

func checkCmd() *cobra.Command {
	var (
		files        []string
		policyFile   string
		formats      []string
		out          string
		skew         time.Duration
		only         []string
		failOnS      []string
		maxErrorRate float64
		tspecs       []string
		quiet        bool
	)
	c := &cobra.Command{
		Use:   "check --history FILE [--history FILE …]",
		Short: "Judge saved histories (several shards are merged) against a policy",
		Long: `Judge one or more saved histories. Shards written by attack --shard i/n
are merged; --clock-skew widens every request's time interval by the largest
clock difference between the load machines. Without --policy the policy
recorded in the history is used. --history - reads a history from standard
input: rlverify attack … --history - | rlverify check --history -.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			o := rlverify.CheckOptions{Histories: files, Stdin: c.InOrStdin(), Checks: checks.Options{Slack: skew, Only: only, MaxErrorRate: maxErrorRate}}
			var err error
			if policyFile != "" {
				if o.Policy, err = loadPolicy(policyFile); err != nil {
					return err
				}
			}
			if o.FailOn, err = rlverify.ParseFailOn(failOnS); err != nil {
				return fromLib(err)
			}
			if o.Thresholds, err = parseThresholds(tspecs); err != nil {
				return usageWrap(err)
			}
			for _, f := range formats {
				if _, err := reports.Lookup(f); err != nil {
					return usageWrap(err)
				}
			}
			if maxErrorRate == 0 {
				return usageErr("--max-error-rate 0: want a share in (0, 1], e.g. 0.01 for 1%%")
			}
			if err := o.Validate(); err != nil {
				return fromLib(err)
			}
			if out != "" {
				if out, err = runFolder(out, newRunID(), true, false); err != nil {
					return err
				}
			}
			return judge(c.Context(), o, formats, out, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	fl := c.Flags()
	fl.StringArrayVar(&files, "history", nil, "history JSONL file, - for stdin (repeat to merge shards)")
	fl.StringVar(&policyFile, "policy", "", "declared policy YAML (default: the one recorded in the history)")
	fl.StringSliceVar(&formats, "format", []string{"text"}, "report formats: "+strings.Join(reports.FormatNames(), ", "))
	fl.StringVar(&out, "out", "", "also write result.json and the reports: "+outHelp("them"))
	fl.DurationVar(&skew, "clock-skew", 0, "largest clock difference between the machines that wrote the shards")
	fl.StringSliceVar(&only, "checks", nil, "run only these checks")
	// check draws no progress; the flag is here so that one set of flags
	// works for attack, check, compare and audit in scripts.
	fl.BoolVar(&quiet, "quiet", false, "no progress output (check shows none: accepted like attack's, compare's and audit's)")
	fl.StringSliceVar(&failOnS, "fail-on", []string{"fail"}, failOnUsage)
	addThresholdFlag(fl, &tspecs)
	fl.Float64Var(&maxErrorRate, "max-error-rate", checks.DefaultMaxErrorRate, "largest share of requests that may end in an error before the run counts as no evidence (verdict unknown)")
	return c
}
