package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/discover"
	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/reports"
)

func auditCmd() *cobra.Command {
	var f attackFlags
	var only, planFiles []string
	var budget time.Duration
	var alsoDiscover bool
	c := &cobra.Command{
		Use:   "audit [--target URL …] [--policy FILE]",
		Short: "Check a limiter against its policy: every applicable plan, one verdict per property",
		Long: `Run every built-in plan that applies to the declared policy against one
target — your own service (--target URL …) or a reference limiter
(--limiter) — and merge their verdicts into one table: each property
(oversell, under-admission, retry-after, headers, isolation, bypass, instances,
fail-mode, downstream, calibration …) pass, fail, unknown or not measured,
with why and the plans that decided it, and the limiter's measured capacity,
refill and advice beside the declared ones. Store faults are tried when a
fault method is given (--store-proxy, --toxiproxy, --on-inject). A plan that
fails does not stop the others; each plan's history is kept in
--out/AUDIT-ID/PLAN/ (--out/latest points at the newest audit).

Against your own service without --policy, the policy is discovered first
(as rlverify discover does, kept as discovered-policy.yaml), every report says
"policy discovered, not declared", and what needs your promise (oversell,
under-admission, fail-mode, …) is measured, not judged. With --policy,
--discover puts each declared number beside the discovered one.

  rlverify audit --target http://127.0.0.1:8080 --policy my-policy.yaml
  rlverify audit --target http://127.0.0.1:8080 --policy p.yaml \
      --store-proxy 127.0.0.1:16379=127.0.0.1:6379 \
      --downstream-prometheus http://127.0.0.1:8080/metrics --downstream-metric upstream_total
  rlverify audit --limiter token-bucket`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runAudit(c.Context(), &f, only, planFiles, budget, alsoDiscover, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	fl := c.Flags()
	fl.StringSliceVar(&only, "plans", nil, "run only these of the audit's plans")
	fl.StringArrayVar(&planFiles, "plan", nil, "also run this plan file of your own after the audit's plans, judged against the same policy (repeatable)")
	fl.StringVar(&f.o.Limiter, "limiter", "token-bucket", "reference limiter to audit in the embedded environment (without --target)")
	fl.StringVar(&f.policyFile, "policy", "", "declared policy YAML (default with --limiter: the built-in policy; with --target: discovered first, and only what needs no promise is judged)")
	fl.BoolVar(&alsoDiscover, "discover", false, "with --target and --policy: discover the policy too and show each declared number beside the discovered one (a declared value outside the measured range fails declared-vs-discovered)")
	fl.DurationVar(&budget, "discover-budget", discover.DefaultBudget, "with --target and no --policy: the longest the discovery of the policy may take")
	fl.StringVar(&f.out, "out", "rlverify-audit", outHelp("each plan's folder (PLAN/history.jsonl …) and the audit's reports"))
	fl.StringSliceVar(&f.formats, "format", []string{"text"}, "report formats: "+strings.Join(reports.FormatNames(), ", ")+" (the first goes to stdout, all to --out)")
	addEnvFlags(fl, &f, "environment of a --limiter audit: embedded, local or docker; external with --target")
	fl.StringArrayVar(&f.o.Targets, "target", nil, "base URL of one of your instances (repeat for several); implies --env external")
	addExternalFlags(fl, &f.ext)
	fl.StringVar(&f.limiterPolicy, "limiter-policy", "", "with --limiter: the policy the reference limiter enforces, when it should differ from the declared --policy")
	fl.BoolVar(&f.o.AllowRemote, "allow-remote", false, "allow targets outside loopback (only audit services you own)")
	fl.Int64Var(&f.o.MaxRequests, "max-requests", attacks.DefaultMaxRequests, "stop each plan after this many requests")
	fl.DurationVar(&f.o.MaxDuration, "max-duration", 2*time.Minute, "stop each plan after this long")
	fl.DurationVar(&f.o.Timeout, "timeout", attacks.DefaultTimeout, "per-request timeout")
	fl.Int64Var(&f.o.Seed, "seed", 1, "seed for random choices")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress output")
	fl.BoolVar(&f.o.KeepKeys, "keep-keys", false, "send the plans' keys unchanged (real API keys); they are redacted")
	fl.StringSliceVar(&f.failOn, "fail-on", []string{"fail"}, failOnUsage)
	fl.StringSliceVar(&f.o.Checks.Off, "checks-off", nil, "turn these checks off in every plan; the report says so")
	addShapeFlags(fl, &f.shape)
	return c
}

func runAudit(ctx context.Context, f *attackFlags, only, planFiles []string, budget time.Duration, alsoDiscover bool, stdout, stderr io.Writer) error {
	base := f.o
	if err := f.common(&base); err != nil {
		return err
	}
	if err := base.FailOn.CheckThresholds(nil); err != nil { // an audit has no thresholds
		return fromLib(err)
	}
	ao := rlverify.AuditOptions{Attack: base, Plans: only, PlanFiles: planFiles, PlanLoad: f.shape.planOptions(), DiscoverBeside: alsoDiscover}
	if err := ao.Validate(); err != nil {
		return fromLib(err)
	}
	if len(base.Targets) > 0 {
		df := discoverFlags{targets: base.Targets, allowRemote: base.AllowRemote, budget: budget, timeout: base.Timeout, quiet: f.quiet, shape: f.shape}
		do, err := df.options(stderr)
		if err != nil {
			return err
		}
		ao.Discover = &do.Options
	}
	dir, err := runFolder(f.out, newRunID(), true, false)
	if err != nil {
		return err
	}
	ao.Dir = dir
	ao.OnDiscovered = func(d *rlverify.Discovery) error {
		// The user finds the discovered policy in the audit's folder, to
		// declare it.
		file := filepath.Join(dir, "discovered-policy.yaml")
		d.YAML = commentWords(d.YAML)
		if err := reports.WriteFile(file, func(w io.Writer) error { _, err := w.Write(d.YAML); return err }); err != nil {
			return runErr(err)
		}
		if !f.quiet {
			fmt.Fprintf(stderr, "audit: %s\n%s\nthe discovered policy is in %s\n", reports.DiscoveredNote, summary(d.Result), file)
		}
		return nil
	}
	ao.Log = func(format string, args ...any) {
		if !f.quiet {
			fmt.Fprintf(stderr, format+"\n", args...)
		}
	}
	planReports := map[string][]string{}
	var hookErr error // a fault command that failed: exit 3, as attack does
	ao.OnPlan = func(plan, pdir string, out *rlverify.Outcome) error {
		if hookErr == nil && errors.Is(out.Stopped, envs.ErrHook) {
			hookErr = fmt.Errorf("audit: plan %s did not complete: %w", plan, out.Stopped)
		}
		// Each plan's own reports, html always, so the audit's page links
		// to them.
		formats := append([]string{"html"}, slices.DeleteFunc(slices.Clone(f.formats), func(s string) bool { return s == "html" })...)
		out.Document.Reword(docWords)
		if err := emitReports(formats, pdir, "report", "result.json", nil, func(rf reports.Format, w io.Writer) error { return rf.Render(w, out.Document) }); err != nil {
			return runErr(err)
		}
		for _, name := range formats {
			planReports[plan] = append(planReports[plan], filepath.Join(pdir, "report."+reports.Extension(name)))
		}
		return nil
	}
	a, err := rlverify.Audit(ctx, ao)
	if err != nil {
		return fromLib(err)
	}
	for i := range a.Plans {
		a.Plans[i].Reports = planReports[a.Plans[i].Plan]
		a.Plans[i].Why = flagWords(a.Plans[i].Why) // a skip reason names the options it wants
	}
	for i := range a.Properties {
		a.Properties[i].Summary = flagWords(a.Properties[i].Summary) // a plan that could not run says why
	}
	if err := emitReports(f.formats, dir, "audit", "audit.json", stdout, func(rf reports.Format, w io.Writer) error { return rf.RenderAudit(w, a) }); err != nil {
		return runErr(err)
	}
	if hookErr != nil { // the service may still be in the fault: exit 3 even past a finding
		return runErr(fmt.Errorf("%w; no later plan was run, verdicts above cover what was recorded", hookErr))
	}
	if fails := base.FailOn.Fails(a.Results()); len(fails) > 0 {
		return &exitError{code: ExitFail, fails: fails}
	}
	switch {
	case ctx.Err() != nil || a.Verdict == checks.Interrupted:
		return &exitError{code: ExitInterrupted}
	case a.Verdict == checks.Incomplete:
		return runErr(fmt.Errorf("audit: a plan did not complete; see its row under plans"))
	}
	return nil
}
