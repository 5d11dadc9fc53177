package main

import (
	"context"
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
	"github.com/rlverify/rlverify/reports"
)

func auditCmd() *cobra.Command {
	var f attackFlags
	var only, planFiles []string
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

  rlverify audit --target http://127.0.0.1:8080 --policy my-policy.yaml
  rlverify audit --target http://127.0.0.1:8080 --policy p.yaml \
      --store-proxy 127.0.0.1:16379=127.0.0.1:6379 \
      --downstream-prometheus http://127.0.0.1:8080/metrics --downstream-metric upstream_total
  rlverify audit --limiter token-bucket`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runAudit(c.Context(), &f, only, planFiles, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	fl := c.Flags()
	fl.StringSliceVar(&only, "plans", nil, "run only these of the audit's plans")
	fl.StringArrayVar(&planFiles, "plan", nil, "also run this plan file of your own after the audit's plans, judged against the same policy (repeatable)")
	fl.StringVar(&f.limiter, "limiter", "token-bucket", "reference limiter to audit in the embedded environment (without --target)")
	fl.StringVar(&f.policyFile, "policy", "", "declared policy YAML (default: the built-in policy)")
	fl.StringVar(&f.out, "out", "rlverify-audit", outHelp("each plan's folder (PLAN/history.jsonl …) and the audit's reports"))
	fl.StringSliceVar(&f.formats, "format", []string{"text"}, "report formats: "+strings.Join(reports.FormatNames(), ", ")+" (the first goes to stdout, all to --out)")
	addEnvFlags(fl, &f, "environment of a --limiter audit: embedded, local or docker; external with --target")
	fl.StringArrayVar(&f.targetURLs, "target", nil, "base URL of one of your instances (repeat for several); implies --env external")
	addExternalFlags(fl, &f.ext)
	fl.StringVar(&f.limiterPolicy, "limiter-policy", "", "with --limiter: the policy the reference limiter enforces, when it should differ from the declared --policy")
	fl.BoolVar(&f.allowRemote, "allow-remote", false, "allow targets outside loopback (only audit services you own)")
	fl.Int64Var(&f.maxRequests, "max-requests", attacks.DefaultMaxRequests, "stop each plan after this many requests")
	fl.DurationVar(&f.maxDuration, "max-duration", 2*time.Minute, "stop each plan after this long")
	fl.DurationVar(&f.timeout, "timeout", attacks.DefaultTimeout, "per-request timeout")
	fl.Int64Var(&f.seed, "seed", 1, "seed for random choices")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress output")
	fl.BoolVar(&f.keepKeys, "keep-keys", false, "send the plans' keys unchanged (real API keys); they are redacted")
	fl.StringSliceVar(&f.failOn, "fail-on", []string{"fail"}, failOnUsage)
	fl.StringSliceVar(&f.off, "checks-off", nil, "turn these checks off in every plan; the report says so")
	addShapeFlags(fl, &f.shape)
	return c
}

func runAudit(ctx context.Context, f *attackFlags, only, planFiles []string, stdout, stderr io.Writer) error {
	fo, err := parseFailOn(f.failOn)
	if err == nil {
		err = fo.checkThresholds(nil) // an audit has no thresholds
	}
	if err != nil {
		return usageWrap(err)
	}
	for _, format := range f.formats {
		if _, err := reports.Lookup(format); err != nil {
			return usageWrap(fmt.Errorf("--format: %w", err))
		}
	}
	if err := (rlverify.AuditOptions{Plans: only}).Validate(); err != nil {
		return fromLib(err)
	}
	if len(f.targetURLs) > 0 {
		f.env = "external"
	}
	pol, err := loadPolicy(f.policyFile)
	if err != nil {
		return err
	}
	if pol, err = f.shape.apply(pol); err != nil {
		return usageWrap(err)
	}
	base := rlverify.AttackOptions{Policy: pol, Env: f.env, Limiter: f.limiter, Targets: f.targetURLs}
	if f.env == "external" {
		if x, err := f.ext.environment(); err == nil {
			base.Environment = x // what faults it can inject; errors come per plan
		}
	}
	dir, err := runFolder(f.out, newRunID(), true, false)
	if err != nil {
		return err
	}
	f.out = dir
	planReports := map[string][]string{}
	a, err := rlverify.Audit(ctx, rlverify.AuditOptions{
		Attack: base, Plans: only, PlanFiles: planFiles, Dir: dir,
		Log: func(format string, args ...any) {
			if !f.quiet {
				fmt.Fprintf(stderr, format+"\n", args...)
			}
		},
		ForPlan: func(plan, pdir string) (rlverify.AttackOptions, error) {
			pf := *f
			pf.plan = plan
			pf.out, pf.exactOut = pdir, true
			pf.quiet = true
			if pf.policyFile == "" {
				// Every plan is judged against the declared policy, the
				// built-in one here: a plan's own policy (retry-after's
				// slow refill, tiers' seed tiers) is not what the audited
				// service enforces.
				pf.policyFile = "default"
			}
			o, _, err := pf.options(io.Discard, stderr)
			if err != nil {
				return o, err
			}
			o.HistoryFile = pf.historyFile(pdir)
			if pf.gw != nil {
				if err := pf.placeGateway(pdir, &o.Environment, &o.Notes); err != nil {
					return o, err
				}
			}
			return o, nil
		},
		OnPlan: func(plan, pdir string, out *rlverify.Outcome) error {
			// Each plan's own reports, html always, so the audit's page
			// links to them.
			formats := append([]string{"html"}, slices.DeleteFunc(slices.Clone(f.formats), func(s string) bool { return s == "html" })...)
			doc := out.Document
			if err := emitReports(formats, pdir, "report", "result.json", nil, func(rf reports.Format, w io.Writer) error { return rf.Render(w, doc) }); err != nil {
				return runErr(err)
			}
			for _, name := range formats {
				planReports[plan] = append(planReports[plan], filepath.Join(pdir, "report."+reports.Extension(name)))
			}
			return nil
		},
	})
	if err != nil {
		return fromLib(err)
	}
	for i := range a.Plans {
		a.Plans[i].Reports = planReports[a.Plans[i].Plan]
	}
	if err := emitReports(f.formats, f.out, "audit", "audit.json", stdout, func(rf reports.Format, w io.Writer) error { return rf.RenderAudit(w, a) }); err != nil {
		return runErr(err)
	}
	if fails := fo.fails(a.Results()); len(fails) > 0 {
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
