package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/internal/console"
	"github.com/rlverify/rlverify/reports"
	"github.com/rlverify/rlverify/service"
)

// attackFlags are attack's flags: most set the library's options
// directly (o); the rest name files and choices read in options.
type attackFlags struct {
	o             rlverify.AttackOptions
	plan          string
	policyFile    string
	limiterPolicy string
	out, history  string
	formats       []string
	env           string
	ext           envs.ExternalSettings
	docker        dockerImages
	shard         string
	dist          distFlags
	quiet         bool
	failOn        []string
	thresholds    []string
	shape         shapeFlags
	// force writes into a run folder that holds files.
	force bool
}

// dockerImages are the docker environment's images (docker_on.go).
type dockerImages struct {
	redisImage, limiterImage, limiterBinary string
	noPull                                  bool
}

func attackCmd() *cobra.Command {
	var f attackFlags
	c := &cobra.Command{
		Use:   "attack --plan NAME|FILE",
		Short: "Run an attack plan against a limiter, record the history, check it and report",
		Long: `Run an attack plan against the built-in reference limiters (the embedded
environment, the default) or your own instances (--env external --target URL),
stream every request to DIR/RUN-ID/history.jsonl (DIR/latest points at the
newest run), then judge the history.

Examples:
  rlverify attack --plan concurrent-burst
  rlverify attack --plan concurrent-burst --limiter faulty/racy-token-bucket
  rlverify attack --plan boundary-burst --limiter fixed-window --format json
  rlverify attack --plan concurrent-burst --env external --target http://127.0.0.1:8080 --policy my-policy.yaml
  rlverify attack --plan concurrent-burst --target http://127.0.0.1:8080/v1/orders \
      --method POST --header 'Content-Type: application/json' --body '{"sku": "{i}"}' \
      --identity bearer --keys keys.yaml --admitted 201 --policy my-policy.yaml`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			// 0 means "the default" to callers inside the process; given
			// on the command line it is a mistake.
			for _, name := range []string{"max-header-bytes", "max-headers"} {
				if fl := c.Flags().Lookup(name); fl.Changed && fl.Value.String() == "0" {
					return usageErr("--%s 0: want at least 1", name)
				}
			}
			return runAttack(c.Context(), &f, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	addAttackFlags(c.Flags(), &f)
	return c
}

// addAttackFlags registers attack's flags (selftest parses the same ones).
func addAttackFlags(fl *pflag.FlagSet, f *attackFlags) {
	fl.StringVar(&f.plan, "plan", "", "built-in plan name or plan file (see rlverify plans)")
	fl.StringVar(&f.o.Limiter, "limiter", "token-bucket", "reference limiter to attack in the embedded environment (see rlverify limiters)")
	fl.StringVar(&f.o.Store, "store", "", "state store of the reference limiter: memory or redis (default: redis when the plan needs it)")
	newRedisFlag(fl, &f.o.RedisURL, false, "use this Redis (redis://HOST:PORT[/DB]) instead of starting one (embedded env with the redis store; elsewhere a usage error)")
	fl.IntVar(&f.o.Instances, "instances", 0, "number of limiter instances (default: the plan's, else 1)")
	fl.StringVar(&f.policyFile, "policy", "", "declared policy YAML (default: the built-in policy)")
	fl.StringVar(&f.out, "out", "rlverify-out", outHelp("history.jsonl, result.json and the reports"))
	addForceFlag(fl, &f.force)
	fl.StringVar(&f.history, "history", "", "write the history to this file instead of DIR/RUN-ID/history.jsonl; - also streams it to stdout, for rlverify check --history - (stdout then carries only the history; the reports go to --out)")
	fl.StringSliceVar(&f.formats, "format", []string{"text"}, "report formats: "+strings.Join(reports.FormatNames(), ", ")+" (the first goes to stdout, all to --out)")
	addEnvFlags(fl, f, "environment: embedded (in process), local (redis-server processes), docker (testcontainers) or external (--target)")
	fl.StringArrayVar(&f.o.Targets, "target", nil, "base URL of an external instance (repeat for several); implies --env external")
	addExternalFlags(fl, &f.ext)
	fl.StringVar(&f.limiterPolicy, "limiter-policy", "", "built-in environments: the policy the reference limiter enforces, when it should differ from the declared --policy (a limiter configured unlike its promise)")
	fl.BoolVar(&f.o.AllowRemote, "allow-remote", false, "allow targets outside loopback (only attack services you own)")
	fl.Int64Var(&f.o.MaxRequests, "max-requests", attacks.DefaultMaxRequests, "stop after this many requests")
	fl.DurationVar(&f.o.MaxDuration, "max-duration", attacks.DefaultMaxDuration, "stop after this long")
	fl.DurationVar(&f.o.Timeout, "timeout", attacks.DefaultTimeout, "per-request timeout")
	fl.Int64Var(&f.o.MaxHeaderBytes, "max-header-bytes", attacks.DefaultMaxHeaderBytes, "a response whose header section is larger is cut off and counted as an error")
	fl.IntVar(&f.o.MaxHeaders, "max-headers", attacks.DefaultMaxHeaders, "a response with more header fields is cut off and counted as an error")
	fl.StringVar(&f.shard, "shard", "", "run shard i/n of the plan (e.g. 1/3) for several load machines")
	addDistFlags(fl, &f.dist)
	fl.Int64Var(&f.o.Seed, "seed", 1, "seed for random choices (instances, keys, jitter)")
	fl.StringSliceVar(&f.o.Checks.Only, "checks", nil, "run only these checks (default: all that apply)")
	fl.StringSliceVar(&f.o.Checks.Off, "checks-off", nil, "turn these checks off (promises the limiter knowingly does not keep, e.g. retry-after); the report says so")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress output")
	fl.StringVar(&f.o.RunID, "run-id", "", "tag appended to every key so runs never share limiter state (default: random; with --shard, derived from plan and seed so every shard uses the same keys)")
	fl.BoolVar(&f.o.KeepKeys, "keep-keys", false, "send the plan's keys unchanged (real API keys of your service); they are redacted in the history and reports")
	fl.StringSliceVar(&f.failOn, "fail-on", []string{"fail"}, failOnUsage)
	addThresholdFlag(fl, &f.thresholds)
	addShapeFlags(fl, &f.shape)
	fl.BoolVar(&f.o.Honest, "honest", false, "gateway limiters (nginx/…, haproxy/…, gubernator/…): judge against the policy the gateway really enforces, not the declared one (see docs/compare.md)")
}

// addEnvFlags registers the flags that say where the reference limiters
// run (attack and compare share them).
func addEnvFlags(fl *pflag.FlagSet, f *attackFlags, envUsage string) {
	fl.StringVar(&f.env, "env", "embedded", envUsage)
	fl.IntVar(&f.o.RedisCluster, "redis-cluster", 0, "local env: run a Redis Cluster of this many nodes (3 or more)")
	fl.StringVar(&f.docker.redisImage, "redis-image", "", redisImageHelp)
	fl.StringVar(&f.docker.limiterImage, "limiter-image", "", limiterImageHelp)
	fl.StringVar(&f.docker.limiterBinary, "limiter-binary", "", "docker env: static rlverify binary to build the limiter image from when it is missing")
	fl.BoolVar(&f.docker.noPull, "no-pull", false, "docker env: never pull an image; fail if one is not present locally")
	fl.IntVar(&f.o.Regions, "regions", 0, "run the reference token bucket in this many regions, each with --instances instances and its own Redis (embedded and docker; default: the plan's)")
	fl.StringVar(&f.o.RegionMode, "region-mode", service.RegionReplicated, "how regions share the quota: replicated (local replicas + reconciliation), strict (one global store), independent (no sharing)")
	fl.DurationVar(&f.o.RegionSync, "region-sync", 100*time.Millisecond, "reconciliation interval between regions (replicated mode)")
	fl.DurationVar(&f.o.RegionLatency, "region-latency", 20*time.Millisecond, "one-way latency between regions")
}

// attackResult is one attack judged.
type attackResult struct {
	out *rlverify.Outcome // its Stopped: why the plan stopped before its end
	// dir is the run's folder: the reports go there.
	dir string
	// report is where the first report format goes: stdout, unless stdout
	// carries the history (--history -).
	report io.Writer
	failOn *rlverify.FailOn
}

func runAttack(ctx context.Context, f *attackFlags, stdout, stderr io.Writer) error {
	r, err := attackOnce(ctx, f, stdout, stderr)
	if err != nil {
		return err
	}
	pathLine(stderr, r.out, len(f.o.Checks.Only) > 0)
	err = conclude(r.out.Document, r.out.Results, r.out.History, f.formats, r.dir, r.failOn, r.report, stderr)
	var ee *exitError
	noFinding := err == nil || (errors.As(err, &ee) && (ee.code == ExitInterrupted || ee.code == ExitRun ||
		(ee.code == ExitFail && len(ee.fails) == 1 && ee.fails[0] == checks.EvidenceCheck)))
	// A fault command that failed may have left the service in the fault:
	// exit 3 (docs/environments.md), even past a finding or a signal.
	if runE := r.out.Stopped; runE != nil && ((ctx.Err() == nil && noFinding) || errors.Is(runE, envs.ErrHook)) {
		// The plan could not be carried out: what was recorded passed, but
		// the run is not the proof the plan promises.
		return runErr(fmt.Errorf("the plan did not complete (%v); verdicts above cover what was recorded, history in %s", runE, r.out.HistoryFile))
	}
	return err
}

// attackOnce runs one plan as f says and judges its history; it renders
// nothing. Errors are usage or run errors (*exitError).
func attackOnce(ctx context.Context, f *attackFlags, stdout, stderr io.Writer) (*attackResult, error) {
	o, report, err := f.options(stdout, stderr)
	if err != nil {
		return nil, err
	}
	prep, err := rlverify.Prepare(o)
	if err != nil {
		return nil, fromLib(err)
	}
	dir, err := prep.UseFolder(f.out, f.force)
	if err != nil {
		return nil, outErr(err)
	}
	out, err := prep.Run(ctx)
	if err != nil {
		return nil, fromLib(err)
	}
	return &attackResult{out: out, dir: dir, report: report, failOn: o.FailOn}, nil
}

// options reads, checks and loads what f says into the library's options
// of one attack; report is where the first report format goes (stdout,
// unless stdout carries the history).
func (f *attackFlags) options(stdout, stderr io.Writer) (o rlverify.AttackOptions, report io.Writer, err error) {
	o, err = f.loadOptions(stdout, stderr)
	report = stdout
	if err == nil && f.history == rlverify.Stdin {
		// The history streams to stdout as it is recorded (so `attack
		// --history - | check --history -` works) and stdout carries
		// nothing else: the reports go to DIR only.
		o.HistoryCopy, report = stdout, io.Discard
		// A reader that goes away (`| head`) must not kill rlverify with
		// SIGPIPE before the history file gets its end record: the write
		// fails with EPIPE instead and the run stops (rlverify.ErrHistoryCopy).
		catchSIGPIPE()
	}
	return o, report, err
}

func (f *attackFlags) loadOptions(stdout, stderr io.Writer) (rlverify.AttackOptions, error) {
	o := f.o
	if f.plan == "" {
		return o, fromLib(o.Validate())
	}
	if err := checkRunBounds(f); err != nil {
		return o, err
	}
	var err error
	if o.Plan, err = attacks.Load(f.plan, f.shape.planOptions()...); err != nil {
		return o, usageWrap(err)
	}
	if err := f.common(&o); err != nil {
		return o, err
	}
	if o.Shard, o.Shards, err = rlverify.ParseShard(f.shard, f.dist.shardIndex); err != nil {
		return o, fromLib(err)
	}
	if o.StartAt, err = f.dist.start(time.Now()); err != nil {
		return o, usageWrap(err)
	}
	if o.Thresholds, err = parseThresholds(f.thresholds); err != nil {
		return o, usageWrap(err)
	}
	if f.history != "" && f.history != rlverify.Stdin {
		// Checked now, before a run folder is made: an existing file (a
		// policy, an earlier run's history) is not replaced without --force.
		o.HistoryFile = f.history
	}
	o.ReplaceHistory = f.force
	o.Log = func(format string, a ...any) {
		if !f.quiet {
			fmt.Fprintf(stderr, format+"\n", a...)
		}
	}
	o.Warn = func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }
	prog := console.New(stderr, f.quiet)
	o.Progress, o.ProgressDone = prog.Update, prog.Done
	return o, nil
}

// common reads what attack, audit and compare share into o: the failure
// rule, the formats, the policies, the request's shape and the environment.
func (f *attackFlags) common(o *rlverify.AttackOptions) error {
	var err error
	if o.FailOn, err = rlverify.ParseFailOn(f.failOn); err != nil {
		return fromLib(err)
	}
	for _, format := range f.formats {
		if _, err := reports.Lookup(format); err != nil {
			return usageWrap(fmt.Errorf("--format: %w", err))
		}
	}
	if f.policyFile != "" {
		if o.Policy, err = loadPolicy(f.policyFile); err != nil {
			return err
		}
	}
	if f.limiterPolicy != "" {
		if o.LimiterPolicy, err = loadPolicy(f.limiterPolicy); err != nil {
			return err
		}
	}
	if o.Request, err = f.shape.request(); err != nil {
		return usageWrap(err)
	}
	if err := f.shape.checkRate(); err != nil {
		return usageWrap(err)
	}
	o.Overrides, o.KeysFile, o.Checks.MaxErrorRate = f.shape.overrides(), f.shape.keysFile, f.shape.maxErrorRate
	o.Env = f.env
	if len(o.Targets) > 0 {
		o.Env = rlverify.EnvExternal
	}
	envOf := environments[o.Env]
	if f.ext.Any() {
		// Given elsewhere than to your own service, the library refuses them.
		envOf = environments[rlverify.EnvExternal]
	}
	if envOf != nil {
		if o.Environment, err = envOf(f); err != nil {
			return fromLib(err)
		}
	}
	return nil
}

// environments is the one table of the environments the command starts
// by --env: each reads its own flags into the library's value (nil: the
// library's default for that name).
var environments = map[string]func(f *attackFlags) (envs.Environment, error){
	rlverify.EnvEmbedded: nil,
	rlverify.EnvLocal:    nil,
	rlverify.EnvDocker:   dockerEnvironment,
	rlverify.EnvExternal: func(f *attackFlags) (envs.Environment, error) { return f.ext.Environment() },
}

// judge reads histories back (from disk; "-" from stdin), checks them and
// reports: the live run and `rlverify check` share the library's Check,
// so they give the same verdicts. When ctx ends (Ctrl-C, SIGTERM) it
// returns at once: exit 130.
func judge(ctx context.Context, o rlverify.CheckOptions, formats []string, out string, stdout, stderr io.Writer) error {
	o.PauseGC = true
	res, err := rlverify.Check(ctx, o)
	if err != nil {
		return fromLib(err)
	}
	pathLine(stderr, res, len(o.Checks.Only) > 0)
	return conclude(res.Document, res.Results, res.History, formats, out, o.FailOn, stdout, stderr)
}

// pathLine says which path judged res when it streamed or --checks chose.
func pathLine(stderr io.Writer, res *rlverify.Outcome, chose bool) {
	if res.Path == rlverify.Streaming || chose {
		fmt.Fprintf(stderr, "rlverify: judged on the %s path: %s\n", res.Path, res.PathWhy)
	}
}

// conclude renders doc and returns the exit the verdicts call for.
func conclude(doc *reports.Document, rs []checks.Result, h *history.History, formats []string, out string, fo *rlverify.FailOn, stdout, stderr io.Writer) error {
	if err := render(doc, formats, out, stdout); err != nil {
		return runErr(err)
	}
	for _, h := range doc.Hints() {
		fmt.Fprintln(stderr, "rlverify: "+flagMessage(errors.New(h.Advice))+h.Answer)
	}
	if doc.Verdict == checks.Modified {
		return cutExit(doc, stderr)
	}
	if fails := append(fo.Fails(rs), fo.ThresholdFails(doc.Thresholds)...); len(fails) > 0 {
		return &exitError{code: ExitFail, fails: fails}
	}
	if doc.Verdict == checks.Fail && h != nil {
		// A failure --fail-on set aside still outranks the cut in the
		// verdict; the exit is then the cut's, never 0 for a cut run.
		switch c, why := h.Completion(); c {
		case history.CutBySignal:
			return cutExit(&reports.Document{Verdict: checks.Interrupted, Reason: why}, stderr)
		case history.CutShort:
			return cutExit(&reports.Document{Verdict: checks.Incomplete, Reason: why}, stderr)
		}
	}
	return cutExit(doc, stderr)
}

// cutExit is the exit of a run that did not carry out its whole plan (nil
// for any other): 130 when a signal or a kill cut it, 3 when a step could
// not be done; 2 for a history modified after the run. Runs stopped by
// --max-* bounds the user chose are complete for what they asked.
func cutExit(doc *reports.Document, stderr io.Writer) error {
	switch doc.Verdict {
	case checks.Modified:
		// A history error (exit 2), whatever the checks said of it.
		return usageErr("the history was modified after the run (its end record's digest does not match); no verdict drawn from it stands: see docs/history.md")
	case checks.Interrupted:
		fmt.Fprintln(stderr, "rlverify: run interrupted; verdicts cover what was recorded")
		return &exitError{code: ExitInterrupted}
	case checks.Incomplete:
		return runErr(fmt.Errorf("the run is incomplete (%s); verdicts cover what was recorded", doc.Reason))
	}
	return nil
}

// render writes the reports of doc (see emitReports), plus result.json so
// `rlverify report` can render it again.
func render(doc *reports.Document, formats []string, out string, stdout io.Writer) error {
	doc.Reword(docWords)
	return emitReports(formats, out, "report", "result.json", stdout, func(f reports.Format, w io.Writer) error { return f.Render(w, doc) })
}
