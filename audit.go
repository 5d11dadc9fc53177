package rlverify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/discover"
	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/faults"
	"github.com/rlverify/rlverify/internal/suggest"
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
	pol *policy.Policy
	// service: the targets are rate-limit services (grpc://), which get
	// descriptors Envoy built, not requests.
	service   bool
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

func firstAnchored(a *auditScope) string {
	longest := time.Duration(0)
	for _, t := range a.pol.Tiers {
		for _, l := range t.Limits {
			if l.AnchoredAtFirst() {
				if l.W() <= maxFirstEdge {
					return ""
				}
				longest = max(longest, l.W())
			}
		}
	}
	if longest > 0 {
		// A one-off quota spelt as a window of days: its close is beyond
		// any run.
		return fmt.Sprintf("every window anchored at a key's first request is longer than %s (%s): its close is beyond a run", maxFirstEdge, longest)
	}
	return "no window is anchored at a key's first request (anchor: first)"
}

// maxFirstEdge is the longest first-anchored window whose close the
// first-edge plan waits for.
const maxFirstEdge = 5 * time.Minute

func severalInstances(a *auditScope) string {
	if a.instances < 2 {
		return "one instance: give every instance of your deployment (Targets) to spread a key over them"
	}
	return ""
}

func needsFaults(kinds ...string) func(a *auditScope) string {
	return func(a *auditScope) string {
		for _, k := range kinds {
			if !a.faults[k] {
				if a.env == "external" && (k == faults.StoreDown || k == faults.StoreSlow) {
					return fmt.Sprintf("no way to inject %s: give StoreProxies, ToxiproxyURL or OnInject %s=… (see docs/environments.md)", k, k)
				}
				if a.env == "external" {
					return fmt.Sprintf("no way to inject %s into your service: give OnInject %s=… and OnClear %s=…", k, k, k)
				}
				return fmt.Sprintf("the %s environment cannot inject %s", a.env, k)
			}
		}
		return ""
	}
}

// notService skips plans about how a request carries its identity: a
// rate-limit service gets the descriptor Envoy built, so spelling, length and
// X-Forwarded-For are Envoy's concern.
const notService = "a rate-limit service gets descriptors Envoy built, not requests: how a request spells its key is Envoy's concern"

func httpIdentity(a *auditScope) string {
	if a.service {
		return notService
	}
	return ""
}

func untrustedXFF(a *auditScope) string {
	if a.service {
		return notService
	}
	if a.pol.Identity.TrustsLoopback() {
		return "the policy trusts X-Forwarded-For from loopback: the address is part of the identity"
	}
	return ""
}

func noMaxLength(a *auditScope) string {
	if a.service {
		return notService
	}
	if a.pol.Identity.MaxLength > 0 {
		return fmt.Sprintf("the policy declares identity.max_length %d: the bypass plan's long variant probes past it", a.pol.Identity.MaxLength)
	}
	return ""
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

func exemptClass(a *auditScope) string {
	if len(a.pol.Exempt) == 0 {
		return "the policy declares no exempt class"
	}
	return ""
}

func delaying(a *auditScope) string {
	if !a.pol.Delays() {
		return "the policy declares no delay (a limiter that holds requests instead of refusing them)"
	}
	return ""
}

func declaresCost(a *auditScope) string {
	if a.pol.Cost == nil {
		return "the policy declares no cost (every request costs one)"
	}
	if a.service {
		return "a rate-limit service is asked by descriptor: a request's weight (Envoy's hits_addend) is not sent"
	}
	return ""
}

// refills skips a plan that waits for a refill or a window edge when a
// limit of the policy is a one-off quota: no run lasts until it refills.
// Plans that only drain, or idle until full (which does not wait for a
// one-off quota and says so), still run: an admission past the quota is
// oversell there.
func refills(next func(*auditScope) string) func(*auditScope) string {
	return func(a *auditScope) string {
		for _, t := range a.pol.Tiers {
			for _, l := range t.Limits {
				if l.NeverRefills() {
					return fmt.Sprintf("tier %s's limit %s is a one-off quota (never refills): the plan waits for a refill or window edge that no run reaches", t.Name, l.Name)
				}
			}
		}
		return next(a)
	}
}

// changeOfPlanTier is the policy's first declared limit change of the tier
// the limit-change plans' keys get that raises (raise) or lowers (!raise)
// its limits.
func changeOfPlanTier(pol *policy.Policy, raise bool) (*policy.Change, bool) {
	t, ok := attacks.PlanTier(pol, "free-changed")
	if !ok {
		return nil, false
	}
	for i := range pol.Changes {
		if c := &pol.Changes[i]; c.Tier == t.Name && pol.ChangeRaises(c) == raise {
			return c, true
		}
	}
	return nil, false
}

// declaresChange: limit-change runs with a declared lowering, limit-raise
// with a declared raise, of the plans' tier.
func declaresChange(raise bool) func(a *auditScope) string {
	return func(a *auditScope) string {
		what := "lowers"
		if raise {
			what = "raises"
		}
		if len(a.pol.Changes) == 0 {
			return "the policy declares no limit change (changes)"
		}
		if _, ok := changeOfPlanTier(a.pol, raise); !ok {
			return fmt.Sprintf("no declared limit change %s the limits of the tier the plan's keys get (free-…)", what)
		}
		return needsFaults(faults.LimitChange)(a)
	}
}

// applyDeclaredChange makes a limit-change plan apply the policy's own
// change instead of the shipped policy's ("halve" lowers, "double" raises).
func applyDeclaredChange(plan *attacks.Plan, pol *policy.Policy, raise bool) {
	c, ok := changeOfPlanTier(pol, raise)
	if !ok {
		return
	}
	for i := range plan.Phases {
		if ph := &plan.Phases[i]; ph.Kind == attacks.KindFault && ph.Fault == faults.LimitChange && ph.Action == "inject" {
			ph.Param = c.Name
		}
	}
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
	{"precision", refills(always)},
	{"idle-refill", always},
	{"boundary-burst", refills(windowsOnly)},
	{"first-edge", refills(firstAnchored)},
	{"retry-after", refills(always)},
	{"overload", always},
	{"tenant-isolation", always},
	{"similar-keys", always},
	{"long-keys", noMaxLength},
	{"spoof-tenants", untrustedXFF},
	{"tiers", severalTiers},
	{"bypass", httpIdentity},
	{"exempt", exemptClass},
	{"delay", delaying},
	{"weighted", declaresCost},
	{"multi-instance", severalInstances},
	{"retry-elsewhere", refills(severalInstances)},
	{"refill-elsewhere", refills(severalInstances)},
	{"global-guard", globalGuard},
	{"store-outage", needsFaults(faults.StoreDown)},
	{"slow-store", needsFaults(faults.StoreSlow)},
	{"rules-unavailable", needsFaults(faults.RulesDown)},
	{"clock-skew", needsFaults(faults.ClockSkew)},
	{"clock-step", needsFaults(faults.ClockSkew)},
	{"limit-change", declaresChange(false)},
	{"limit-raise", declaresChange(true)},
	{"regions", embeddedOnly},
}

// AuditOptions configure an audit: every built-in plan that applies to
// the declared policy, run against one target, merged into one verdict per
// property.
type AuditOptions struct {
	// Attack is the target and the settings every plan runs with: each
	// plan runs with Attack.ForPlan (its folder Dir/PLAN/), quietly (no
	// Log, no Progress). Its Policy defaults, for a limiter rlverify
	// starts, to the built-in policy: a plan's own policy (retry-after's
	// slow refill) is not what the audited limiter enforces.
	Attack AttackOptions
	// PlanLoad are the options plans are read with (attacks.Load).
	PlanLoad []attacks.LoadOption
	// Plans, when set, runs only these of the audit's plans.
	Plans []string
	// PlanFiles are the user's own plan files, run after the audit's
	// plans and judged against the same declared policy; each column is
	// named "NAME (FILE)". A plan name the audit already has is an error.
	PlanFiles []string
	// Dir keeps each plan's history in Dir/PLAN/ (a temporary directory,
	// removed afterwards, when empty).
	Dir string
	// Log receives a line as each plan starts (may be nil).
	Log func(format string, args ...any)
	// OnPlan, when set, is called with each judged plan and its folder.
	OnPlan func(plan, dir string, out *Outcome) error
	// Discover, when set, lets an audit of your own service (Attack.Targets
	// or Handler) without a declared policy (Attack.Policy nil) discover
	// the policy first: its Targets and Request default to Attack's. The
	// audit then judges only what needs no promise and says so (see
	// NeedsPromise). Without it, such an audit is a MissingPolicyError.
	Discover *discover.Options
	// OnDiscovered, when set, receives the discovered policy before the
	// first plan runs (the command saves it beside the plans' folders); an
	// error ends the audit.
	OnDiscovered func(*Discovery) error
	// DiscoverBeside, with a declared policy and Discover, discovers the
	// policy too and puts each declared number beside the discovered one
	// (the property DiscoveredProperty).
	DiscoverBeside bool
}

// NeedsPromise are the properties whose verdict needs the service's own
// declared policy: is K right, is the refill fast enough, does the failure
// mode match. Against a discovered policy they are measured, not judged.
// The others (headers against behaviour, Retry-After honoured, remaining
// falling, keys isolated, instances sharing a quota, identity spellings)
// are properties of the service itself and are judged either way.
var NeedsPromise = []string{"oversell", "under-admission", "fail-mode", "downstream", checks.CalibrationCheck, "regions"}

// Validate checks the audit's own options (each plan's are checked as it
// runs); errors are *OptionError naming the field.
func (o AuditOptions) Validate() error {
	external := o.Attack.env() == EnvExternal
	if o.DiscoverBeside && (!external || o.Attack.Policy == nil) {
		return fieldErr("DiscoverBeside", "puts a declared policy beside the discovered one: it needs your own service (Targets) and its declared Policy (without one the audit discovers anyway)")
	}
	for _, n := range o.Plans {
		if !slices.Contains(AuditPlanNames(), n) {
			return fieldErr("Plans", "%q: not a plan of the audit%s (%s)", n, suggest.DidYouMean(n, AuditPlanNames()), strings.Join(AuditPlanNames(), ", "))
		}
	}
	return nil
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
// option error or an unreachable target (envs.ErrUnreachable) does. It stops before the next plan once ctx ends.
func Audit(ctx context.Context, o AuditOptions) (*reports.Audit, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	type filePlan struct {
		plan       *attacks.Plan
		name, file string
	}
	var files []filePlan
	for _, f := range o.PlanFiles {
		if !strings.ContainsAny(f, `/\`) {
			f = "./" + f // a file, even when named like a built-in plan
		}
		p, err := attacks.Load(f, o.PlanLoad...)
		if err != nil {
			return nil, fieldErr("PlanFiles", "%s: %w", f, err)
		}
		if slices.Contains(AuditPlanNames(), p.Name) || slices.ContainsFunc(files, func(x filePlan) bool { return x.name == p.Name }) {
			return nil, fieldErr("PlanFiles", "%s: plan name %q is already a plan of this audit; give the file's plan another name", f, p.Name)
		}
		files = append(files, filePlan{p, p.Name, f})
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
	var disc *Discovery
	if pol == nil && base.Env == EnvExternal {
		if o.Discover == nil {
			return nil, missingPolicy(base)
		}
		if base.Handler != nil {
			return nil, optionErr("audit: discovery probes URLs; serve the handler and give its URL, or declare its policy")
		}
		do := *o.Discover
		if len(do.Targets) == 0 {
			do.Targets = base.Targets
		}
		if do.Request.Method == "" && do.Request.Body == "" && len(do.Request.Headers) == 0 {
			do.Request = base.Request
		}
		d, err := Discover(ctx, DiscoverOptions{Options: do, AllowRemote: base.AllowRemote, Overrides: base.Overrides, KeysFile: base.KeysFile})
		if err != nil {
			return nil, fmt.Errorf("audit: discovering the policy: %w", err)
		}
		disc, pol, base.Policy = d, d.Policy, d.Policy
		if o.OnDiscovered != nil {
			if err := o.OnDiscovered(d); err != nil {
				return nil, err
			}
		}
	}
	var beside *Discovery
	if disc == nil && pol != nil && base.Env == EnvExternal && base.Handler == nil && o.Discover != nil && o.DiscoverBeside {
		// Declared and Discover set: discover too, and put each declared
		// number beside the discovered one.
		do := *o.Discover
		if len(do.Targets) == 0 {
			do.Targets = base.Targets
		}
		if do.Request.Method == "" && do.Request.Body == "" && len(do.Request.Headers) == 0 {
			do.Request = base.Request
		}
		if do.Identity.In == "" {
			do.Identity = policy.Identity{In: pol.Identity.In, Name: pol.Identity.Name}
		}
		d, err := Discover(ctx, DiscoverOptions{Options: do, AllowRemote: base.AllowRemote, Overrides: base.Overrides, KeysFile: base.KeysFile})
		if err != nil {
			return nil, fmt.Errorf("audit: discovering the policy to compare with the declared one: %w", err)
		}
		beside = d
	}
	if pol == nil {
		pol = policy.Default()
		base.Policy = pol
	}
	base.Log, base.Progress, base.ProgressDone = nil, nil, nil
	if x, ok := base.Environment.(envs.External); ok && len(x.StoreProxies) > 0 && x.Running == nil {
		// One set of store proxies for every plan: stopped between plans,
		// they would be a store outage nobody declared, and the service's
		// store client could still be backing off when the next plan starts.
		sp, err := envs.StartStoreProxy(x.StoreProxies)
		if err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
		defer sp.Close()
		x.Running = sp
		base.Environment = x
	}
	scope := &auditScope{pol: pol, env: base.Env, instances: len(base.Targets), faults: map[string]bool{}}
	scope.service, _ = serviceTargets(base.Targets)
	if base.Handler != nil {
		scope.instances = 1
	}
	if base.Env != EnvExternal {
		scope.instances = 3 // the built-in environments start what a plan needs
		for _, k := range faults.Kinds {
			scope.faults[k] = true
		}
	} else if x, ok := base.Environment.(envs.External); ok {
		for _, k := range faults.Kinds {
			scope.faults[k] = x.CanInject(k)
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
	// hookFailed, once a fault command failed, says so: the service may
	// still be in that fault, so no later plan is run against it.
	var hookFailed string
	// run runs plan as column name in pdir.
	run := func(plan *attacks.Plan, name, pdir string) error {
		if hookFailed != "" {
			cols = append(cols, reports.AuditColumn{Plan: name, NotRun: "not run: " + hookFailed})
			return nil
		}
		if err := os.MkdirAll(pdir, 0o755); err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		if o.Log != nil {
			o.Log("audit: %s …", name)
		}
		out, err := Attack(ctx, base.ForPlan(plan, pdir))
		var oe *OptionError
		switch {
		case errors.As(err, &oe):
			return fmt.Errorf("audit: plan %s: %w", name, err)
		case err != nil && ctx.Err() != nil:
			cols = append(cols, reports.AuditColumn{Plan: name, Dir: pdir, NotRun: "interrupted: " + err.Error()})
			return nil
		case errors.Is(err, envs.ErrUnreachable), errors.Is(err, ErrServiceUnfit):
			// Every other plan would end the same way: stop at once
			// rather than report a table of unknowns.
			return fmt.Errorf("audit: plan %s: %w; no further plan was run", name, err)
		case err != nil:
			cols = append(cols, reports.AuditColumn{Plan: name, Dir: pdir, Err: err})
			return nil
		}
		if o.OnPlan != nil {
			if err := o.OnPlan(name, pdir, out); err != nil {
				return err
			}
		}
		col := reports.AuditColumn{Plan: name, Doc: out.Document, Dir: pdir, Measured: measurements(out.Document)}
		if out.Stopped != nil {
			out.Document.Interrupted, out.Document.Reason = true, "the plan did not complete: "+out.Stopped.Error()
			if errors.Is(out.Stopped, envs.ErrHook) {
				hookFailed = fmt.Sprintf("a fault command failed in plan %s, so the service may still be in that fault (%v)", name, out.Stopped)
			}
		}
		cols = append(cols, col)
		return nil
	}
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
		plan, err := attacks.Load(ap.name, o.PlanLoad...)
		if err != nil {
			return nil, err
		}
		if ap.name == "limit-change" || ap.name == "limit-raise" {
			applyDeclaredChange(plan, pol, ap.name == "limit-raise")
		}
		if err := run(plan, ap.name, filepath.Join(dir, ap.name)); err != nil {
			return nil, err
		}
	}
	for i, f := range files {
		if ctx.Err() != nil {
			break
		}
		// The folder is numbered: a plan's name is the user's text.
		if err := run(f.plan, fmt.Sprintf("%s (%s)", f.name, filepath.Base(f.file)), filepath.Join(dir, fmt.Sprintf("plan-file-%d", i+1))); err != nil {
			return nil, err
		}
	}
	a := reports.BuildAudit(target, PolicySummary(pol), cols)
	if disc != nil {
		a.NotDeclared(NeedsPromise, discover.Summary(disc.Result))
	}
	if beside != nil {
		besideDeclared(a, discover.Compare(pol, beside.Result))
	}
	return a, nil
}

// DiscoveredProperty is the audit property that puts the declared policy
// beside the discovered one.
const DiscoveredProperty = "declared-vs-discovered"

// besideDeclared adds each declared number beside the discovered one to a
// (its measured table) and a property that fails, with the evidence, when a
// declared value lies outside what discovery measured.
func besideDeclared(a *reports.Audit, cs []discover.Comparison) {
	p := reports.Property{Name: DiscoveredProperty, Verdict: checks.Pass, DecidedBy: []string{"discover"}}
	bad := 0
	for _, c := range cs {
		v := checks.Pass
		if c.Mismatch {
			v = checks.Fail
			bad++
			p.Evidence = append(p.Evidence, reports.PlanEvidence{Plan: "discover", Evidence: checks.Evidence{Message: c.String()}})
		}
		a.Measured = append(a.Measured, checks.Measurement{Name: "discovered " + c.Name, Declared: c.Declared, Measured: c.Discovered, Verdict: v})
	}
	if bad > 0 {
		p.Verdict = checks.Fail
		p.Summary = fmt.Sprintf("%d of %d declared values lie outside what discovery measured", bad, len(cs))
	} else {
		p.Summary = fmt.Sprintf("every one of %d declared values lies within what discovery measured", len(cs))
	}
	a.Properties = append(a.Properties, p)
	a.Verdict = checks.Merge(a.Verdict, p.Verdict)
}

// ForPlan is o for another plan, kept in dir (its history in
// dir/history.jsonl): the plan varies, every other option stays.
func (o AttackOptions) ForPlan(plan *attacks.Plan, dir string) AttackOptions {
	o.Plan, o.Dir, o.HistoryFile = plan, dir, filepath.Join(dir, "history.jsonl")
	return o
}

// PolicySummary is the declared policy as reports show it.
func PolicySummary(p *policy.Policy) reports.PolicySummary {
	s := reports.PolicySummary{Name: p.Name, Source: p.Source, FailMode: reports.FailModeOf(p)}
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
