package rlverify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/reports"
)

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
				if a.env == "external" && (k == attacks.FaultStoreDown || k == attacks.FaultStoreSlow) {
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
	{"store-outage", needsFaults(attacks.FaultStoreDown)},
	{"slow-store", needsFaults(attacks.FaultStoreSlow)},
	{"rules-unavailable", needsFaults(attacks.FaultRulesDown)},
	{"clock-skew", needsFaults(attacks.FaultClockSkew)},
	{"regions", embeddedOnly},
}

// AuditOptions configure an audit: every built-in plan that applies to
// the declared policy, run against one target, merged into one verdict per
// property.
type AuditOptions struct {
	// Attack is the target and the settings every plan runs with (its Plan
	// is set per plan; its HistoryFile is Dir/PLAN/history.jsonl).
	Attack AttackOptions
	// ForPlan, when set, builds each plan's options instead (the command
	// reads its flags per plan); an error there ends the audit.
	ForPlan func(plan string, dir string) (AttackOptions, error)
	// Plans, when set, runs only these of the audit's plans.
	Plans []string
	// Dir keeps each plan's history in Dir/PLAN/ (a temporary directory,
	// removed afterwards, when empty).
	Dir string
	// Log receives a line as each plan starts (may be nil).
	Log func(format string, args ...any)
	// OnPlan, when set, is called with each judged plan and its folder.
	OnPlan func(plan, dir string, out *Outcome) error
}

// AuditPlanNames are the audit's plans, in the order they run.
func AuditPlanNames() []string {
	out := make([]string, len(auditPlans))
	for i, p := range auditPlans {
		out[i] = p.name
	}
	return out
}

// Audit runs the plans of the audit that apply, in order; a plan that
// fails to run does not stop the others (its column says why), but an
// option error does. It stops before the next plan once ctx ends.
func Audit(ctx context.Context, o AuditOptions) (*reports.Audit, error) {
	for _, n := range o.Plans {
		if !slices.Contains(AuditPlanNames(), n) {
			return nil, optionErr("--plans %q: not a plan of the audit (%s)", n, strings.Join(AuditPlanNames(), ", "))
		}
	}
	base := o.Attack
	if base.Handler != nil || len(base.Targets) > 0 {
		base.Env = EnvExternal
	}
	if base.Env == "" {
		base.Env = EnvEmbedded
	}
	if base.Limiter == "" {
		base.Limiter = DefaultLimiter
	}
	pol := base.Policy
	if pol == nil {
		pol = policy.Default()
	}
	scope := &auditScope{pol: pol, env: base.Env, instances: len(base.Targets), faults: map[string]bool{}}
	if base.Handler != nil {
		scope.instances = 1
	}
	if base.Env != EnvExternal {
		scope.instances = 3 // the built-in environments start what a plan needs
		for _, k := range attacks.FaultKinds {
			scope.faults[k] = true
		}
	} else if x, ok := base.Environment.(envs.External); ok {
		proxy := len(x.StoreProxies) > 0 || x.Toxiproxy != ""
		scope.faults[attacks.FaultStoreDown] = proxy
		scope.faults[attacks.FaultStoreSlow] = proxy
		for _, h := range x.Hooks {
			if h.Action == "inject" {
				scope.faults[h.Kind] = true
			}
		}
	}
	target := strings.Join(base.Targets, " ")
	if base.Handler != nil {
		target = "an http.Handler"
	}
	if target == "" {
		target = base.Limiter + " (" + base.Env + ")"
	}
	dir := o.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "rlverify-audit-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	var cols []reports.AuditColumn
	for _, ap := range auditPlans {
		if len(o.Plans) > 0 && !slices.Contains(o.Plans, ap.name) {
			continue
		}
		if ctx.Err() != nil {
			// Listed, not dropped: the audit's verdict is interrupted and
			// says which plans never ran.
			cols = append(cols, reports.AuditColumn{Plan: ap.name, NotRun: "not run: the audit was interrupted (" + context.Cause(ctx).Error() + ")"})
			continue
		}
		if why := ap.applies(scope); why != "" {
			cols = append(cols, reports.AuditColumn{Plan: ap.name, Skip: why})
			continue
		}
		pdir := filepath.Join(dir, ap.name)
		if err := os.MkdirAll(pdir, 0o755); err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
		if o.Log != nil {
			o.Log("audit: %s …", ap.name)
		}
		ao, err := auditAttack(ap.name, pdir, base, o.ForPlan)
		if err != nil {
			return nil, fmt.Errorf("audit: plan %s: %w", ap.name, err)
		}
		out, err := Attack(ctx, ao)
		var oe *OptionError
		switch {
		case errors.As(err, &oe):
			return nil, fmt.Errorf("audit: plan %s: %w", ap.name, err)
		case err != nil && ctx.Err() != nil:
			cols = append(cols, reports.AuditColumn{Plan: ap.name, Dir: pdir, NotRun: "interrupted: " + err.Error()})
			continue
		case err != nil:
			cols = append(cols, reports.AuditColumn{Plan: ap.name, Dir: pdir, Err: err})
			continue
		}
		if o.OnPlan != nil {
			if err := o.OnPlan(ap.name, pdir, out); err != nil {
				return nil, err
			}
		}
		cols = append(cols, reports.AuditColumn{Plan: ap.name, Doc: out.Document, Dir: pdir, Measured: measurements(out.Document)})
	}
	return reports.BuildAudit(target, PolicySummary(pol), cols), nil
}

// auditAttack is plan's attack: forPlan's, else base with the plan.
func auditAttack(plan, dir string, base AttackOptions, forPlan func(string, string) (AttackOptions, error)) (AttackOptions, error) {
	if forPlan != nil {
		return forPlan(plan, dir)
	}
	p, err := attacks.Load(plan)
	if err != nil {
		return base, optionWrap(err)
	}
	base.Plan = p
	base.HistoryFile = filepath.Join(dir, "history.jsonl")
	return base, nil
}

// PolicySummary is the declared policy as reports show it.
func PolicySummary(p *policy.Policy) reports.PolicySummary {
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
