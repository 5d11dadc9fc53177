package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/reports"
)

func auditCmd() *cobra.Command {
	var f attackFlags
	var only []string
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
			return runAudit(c.Context(), &f, only, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	fl := c.Flags()
	fl.StringSliceVar(&only, "plans", nil, "run only these of the audit's plans")
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

// auditPlan is a built-in plan and when it applies.
type auditPlan struct {
	name string
	// applies says why the plan does not apply ("" when it does).
	applies func(a *auditScope) string
}

// auditScope is what decides which plans apply.
type auditScope struct {
	pol       *policy.Policy
	instances int
	env       string
	// faults lists the fault kinds that can be injected.
	faults map[string]bool
}

func always(*auditScope) string { return "" }

func windowsOnly(a *auditScope) string {
	for _, t := range a.pol.Tiers {
		for _, l := range t.Limits {
			if !l.Algorithm.Bucketed() {
				return ""
			}
		}
	}
	return "every limit is a bucket: no window edge to aim at"
}

func severalInstances(a *auditScope) string {
	if a.instances < 2 {
		return "one instance: give every --target of your deployment to spread a key over them"
	}
	return ""
}

func needsFaults(kinds ...string) func(a *auditScope) string {
	return func(a *auditScope) string {
		for _, k := range kinds {
			if !a.faults[k] {
				if a.env == "external" && (k == envs.FaultStoreDown || k == envs.FaultStoreSlow) {
					return fmt.Sprintf("no way to inject %s: give --store-proxy, --toxiproxy or --on-inject %s=… (see docs/environments.md)", k, k)
				}
				if a.env == "external" {
					return fmt.Sprintf("no way to inject %s into your service: give --on-inject %s=… and --on-clear %s=…", k, k, k)
				}
				return fmt.Sprintf("the %s environment cannot inject %s", a.env, k)
			}
		}
		return ""
	}
}

func severalTiers(a *auditScope) string {
	seen := map[string]bool{}
	for _, k := range []string{"free-t", "paid-t"} {
		if t, ok := attacks.PlanTier(a.pol, k); ok {
			seen[t.Name] = true
		}
	}
	if len(seen) < 2 {
		return "the policy's tiers are not free and paid (the plan's keys would share one tier)"
	}
	return ""
}

func globalGuard(a *auditScope) string {
	if a.pol.Global == nil {
		return "the policy declares no global guard"
	}
	return ""
}

func embeddedOnly(a *auditScope) string {
	if a.env == "external" {
		return "regions need a multi-region deployment rlverify starts (embedded or docker)"
	}
	if a.pol.Tolerance.Regions == 0 {
		return "the policy declares no multi-region tolerance"
	}
	return ""
}

// auditPlans are the plans of an audit, in the order they run.
var auditPlans = []auditPlan{
	{"concurrent-burst", always},
	{"precision", always},
	{"idle-refill", always},
	{"boundary-burst", windowsOnly},
	{"retry-after", always},
	{"overload", always},
	{"tenant-isolation", always},
	{"similar-keys", always},
	{"tiers", severalTiers},
	{"bypass", always},
	{"multi-instance", severalInstances},
	{"retry-elsewhere", severalInstances},
	{"global-guard", globalGuard},
	{"store-outage", needsFaults(envs.FaultStoreDown)},
	{"slow-store", needsFaults(envs.FaultStoreSlow)},
	{"rules-unavailable", needsFaults(envs.FaultRulesDown)},
	{"clock-skew", needsFaults(envs.FaultClockSkew)},
	{"regions", embeddedOnly},
}

func runAudit(ctx context.Context, f *attackFlags, only []string, stdout, stderr io.Writer) error {
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
	known := map[string]bool{}
	for _, p := range auditPlans {
		known[p.name] = true
	}
	for _, n := range only {
		if !known[n] {
			return usageErr("--plans %q: not a plan of the audit (%s)", n, strings.Join(auditPlanNames(), ", "))
		}
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
	scope := &auditScope{pol: pol, env: f.env, instances: len(f.targetURLs), faults: map[string]bool{}}
	if f.env != "external" {
		scope.instances = 3 // the built-in environments start what a plan needs
		for _, k := range []string{envs.FaultStoreDown, envs.FaultStoreSlow, envs.FaultClockSkew, envs.FaultRulesDown} {
			scope.faults[k] = true
		}
	} else {
		proxy := len(f.ext.storeProxies) > 0 || f.ext.toxiproxy != ""
		scope.faults[envs.FaultStoreDown] = proxy
		scope.faults[envs.FaultStoreSlow] = proxy
		for _, s := range f.ext.onInject {
			if h, err := envs.ParseHook("inject", s); err == nil {
				scope.faults[h.Kind] = true
			}
		}
	}
	target := strings.Join(f.targetURLs, " ")
	if target == "" {
		target = f.limiter + " (" + f.env + ")"
	}
	dir, err := runFolder(f.out, newRunID(), true, false)
	if err != nil {
		return err
	}
	f.out = dir
	var cols []reports.AuditColumn
	for _, ap := range auditPlans {
		if ctx.Err() != nil {
			break
		}
		if len(only) > 0 && !contains(only, ap.name) {
			continue
		}
		if why := ap.applies(scope); why != "" {
			cols = append(cols, reports.AuditColumn{Plan: ap.name, Skip: why})
			continue
		}
		pf := *f
		pf.plan = ap.name
		pf.out, pf.exactOut = filepath.Join(f.out, ap.name), true
		pf.formats = []string{"json"}
		pf.quiet = true
		if !f.quiet {
			fmt.Fprintf(stderr, "audit: %s …\n", ap.name)
		}
		r, err := attackOnce(ctx, &pf, io.Discard, stderr)
		var ee *exitError
		switch {
		case err != nil && errors.As(err, &ee) && ee.code == ExitUsage:
			return fmt.Errorf("audit: plan %s: %w", ap.name, err)
		case err != nil:
			cols = append(cols, reports.AuditColumn{Plan: ap.name, Dir: pf.out, Err: err})
			continue
		}
		if err := writeReport(filepath.Join(pf.out, "result.json"), reports.JSON{}, r.doc); err != nil {
			return runErr(err)
		}
		col := reports.AuditColumn{Plan: ap.name, Doc: r.doc, Dir: pf.out, Measured: measurements(r.doc)}
		if r.runE != nil {
			r.doc.Interrupted, r.doc.Reason = true, "the plan did not complete: "+r.runE.Error()
		}
		cols = append(cols, col)
	}
	a := reports.BuildAudit(target, policySummary(pol), cols)
	for i, format := range f.formats {
		if i == 0 {
			if err := reports.RenderAudit(stdout, format, a, colorOn(stdout)); err != nil {
				return runErr(err)
			}
		}
		if err := writeAudit(filepath.Join(f.out, "audit."+reports.Extension(format)), format, a); err != nil {
			return runErr(err)
		}
	}
	if err := writeAudit(filepath.Join(f.out, "audit.json"), "json", a); err != nil {
		return runErr(err)
	}
	if ctx.Err() != nil {
		return &exitError{code: ExitInterrupted}
	}
	if fails := fo.fails(a.Results()); len(fails) > 0 {
		return &exitError{code: ExitFail, fails: fails}
	}
	return nil
}

func writeAudit(file, format string, a *reports.Audit) error {
	fh, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("audit report: %w", err)
	}
	if err := reports.RenderAudit(fh, format, a, false); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

func auditPlanNames() []string {
	out := make([]string, len(auditPlans))
	for i, p := range auditPlans {
		out[i] = p.name
	}
	return out
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// policySummary is the declared policy as reports show it.
func policySummary(p *policy.Policy) reports.PolicySummary {
	s := reports.PolicySummary{Name: p.Name, Source: p.Source, FailMode: p.Failure.Mode}
	for _, t := range p.Tiers {
		for _, l := range t.Limits {
			s.Limits = append(s.Limits, fmt.Sprintf("%s (%s…): %s", t.Name, t.KeyPrefix, l.Describe()))
		}
	}
	return s
}

// measurements are the calibration check's figures of a plan as
// parameters measured against declared.
func measurements(doc *reports.Document) []checks.Measurement {
	for _, c := range doc.Checks {
		if c.Name == checks.CalibrationCheck {
			return checks.Measurements(c)
		}
	}
	return nil
}
