package rlverify

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/service"
)

// MatrixRow proves one defect's diagnosis: the same plan against a
// limiter that keeps every promise (every check must pass or have nothing to
// judge) and one with one defect (its root check must fail, the checks it
// explains must say so, every other check must pass or have nothing to
// judge).
type MatrixRow struct {
	Plan      string
	Good, Bad string
	// Store is "redis" when the plan needs shared state.
	Store     string
	Instances int
	// Regions > 1 runs both in that many regions, RegionSync and
	// RegionLatency apart; GoodMode and BadMode are each run's region mode.
	Regions                   int
	RegionSync, RegionLatency time.Duration
	GoodMode, BadMode         string
	// BadLimiterPolicy is what the faulty run's limiter enforces instead
	// of the declared policy (a shipped policy name or a file).
	BadLimiterPolicy string
	// Setting describes each run when the limiter is the same.
	GoodSetting, BadSetting string
	// Root is the check the defect is rooted at; Explained the checks whose
	// violations it explains.
	Root      string
	Explained []string
	// MayExplain are checks the defect shows in on some runs only (timing
	// decides): each passes or is explained by Root.
	MayExplain []string
}

// MutationMatrix is the diagnosis matrix Selftest runs and the README
// prints.
var MutationMatrix = []MatrixRow{
	{Plan: "concurrent-burst", Good: "token-bucket", Bad: "faulty/racy-token-bucket", Root: "oversell", Explained: []string{"downstream"}},
	{Plan: "concurrent-burst", Good: "token-bucket", Bad: "faulty/racy-token-bucket", Store: "redis", Instances: 3, Root: "oversell", Explained: []string{"instances", "downstream"}},
	{Plan: "boundary-burst", Good: "conservative/sliding-log", Bad: "faulty/unweighted-fixed-window", Root: "oversell", Explained: []string{"downstream"}},
	{Plan: "idle-refill", Good: "token-bucket", Bad: "faulty/uncapped-refill", Root: "oversell", Explained: []string{"token-bounds", "headers", "downstream"}},
	{Plan: "idle-refill", Good: "conservative/sliding-log", Bad: "faulty/deduct-on-reject", Root: "under-admission", Explained: []string{"retry-after", "headers"}},
	// Clients that kept sending while refused could never honour their
	// advice: refusals that cost tokens explain it.
	{Plan: "overload", Good: "token-bucket", Bad: "faulty/deduct-on-reject", Root: "under-admission", Explained: []string{"retry-after", "headers"}},
	{Plan: "concurrent-burst", Good: "token-bucket", Bad: "faulty/remaining-off-by-one", Root: "token-bounds"},
	// One too low is as wrong as one too high: overload's first requests
	// come one by one from a whole bucket.
	{Plan: "overload", Good: "token-bucket", Bad: "faulty/remaining-one-low", Root: "token-bounds"},
	{Plan: "concurrent-burst", Good: "token-bucket", Bad: "faulty/long-reset", Root: "headers"},
	// Exact decisions, absurd advice (10^9 s): no wrongful refusal behind it.
	{Plan: "concurrent-burst", Good: "token-bucket", Bad: "faulty/absurd-retry-after", Root: "retry-after"},
	// Exact decisions, advice ten times the wait (2 s where 0.2 s is due):
	// within a full refill, proven where the state is known.
	{Plan: "precision", Good: "token-bucket", Bad: "faulty/tenfold-retry-after", Root: "retry-after", Explained: []string{"calibration"}},
	{Plan: "retry-after", Good: "token-bucket", Bad: "faulty/short-retry-after", Root: "retry-after"},
	{Plan: "concurrent-burst", Good: "token-bucket", Bad: "faulty/no-retry-after", Root: "retry-after"},
	{Plan: "tenant-isolation", Good: "token-bucket", Bad: "faulty/shared-bucket", Root: "isolation", Explained: []string{"under-admission", "token-bounds", "retry-after"}},
	// Whether a request sent at its advised time meets the other key's
	// traffic depends on timing: retry-after shows it in some runs.
	{Plan: "similar-keys", Good: "token-bucket", Bad: "faulty/shared-prefix", Root: "isolation", Explained: []string{"under-admission", "token-bounds"},
		MayExplain: []string{"retry-after"}},
	// Two API keys, one spoofable client address: a limiter keyed on the
	// address merges the tenants.
	{Plan: "spoof-tenants", Good: "token-bucket", Bad: "faulty/address-only", Root: "isolation", Explained: []string{"under-admission"},
		MayExplain: []string{"token-bounds", "retry-after"}},
	{Plan: "multi-instance", Good: "token-bucket", Bad: "faulty/local-only", Store: "redis", Instances: 3, Root: "instances", Explained: []string{"oversell", "downstream"},
		// Round robin over instances that each keep their own count makes
		// consecutive answers report remaining counts no one bucket could.
		MayExplain: []string{"token-bounds"}},
	{Plan: "multi-instance-20", Good: "token-bucket", Bad: "faulty/local-only", Store: "redis", Instances: 20, Root: "instances", Explained: []string{"oversell", "downstream"},
		// Twenty buckets' remaining counts interleave: consecutive answers
		// report counts no one bucket could, when timing puts them close.
		MayExplain: []string{"token-bounds"}},
	// Drained on one instance, burst on the other 700ms later: state kept
	// per instance starts the second full.
	{Plan: "refill-elsewhere", Good: "token-bucket", Bad: "faulty/local-only", Store: "redis", Instances: 2, Root: "instances", Explained: []string{"oversell", "downstream"},
		MayExplain: []string{"token-bounds"}},
	{Plan: "clock-skew", Good: "token-bucket", Bad: "faulty/instance-clock", Store: "redis", Instances: 3, Root: "oversell", Explained: []string{"instances", "downstream"},
		// The skewed instance's remaining counts are impossible when it
		// answers just after another instance consumed.
		MayExplain: []string{"token-bounds"}},
	// One instance's wall clock steps 3s forward, later back: a limiter
	// that trusts it credits a whole bucket at the first step and stalls
	// after the second, one defect named after the step.
	{Plan: "clock-step", Good: "token-bucket", Bad: "faulty/wall-clock", Root: "oversell", Explained: []string{"under-admission", "retry-after", "downstream"},
		// Remaining counts right after the credit are impossible for one
		// bucket on some runs only.
		MayExplain: []string{"token-bounds"}},
	// A declared limit change (policies/limit-change.yaml: free 10 at 5/s
	// lowered to 5 at 2/s): a limiter deaf to it overruns the new limit, one
	// that rebuilds its buckets admits a fresh burst across it.
	{Plan: "limit-change", Good: "token-bucket", Bad: "faulty/keeps-old-limit", Root: "oversell"},
	{Plan: "limit-change", Good: "token-bucket", Bad: "faulty/reload-resets", Root: "oversell"},
	// One that enforces the lowered limit and advertises the old one.
	{Plan: "limit-change", Good: "token-bucket", Bad: "faulty/advertises-old-limit", Root: "headers"},
	// A declared raise (free 10 at 5/s raised to 20 at 20/s): a limiter
	// deaf to it refuses wrongfully once a key has refilled under the new
	// limit; one that rebuilds its buckets admits beyond even the raised
	// limit across it.
	{Plan: "limit-raise", Good: "token-bucket", Bad: "faulty/keeps-old-limit", Root: "under-admission", Explained: []string{"token-bounds"}},
	{Plan: "limit-raise", Good: "token-bucket", Bad: "faulty/reload-resets", Root: "oversell"},
	{Plan: "store-outage", Good: "token-bucket", Bad: "faulty/unguarded-store", Store: "redis", Root: "fail-mode"},
	// The overrun after the outage is the race oversell proved before it,
	// not credit created by the downtime.
	{Plan: "outage-burst", Good: "token-bucket", Bad: "faulty/racy-token-bucket", Store: "redis", Root: "oversell", Explained: []string{"fail-mode", "downstream"}},
	{Plan: "rules-unavailable", Good: "token-bucket", Bad: "faulty/no-rule-defaults", Root: "fail-mode"},
	{Plan: "concurrent-burst", Good: "token-bucket", Bad: "faulty/forward-rejected", Root: "downstream"},
	{Plan: "bypass", Good: "token-bucket", Bad: "faulty/trust-xff", Root: "bypass", Explained: []string{"downstream"}},
	{Plan: "bypass", Good: "token-bucket", Bad: "faulty/racy-token-bucket", Root: "oversell", Explained: []string{"downstream"}},
	{Plan: "bypass", Good: "token-bucket", Bad: "faulty/local-only", Store: "redis", Instances: 3, Root: "instances", Explained: []string{"oversell", "downstream"}},
	{Plan: "precision", Good: "token-bucket", Bad: "token-bucket", BadLimiterPolicy: "faster-refill",
		GoodSetting: "as declared", BadSetting: "refilling 10% faster than declared", Root: "calibration", Explained: []string{"oversell"}},
	// A limiter declared to delay (the delayed policy: wait up to 600ms)
	// that refuses at once instead: every refusal whose wait fitted.
	{Plan: "delay", Good: "token-bucket", Bad: "token-bucket", BadLimiterPolicy: "default",
		GoodSetting: "delays as declared (x/time/rate reservations, max_wait 600ms)", BadSetting: "refuses at once (no delay)", Root: "delay"},
	{Plan: "regions", Good: "token-bucket", Bad: "token-bucket", Store: "redis", Instances: 2,
		Regions: 2, RegionSync: 50 * time.Millisecond, RegionLatency: 10 * time.Millisecond,
		GoodMode: service.RegionReplicated, BadMode: service.RegionIndependent,
		GoodSetting: "2 regions, replicated + reconciled every 50ms", BadSetting: "2 regions, independent quotas", Root: "regions", Explained: []string{"downstream"}},
}

// MatrixResult is one row's outcome: both runs' verdicts, the faulty
// run's strongest evidence for the root check, or why the row could not run.
type MatrixResult struct {
	Row         MatrixRow
	Good, Bad   []checks.Result
	BadEvidence string
	Err         error
}

// OK reports whether the row came out as it must (see Problems).
func (m MatrixResult) OK() bool { return m.Err == nil && len(m.Problems()) == 0 }

// Problems lists how the row departs from its expectation.
func (m MatrixResult) Problems() []string {
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

// ResultVerdict is the verdict of check name in rs ("" when absent).
func ResultVerdict(rs []checks.Result, name string) checks.Verdict {
	for _, r := range rs {
		if r.Name == name {
			return r.Verdict
		}
	}
	return ""
}

// RunMatrixRow runs both attacks of row on the embedded environment, with
// every check, keeping their histories under dir.
func RunMatrixRow(ctx context.Context, row MatrixRow, dir string) MatrixResult {
	res := MatrixResult{Row: row}
	run := func(limiter, sub, mode, limiterPolicy string) ([]checks.Result, error) {
		what := fmt.Sprintf("plan %s, limiter %s", row.Plan, limiter)
		plan, err := attacks.Load(row.Plan)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		o := AttackOptions{
			Plan: plan, Limiter: limiter, Store: row.Store, Instances: row.Instances, Seed: 1,
			Regions: row.Regions, RegionMode: mode, RegionSync: row.RegionSync, RegionLatency: row.RegionLatency,
			HistoryFile: filepath.Join(dir, sub, "history.jsonl"),
		}
		if limiterPolicy != "" {
			if o.LimiterPolicy, err = LoadPolicy(limiterPolicy); err != nil {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
		}
		if err := os.MkdirAll(filepath.Dir(o.HistoryFile), 0o755); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out, err := Attack(ctx, o)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if out.Stopped != nil {
			return nil, fmt.Errorf("%s: the plan did not complete: %w", what, out.Stopped)
		}
		return out.Results, nil
	}
	var err error
	if res.Good, err = run(row.Good, "good", row.GoodMode, ""); err != nil {
		res.Err = err
		return res
	}
	if res.Bad, err = run(row.Bad, "bad", row.BadMode, row.BadLimiterPolicy); err != nil {
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

// SelftestOptions choose the rows of the matrix to run.
type SelftestOptions struct {
	// Check, when set, runs only the rows whose defect is rooted at it.
	Check string
	// OnRow receives each row's result as it is done.
	OnRow func(MatrixResult)
}

// Selftest runs the mutation matrix (every row, or those of o.Check) on
// the embedded environment and returns the rows' results; it stops early
// when ctx ends. Each MatrixResult says whether its row came out as it
// must (OK).
func Selftest(ctx context.Context, o SelftestOptions) ([]MatrixResult, error) {
	dir, err := os.MkdirTemp("", "rlverify-selftest-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var results []MatrixResult
	for i, row := range MutationMatrix {
		if o.Check != "" && row.Root != o.Check {
			continue
		}
		r := RunMatrixRow(ctx, row, filepath.Join(dir, fmt.Sprint(i)))
		results = append(results, r)
		if o.OnRow != nil {
			o.OnRow(r)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return results, nil
}
