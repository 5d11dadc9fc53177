package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/reports"
)

func compareCmd() *cobra.Command {
	var (
		base     attackFlags
		limiters []string
		targets  []string
		settings []string
		formats  []string
		out      string
		quiet    bool
	)
	c := &cobra.Command{
		Use:   "compare --plan P --limiter A --limiter B … [--target NAME=URL[,URL…] …]",
		Short: "Run one plan against several limiter implementations and compare them side by side",
		Long: `Run the same plan (same seed, same schedule) against each implementation —
reference, third-party or faulty limiters by name (--limiter), and your own
running services (--target NAME=URL[,URL…]); NAME@POLICY runs a limiter
under another declared policy, e.g. to set fail-open, fail-closed and
fail-local side by side, and NAME@honest judges a gateway (nginx/…,
haproxy/…, gubernator/…) against the policy it really enforces — and
render a matrix: each
check's verdict per implementation, admitted requests, overrun, Retry-After
error and decision latency. Each run's history and reports are kept in
--out/ID/NAME/ (--out/latest points at the newest comparison).

  rlverify compare --plan concurrent-burst --limiter token-bucket --limiter gcra \
      --limiter x/time/rate --limiter faulty/racy-token-bucket`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			b, _, err := base.options(io.Discard, c.ErrOrStderr())
			if err != nil {
				return err
			}
			b.Log, b.Progress, b.ProgressDone = nil, nil, nil
			cols, err := rlverify.CompareSpecs{Limiters: limiters, RegionSettings: settings, Targets: targets}.Columns(b)
			if err != nil {
				return fromLib(err)
			}
			dir, err := runFolder(out, newRunID(), true, false)
			if err != nil {
				return err
			}
			out = dir
			co := rlverify.CompareOptions{
				Plan: base.plan, Columns: cols,
				Log: func(format string, a ...any) {
					if !quiet {
						fmt.Fprintf(c.ErrOrStderr(), format+"\n", a...)
					}
				},
				OnColumn: func(name string, o *rlverify.Outcome) error {
					// Each column keeps its history, report.json and
					// result.json in its own folder.
					return render(o.Document, []string{"json"}, filepath.Dir(o.HistoryFile), io.Discard)
				},
			}
			for i := range co.Columns {
				col := &co.Columns[i]
				cdir := filepath.Join(out, safeName(col.Name))
				if err := ensureDir(cdir); err != nil {
					return err
				}
				col.Attack = col.Attack.ForPlan(b.Plan, cdir)
			}
			cmp, err := rlverify.Compare(c.Context(), co)
			if err != nil {
				return fromLib(err)
			}
			if c.Context().Err() != nil {
				return &exitError{code: ExitInterrupted}
			}
			if err := renderComparison(cmp, formats, out, c.OutOrStdout()); err != nil {
				return runErr(err)
			}
			var failed []string
			for _, col := range cmp.Columns {
				if len(b.FailOn.Fails(col.Document.Checks))+len(b.FailOn.ThresholdFails(col.Document.Thresholds)) > 0 {
					failed = append(failed, col.Name)
				}
			}
			if len(failed) > 0 {
				fmt.Fprintf(c.ErrOrStderr(), "compare: failing per --fail-on: %s\n", strings.Join(failed, ", "))
				return &exitError{code: ExitFail}
			}
			return nil
		},
	}
	// Every field compare does not set itself keeps attack's default
	// (--hook-timeout, --max-header-bytes …): the flags registered below
	// then set their own. Without this a --target column was refused with
	// "--hook-timeout 0s: want a positive duration".
	addAttackFlags(pflag.NewFlagSet("attack defaults", pflag.ContinueOnError), &base)
	fl := c.Flags()
	fl.StringVar(&base.plan, "plan", "", "built-in plan name or plan file")
	fl.StringArrayVar(&limiters, "limiter", nil, "limiter to compare, NAME or NAME@POLICY (repeat; see rlverify limiters)")
	fl.StringArrayVar(&targets, "target", nil, "your own service to compare: NAME=URL[,URL…] (repeat)")
	fl.StringArrayVar(&settings, "region-setting", nil, "a region setting to compare, MODE[/SYNC[/LATENCY]] e.g. replicated/100ms/20ms or strict//50ms (repeat; the reference token bucket in --regions regions, default the plan's)")
	addEnvFlags(fl, &base, "environment of the --limiter and --region-setting runs: embedded, local or docker")
	addShapeFlags(fl, &base.shape)
	fl.StringVar(&base.o.Store, "store", "", "state store of the reference limiters: memory or redis")
	fl.IntVar(&base.o.Instances, "instances", 0, "instances per embedded implementation")
	fl.StringVar(&base.policyFile, "policy", "", "declared policy (file or shipped name)")
	fl.StringSliceVar(&formats, "format", []string{"text"}, "formats: "+strings.Join(reports.FormatNames(), ", ")+" (the first to stdout, all to --out)")
	fl.BoolVar(&quiet, "quiet", false, "no progress lines (which implementation runs) on stderr")
	fl.StringVar(&out, "out", "rlverify-compare", outHelp("each implementation's folder (NAME/history.jsonl …) and the comparison reports"))
	fl.Int64Var(&base.o.Seed, "seed", 1, "seed shared by every run")
	fl.Int64Var(&base.o.MaxRequests, "max-requests", 200_000, "per-run request bound")
	fl.DurationVar(&base.o.MaxDuration, "max-duration", attacks.DefaultMaxDuration, "per-run duration bound")
	fl.DurationVar(&base.o.Timeout, "timeout", attacks.DefaultTimeout, "per-request timeout")
	fl.BoolVar(&base.o.AllowRemote, "allow-remote", false, "allow targets outside loopback")
	fl.StringSliceVar(&base.failOn, "fail-on", []string{"fail"}, "verdicts of any implementation that make compare exit 1 (none: report only)")
	addThresholdFlag(fl, &base.thresholds)
	return c
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func safeName(s string) string { return strings.Trim(unsafeChars.ReplaceAllString(s, "_"), "_") }

// renderComparison writes the reports of cmp (see emitReports), plus
// comparison.json, into out.
func renderComparison(cmp *reports.Comparison, formats []string, out string, stdout io.Writer) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	return emitReports(formats, out, "comparison", "comparison.json", stdout, func(f reports.Format, w io.Writer) error { return f.RenderComparison(w, cmp) })
}
