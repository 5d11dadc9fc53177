package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/reports"
	"github.com/rlverify/rlverify/service"
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
			if base.plan == "" {
				return usageErr("compare: --plan is required")
			}
			if err := checkRunBounds(&base); err != nil {
				return err
			}
			if len(limiters)+len(targets)+len(settings) < 2 {
				return usageErr("compare: give at least two implementations (--limiter NAME, --target NAME=URL, --region-setting MODE/SYNC/LATENCY)")
			}
			if base.env == "external" {
				return usageErr("compare: your own services are compared with --target NAME=URL, not --env external")
			}
			fo, err := parseFailOn(base.failOn)
			if err != nil {
				return usageWrap(err)
			}
			if plan, err := attacks.Load(base.plan, base.shape.planOptions()...); err == nil {
				if _, err := planThresholds(plan, &base); err != nil {
					return usageWrap(err)
				}
			}
			for _, f := range formats {
				if _, err := reports.Lookup(f); err != nil {
					return usageWrap(fmt.Errorf("--format: %w", err))
				}
			}
			type impl struct {
				name string
				f    attackFlags
			}
			var impls []impl
			for _, l := range limiters {
				f := base
				name, pol, withPolicy := strings.Cut(l, "@")
				f.limiter = name
				if withPolicy && pol == "honest" {
					f.honest = true
				} else if withPolicy {
					if pol == "" {
						return usageErr("--limiter %q: want NAME@POLICY with a policy file or shipped name", l)
					}
					f.policyFile = pol
				}
				impls = append(impls, impl{l, f})
			}
			for _, rs := range settings {
				f := base
				f.limiter = "token-bucket"
				if err := parseRegionSetting(rs, &f); err != nil {
					return usageWrap(err)
				}
				impls = append(impls, impl{rs, f})
			}
			for _, t := range targets {
				name, urls, ok := strings.Cut(t, "=")
				if !ok || name == "" || urls == "" {
					return usageErr("--target %q: want NAME=URL[,URL…]", t)
				}
				f := base
				f.env, f.targetURLs = "external", strings.Split(urls, ",")
				impls = append(impls, impl{name, f})
			}
			dir, err := runFolder(out, newRunID(), true, false)
			if err != nil {
				return err
			}
			out = dir
			co := rlverify.CompareOptions{
				Plan: base.plan,
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
			for _, im := range impls {
				f := im.f
				f.out, f.exactOut = filepath.Join(out, safeName(im.name)), true
				f.quiet = true
				if err := ensureDir(f.out); err != nil {
					return err
				}
				o, _, err := f.options(io.Discard, c.ErrOrStderr())
				if err != nil {
					return fmt.Errorf("compare: %s: %w", im.name, err)
				}
				o.HistoryFile = f.historyFile(f.out)
				if f.gw != nil {
					if err := f.placeGateway(f.out, &o.Environment, &o.Notes); err != nil {
						return err
					}
				}
				co.Columns = append(co.Columns, rlverify.CompareColumn{Name: im.name, Attack: o})
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
				if len(fo.fails(col.Document.Checks))+len(fo.thresholdFails(col.Document.Thresholds)) > 0 {
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
	fl.StringVar(&base.store, "store", "", "state store of the reference limiters: memory or redis")
	fl.IntVar(&base.instances, "instances", 0, "instances per embedded implementation")
	fl.StringVar(&base.policyFile, "policy", "", "declared policy (file or shipped name)")
	fl.StringSliceVar(&formats, "format", []string{"text"}, "formats: "+strings.Join(reports.FormatNames(), ", ")+" (the first to stdout, all to --out)")
	fl.BoolVar(&quiet, "quiet", false, "no progress lines (which implementation runs) on stderr")
	fl.StringVar(&out, "out", "rlverify-compare", outHelp("each implementation's folder (NAME/history.jsonl …) and the comparison reports"))
	fl.Int64Var(&base.seed, "seed", 1, "seed shared by every run")
	fl.Int64Var(&base.maxRequests, "max-requests", 200_000, "per-run request bound")
	fl.DurationVar(&base.maxDuration, "max-duration", attacks.DefaultMaxDuration, "per-run duration bound")
	fl.DurationVar(&base.timeout, "timeout", attacks.DefaultTimeout, "per-request timeout")
	fl.BoolVar(&base.allowRemote, "allow-remote", false, "allow targets outside loopback")
	fl.StringSliceVar(&base.failOn, "fail-on", []string{"fail"}, "verdicts of any implementation that make compare exit 1 (none: report only)")
	addThresholdFlag(fl, &base.thresholds)
	return c
}

// parseRegionSetting reads MODE[/SYNC[/LATENCY]] into f's region flags;
// an empty part keeps the flag's value.
func parseRegionSetting(s string, f *attackFlags) error {
	parts := strings.Split(s, "/")
	if len(parts) > 3 || parts[0] == "" {
		return fmt.Errorf("--region-setting %q: want MODE[/SYNC[/LATENCY]], e.g. replicated/100ms/20ms", s)
	}
	if err := service.CheckRegionMode(parts[0]); err != nil {
		return fmt.Errorf("--region-setting %q: %w", s, err)
	}
	f.regionMode = parts[0]
	for i, dst := range []*time.Duration{&f.regionSync, &f.regionLat} {
		if i+1 >= len(parts) || parts[i+1] == "" {
			continue
		}
		d, err := time.ParseDuration(parts[i+1])
		if err != nil || d < 0 {
			return fmt.Errorf("--region-setting %q: %q is not a duration such as 100ms", s, parts[i+1])
		}
		*dst = d
	}
	return nil
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
