package main

import (
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/policy"
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
			if len(files) == 0 {
				return usageErr("check: --history FILE is required")
			}
			var pol *policy.Policy
			if policyFile != "" {
				p, err := loadPolicy(policyFile)
				if err != nil {
					return err
				}
				pol = p
			}
			if err := checks.Validate(only); err != nil {
				return usageWrap(err)
			}
			fo, err := rlverify.ParseFailOn(failOnS)
			if err != nil {
				return fromLib(err)
			}
			ts, err := parseThresholds(tspecs)
			if err != nil {
				return usageWrap(err)
			}
			if err := fo.CheckThresholds(ts); err != nil {
				return fromLib(err)
			}
			for _, f := range formats {
				if _, err := reports.Lookup(f); err != nil {
					return usageWrap(err)
				}
			}
			if skew < 0 {
				return usageErr("--clock-skew must not be negative")
			}
			if err := checks.ValidateSlack(skew); err != nil {
				return usageErr("--clock-skew %s: want at most %s, the widest the shards of one run may start apart", skew, checks.MaxSlack)
			}
			if !(maxErrorRate > 0 && maxErrorRate <= 1) {
				return usageErr("--max-error-rate %g: want a share in (0, 1], e.g. 0.01 for 1%%", maxErrorRate)
			}
			if out != "" {
				if out, err = runFolder(out, newRunID(), true, false); err != nil {
					return err
				}
			}
			return judge(c.Context(), files, c.InOrStdin(), pol, checks.Options{Slack: skew, Only: only, MaxErrorRate: maxErrorRate}, ts, formats, out, fo, c.OutOrStdout(), c.ErrOrStderr())
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
