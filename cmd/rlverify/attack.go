package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/envs/docker"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/reports"
	"github.com/rlverify/rlverify/service"
	"github.com/rlverify/rlverify/thresholds"
)

type attackFlags struct {
	plan       string
	limiter    string
	store      string
	redisURL   string
	instances  int
	policyFile string
	out        string
	formats    []string
	env        string
	targetURLs []string
	ext        externalFlags
	// limiterPolicy is what the reference limiter enforces when it should
	// differ from the declared policy (to prove that a mismatch is caught).
	limiterPolicy string
	allowRemote   bool
	maxRequests   int64
	// maxHeaderBytes and maxHeaders cap one response's header section.
	maxHeaderBytes int64
	maxHeaders     int
	maxDuration    time.Duration
	timeout        time.Duration
	shard          string
	seed           int64
	only           []string
	quiet          bool
	regions        int
	regionMode     string
	regionSync     time.Duration
	regionLat      time.Duration
	failOn         []string
	thresholds     []string
	runID          string
	keepKeys       bool
	history        string
	shape          shapeFlags
	off            []string
	dist           distFlags
	// honest judges a gateway against its honest policy.
	honest bool
	// local and docker environments
	redisCluster  int
	redisImage    string
	limiterImage  string
	limiterBinary string
	noPull        bool

	// force writes into a run folder that holds files; exactOut writes
	// into out itself (a plan of an audit, a column of a comparison).
	force, exactOut bool
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
	fl.StringVar(&f.limiter, "limiter", "token-bucket", "reference limiter to attack in the embedded environment (see rlverify limiters)")
	fl.StringVar(&f.store, "store", "", "state store of the reference limiter: memory or redis (default: redis when the plan needs it)")
	newRedisFlag(fl, &f.redisURL, false, "use this Redis (redis://HOST:PORT[/DB]) instead of starting one")
	fl.IntVar(&f.instances, "instances", 0, "number of limiter instances (default: the plan's, else 1)")
	fl.StringVar(&f.policyFile, "policy", "", "declared policy YAML (default: the built-in policy)")
	fl.StringVar(&f.out, "out", "rlverify-out", outHelp("history.jsonl, result.json and the reports"))
	addForceFlag(fl, &f.force)
	fl.StringVar(&f.history, "history", "", "write the history to this file instead of DIR/RUN-ID/history.jsonl; - also streams it to stdout, for rlverify check --history - (stdout then carries only the history; the reports go to --out)")
	fl.StringSliceVar(&f.formats, "format", []string{"text"}, "report formats: "+strings.Join(reports.FormatNames(), ", ")+" (the first goes to stdout, all to --out)")
	addEnvFlags(fl, f, "environment: embedded (in process), local (redis-server processes), docker (testcontainers) or external (--target)")
	fl.StringArrayVar(&f.targetURLs, "target", nil, "base URL of an external instance (repeat for several); implies --env external")
	addExternalFlags(fl, &f.ext)
	fl.StringVar(&f.limiterPolicy, "limiter-policy", "", "built-in environments: the policy the reference limiter enforces, when it should differ from the declared --policy (a limiter configured unlike its promise)")
	fl.BoolVar(&f.allowRemote, "allow-remote", false, "allow targets outside loopback (only attack services you own)")
	fl.Int64Var(&f.maxRequests, "max-requests", attacks.DefaultMaxRequests, "stop after this many requests")
	fl.DurationVar(&f.maxDuration, "max-duration", attacks.DefaultMaxDuration, "stop after this long")
	fl.DurationVar(&f.timeout, "timeout", attacks.DefaultTimeout, "per-request timeout")
	fl.Int64Var(&f.maxHeaderBytes, "max-header-bytes", attacks.DefaultMaxHeaderBytes, "a response whose header section is larger is cut off and counted as an error")
	fl.IntVar(&f.maxHeaders, "max-headers", attacks.DefaultMaxHeaders, "a response with more header fields is cut off and counted as an error")
	fl.StringVar(&f.shard, "shard", "", "run shard i/n of the plan (e.g. 1/3) for several load machines")
	addDistFlags(fl, &f.dist)
	fl.Int64Var(&f.seed, "seed", 1, "seed for random choices (instances, keys, jitter)")
	fl.StringSliceVar(&f.only, "checks", nil, "run only these checks (default: all that apply)")
	fl.StringSliceVar(&f.off, "checks-off", nil, "turn these checks off (promises the limiter knowingly does not keep, e.g. retry-after); the report says so")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress output")
	fl.StringVar(&f.runID, "run-id", "", "tag appended to every key so runs never share limiter state (default: random; with --shard, derived from plan and seed so every shard uses the same keys)")
	fl.BoolVar(&f.keepKeys, "keep-keys", false, "send the plan's keys unchanged (real API keys of your service); they are redacted in the history and reports")
	fl.StringSliceVar(&f.failOn, "fail-on", []string{"fail"}, failOnUsage)
	addThresholdFlag(fl, &f.thresholds)
	addShapeFlags(fl, &f.shape)
	fl.BoolVar(&f.honest, "honest", false, "gateway limiters (nginx/…, haproxy/…, gubernator/…): judge against the policy the gateway really enforces, not the declared one (see docs/compare.md)")
}

// addEnvFlags registers the flags that say where the reference limiters
// run (attack and compare share them).
func addEnvFlags(fl *pflag.FlagSet, f *attackFlags, envUsage string) {
	fl.StringVar(&f.env, "env", "embedded", envUsage)
	fl.IntVar(&f.redisCluster, "redis-cluster", 0, "local env: run a Redis Cluster of this many nodes (3 or more)")
	fl.StringVar(&f.redisImage, "redis-image", "", "docker env: Redis image (default $"+docker.EnvRedisImage+" or "+docker.DefaultRedisImage+")")
	fl.StringVar(&f.limiterImage, "limiter-image", "", "docker env: rlverify image for the limiter instances (default $"+docker.EnvLimiterImage+" or "+docker.DefaultLimiterImage+")")
	fl.StringVar(&f.limiterBinary, "limiter-binary", "", "docker env: static rlverify binary to build the limiter image from when it is missing")
	fl.BoolVar(&f.noPull, "no-pull", false, "docker env: never pull an image; fail if one is not present locally")
	fl.IntVar(&f.regions, "regions", 0, "run the reference token bucket in this many regions, each with --instances instances and its own Redis (embedded and docker; default: the plan's)")
	fl.StringVar(&f.regionMode, "region-mode", service.RegionReplicated, "how regions share the quota: replicated (local replicas + reconciliation), strict (one global store), independent (no sharing)")
	fl.DurationVar(&f.regionSync, "region-sync", 100*time.Millisecond, "reconciliation interval between regions (replicated mode)")
	fl.DurationVar(&f.regionLat, "region-latency", 20*time.Millisecond, "one-way latency between regions")
}

// attackResult is one attack judged.
type attackResult struct {
	doc      *reports.Document
	results  []checks.Result
	hist     *history.History
	histFile string
	// dir is the run's folder: the reports go there.
	dir string
	// report is where the first report format goes: stdout, unless stdout
	// carries the history (--history -).
	report io.Writer
	// runE is why the plan stopped before its end (nil when it ran whole).
	runE error
}

func runAttack(ctx context.Context, f *attackFlags, stdout, stderr io.Writer) error {
	fo, err := parseFailOn(f.failOn)
	if err != nil {
		return usageWrap(err)
	}
	r, err := attackOnce(ctx, f, stdout, stderr)
	if err != nil {
		return err
	}
	err = conclude(r.doc, r.results, r.hist, f.formats, r.dir, fo, r.report, stderr)
	var ee *exitError
	noFinding := err == nil || (errors.As(err, &ee) && (ee.code == ExitInterrupted ||
		(ee.code == ExitFail && len(ee.fails) == 1 && ee.fails[0] == checks.EvidenceCheck)))
	if r.runE != nil && ctx.Err() == nil && noFinding {
		// The plan could not be carried out: what was recorded passed, but
		// the run is not the proof the plan promises.
		return runErr(fmt.Errorf("the plan did not complete (%v); verdicts above cover what was recorded, history in %s", r.runE, r.histFile))
	}
	return err
}

// attackOnce runs one plan as f says and judges its history; it renders
// nothing. Errors are usage or run errors (*exitError).
func attackOnce(ctx context.Context, f *attackFlags, stdout, stderr io.Writer) (*attackResult, error) {
	if f.plan == "" {
		return nil, usageErr("attack: --plan is required (see rlverify plans)")
	}
	if err := checkRunBounds(f); err != nil {
		return nil, err
	}
	plan, err := attacks.Load(f.plan)
	if err != nil {
		return nil, usageWrap(err)
	}
	ts, err := planThresholds(plan, f)
	if err != nil {
		return nil, usageWrap(err)
	}
	policyFile := f.policyFile
	if policyFile == "" {
		policyFile = plan.Policy
	}
	pol, err := loadPolicy(policyFile)
	if err != nil {
		return nil, err
	}
	if pol, err = f.shape.apply(pol); err != nil {
		return nil, usageWrap(err)
	}
	shapeReq, err := f.shape.request()
	if err == nil {
		err = attacks.CheckRequest(plan, shapeReq)
	}
	if err != nil {
		return nil, usageWrap(err)
	}
	if err := f.shape.checkRate(); err != nil {
		return nil, usageWrap(err)
	}
	var keyFile *attacks.KeyFile
	if f.shape.keysFile != "" {
		if keyFile, err = attacks.LoadKeyFile(f.shape.keysFile, pol); err != nil {
			return nil, usageWrap(err)
		}
		if err := attacks.CheckKeys(plan, pol, keyFile); err != nil {
			return nil, usageWrap(err)
		}
	}
	if err := checks.Validate(f.only); err != nil {
		return nil, usageWrap(fmt.Errorf("--checks: %w", err))
	}
	if err := checks.Validate(f.off); err != nil {
		return nil, usageWrap(fmt.Errorf("--checks-off: %w", err))
	}
	if err := checks.Validate(pol.ChecksOff); err != nil {
		return nil, usageWrap(fmt.Errorf("policy %s: checks_off: %w", pol.Source, err))
	}
	for _, format := range f.formats {
		if _, err := reports.Lookup(format); err != nil {
			return nil, usageWrap(fmt.Errorf("--format: %w", err))
		}
	}
	shard, shards, err := f.dist.shard(f.shard)
	if err != nil {
		return nil, usageWrap(err)
	}
	startAt, err := f.dist.start(time.Now())
	if err != nil {
		return nil, usageWrap(err)
	}
	if len(f.targetURLs) > 0 {
		f.env = "external"
	}
	instances := f.instances
	if instances == 0 {
		instances = plan.MinInstances()
	} else if f.env == "embedded" && instances < plan.MinInstances() {
		return nil, usageErr("--instances %d: plan %s needs at least %d", instances, plan.Name, plan.MinInstances())
	}
	if f.regions == 0 && (f.env == "embedded" || f.env == "docker") {
		f.regions = plan.Regions
	}
	runID := f.runID
	if runID == "" && shards > 1 {
		sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", plan.Name, f.seed)))
		runID = hex.EncodeToString(sum[:3])
	}
	if instances < 1 || instances > envs.MaxInstances {
		return nil, usageErr("--instances %d: want 1 … %d", instances, envs.MaxInstances)
	}

	if f.maxHeaderBytes < 0 || f.maxHeaders < 0 {
		return nil, usageErr("--max-header-bytes %d, --max-headers %d: both must be at least 1", f.maxHeaderBytes, f.maxHeaders)
	}
	if f.redisURL != "" {
		// The reference limiter writes every key's state there: a remote
		// Redis is someone's data, so it needs the same consent a target does.
		_, addr, err := parseRedis(f.redisURL)
		if err != nil {
			return nil, usageWrap(fmt.Errorf("--redis: %w", err))
		}
		if err := loopbackAddr("--redis", addr, f.allowRemote); err != nil {
			return nil, usageWrap(err)
		}
	}
	run := history.Run{Env: f.env, Policy: pol.Source}
	defPath := attacks.DefaultPath
	declared := pol
	var env envs.Environment
	spec := envs.Spec{Instances: instances, RedisURL: f.redisURL, Log: func(format string, a ...any) {
		if !f.quiet {
			fmt.Fprintf(stderr, format+"\n", a...)
		}
	}}
	genv, gpol, isGateway, err := gatewaySetup(f, pol, &spec, &run)
	if err != nil {
		return nil, err
	}
	if isGateway {
		f.env, env, declared = "gateway", genv, gpol
	}
	switch f.env {
	case "gateway": // nginx, HAProxy, gubernator: set up by gatewaySetup
	case "embedded":
		store := f.store
		if store == "" && (plan.NeedsRedis() || f.regions > 1) {
			store = catalog.Redis
		}
		if f.regions > 1 {
			spec.Regions = &envs.RegionSpec{Regions: f.regions, Mode: f.regionMode, Sync: f.regionSync, Latency: f.regionLat}
		}
		entry, err := catalog.Lookup(f.limiter, store)
		if err != nil && f.store == "" && f.regions <= 1 {
			// The plan wants shared state but this limiter keeps its state
			// in memory only: run it as deployed, each instance on its own.
			if e2, err2 := catalog.Lookup(f.limiter, catalog.Memory); err2 == nil {
				entry, err = e2, nil
				run.Notes = append(run.Notes, fmt.Sprintf("%s has no shared store: each instance keeps its own state in memory", entry.Name))
			}
		}
		if err != nil {
			return nil, usageWrap(err)
		}
		declared = pol.WithAlgorithm(entry.Algorithm)
		spec.Policy, spec.Limiter, spec.Store = declared, entry.Name, entry.Store
		if spec.Policy, err = enforcedPolicy(f, declared, entry.Algorithm, &run); err != nil {
			return nil, err
		}
		run.Limiter, run.Target = entry.Name, entry.Name
		env = envs.Embedded{}
	case "local", "docker":
		entry, err := catalog.Lookup(f.limiter, catalog.Redis)
		if err != nil {
			return nil, usageWrap(err)
		}
		declared = pol.WithAlgorithm(entry.Algorithm)
		spec.Policy, spec.Limiter, spec.Store = declared, entry.Name, catalog.Redis
		if spec.Policy, err = enforcedPolicy(f, declared, entry.Algorithm, &run); err != nil {
			return nil, err
		}
		spec.RedisCluster = f.redisCluster
		run.Limiter, run.Target = entry.Name, entry.Name
		if f.regions > 1 {
			if f.env == "local" {
				return nil, usageErr("--regions runs on the embedded and docker environments")
			}
			spec.Regions = &envs.RegionSpec{Regions: f.regions, Mode: f.regionMode, Sync: f.regionSync, Latency: f.regionLat}
		}
		if f.env == "local" {
			env = envs.Local{Cluster: f.redisCluster}
		} else {
			if f.redisURL != "" || f.redisCluster > 0 {
				return nil, usageErr("--env docker starts its own Redis container: --redis and --redis-cluster do not apply")
			}
			env = docker.Docker{RedisImage: f.redisImage, LimiterImage: f.limiterImage, Binary: f.limiterBinary, NoPull: f.noPull}
		}
	case "external":
		if len(f.targetURLs) == 0 {
			return nil, usageErr("--env external needs at least one --target URL")
		}
		if err := checkTargets(f.targetURLs, f.allowRemote); err != nil {
			return nil, usageWrap(err)
		}
		spec.Policy, spec.Targets = pol, f.targetURLs
		run.Target = strings.Join(f.targetURLs, " ")
		defPath = "" // the target URL's own path, else /
		x, err := f.ext.environment(f.allowRemote)
		if err != nil {
			return nil, usageWrap(err)
		}
		env = x
	default:
		return nil, usageErr("--env %q: want embedded, local, docker or external", f.env)
	}
	if f.env != "external" && f.ext.any() {
		return nil, usageErr("--store-proxy, --toxiproxy, --on-inject/--on-clear, --sink and --downstream-* are for your own service (--env external, --target URL)")
	}
	if f.env == "external" {
		if err := checkExternalFaults(plan, &f.ext); err != nil {
			return nil, usageWrap(err)
		}
	}

	dir, runID, err := f.runFolder(runID, shard, shards)
	if err != nil {
		return nil, err
	}
	rh, err := createRunHistory(dir, f.history, stdout)
	if err != nil {
		return nil, runErr(err)
	}
	histFile, w := rh.file, rh.w
	defer w.Close()

	stack, err := env.Start(ctx, spec)
	if err != nil {
		return nil, runErr(fmt.Errorf("start %s environment: %w", env.Name(), err))
	}
	defer stack.Close()
	for _, ph := range plan.Phases {
		if ph.Kind == attacks.KindFault && ph.Action == "inject" && (stack.Faults == nil || !stack.Faults.Supports(ph.Fault)) {
			return nil, runErr(fmt.Errorf("plan %s injects %s, which the %s environment cannot do with this store (see docs/environments.md)", plan.Name, ph.Fault, env.Name()))
		}
	}
	run.Instances = stack.Instances
	run.Store = stack.StoreDesc
	run.Notes = append(run.Notes, stack.Notes...)
	if b, err := json.Marshal(declared); err == nil {
		run.Declared = b
	}

	prog := newProgress(stderr, f.quiet)
	eng, err := attacks.New(attacks.Options{
		Instances: stack.Instances, Policy: declared, Writer: w,
		Faults: stack.Faults, Sink: stack.Sink,
		MaxRequests: f.maxRequests, MaxDuration: f.maxDuration, Timeout: f.timeout,
		MaxHeaderBytes: f.maxHeaderBytes, MaxHeaders: f.maxHeaders,
		Shard: shard, Shards: shards, Seed: f.seed, Progress: prog.update,
		RunID: runID, KeepKeys: f.keepKeys,
		Request: shapeReq, DefaultPath: defPath, Keys: keyFile, StartAt: startAt,
		MaxProbeWait: probeCap(declared),
	})
	if err != nil {
		return nil, usageWrap(err)
	}
	noteWait(stderr, startAt, f.quiet)
	sum, runE := eng.Run(ctx, plan, run)
	var pe *attacks.PrepareError
	if errors.As(runE, &pe) {
		return nil, usageWrap(pe)
	}
	prog.done()
	closeErr := w.Close()
	if err := stack.Close(); err != nil {
		fmt.Fprintf(stderr, "rlverify: tearing down the %s environment: %v\n", env.Name(), err)
	}
	if closeErr != nil {
		// The history on disk is incomplete: no verdict is drawn from it.
		if runE != nil {
			return nil, runErr(fmt.Errorf("%w (history %s is incomplete)", runE, histFile))
		}
		return nil, runErr(fmt.Errorf("%w (history %s is incomplete)", closeErr, histFile))
	}
	if runE != nil {
		fmt.Fprintf(stderr, "rlverify: the run stopped early: %v\n", runE)
	}
	only := f.only
	if len(only) == 0 {
		only = plan.Checks
	}
	doc, rs, h, err := evaluate([]string{histFile}, nil, declared, checks.Options{Only: only, Off: f.off, MaxErrorRate: f.shape.maxErrorRate}, ts)
	if err != nil {
		return nil, err
	}
	if sum.Requests > 0 && allUnreachable(h) {
		why, n := commonestErr(h)
		return nil, runErr(fmt.Errorf("no request got a response (%d of %d: %s): is the target up? (history kept in %s)", n, len(h.Events), why, histFile))
	}
	return &attackResult{doc: doc, results: rs, hist: h, histFile: histFile, dir: dir, report: rh.report, runE: runE}, nil
}

// judge reads histories back (from disk; "-" from stdin), checks them and
// reports: the live run and `rlverify check` share this path, so they give
// the same verdicts.
func judge(_ context.Context, files []string, stdin io.Reader, pol *policy.Policy, o checks.Options, ts []thresholds.Threshold, formats []string, out string, fo *failOn, stdout, stderr io.Writer) error {
	doc, rs, h, err := evaluate(files, stdin, pol, o, ts)
	if err != nil {
		return err
	}
	return conclude(doc, rs, h, formats, out, fo, stdout, stderr)
}

// evaluate reads histories (merging shards; "-" is stdin), judges them
// against pol (nil: the policy the history declares) and ts, and builds the
// result document.
func evaluate(files []string, stdin io.Reader, pol *policy.Policy, o checks.Options, ts []thresholds.Threshold) (*reports.Document, []checks.Result, *history.History, error) {
	h, err := readHistories(files, stdin)
	if err != nil {
		return nil, nil, nil, err
	}
	if pol == nil {
		if pol, err = historyPolicy(h); err != nil {
			return nil, nil, nil, err
		}
	}
	pol = judgeable(h, pol)
	rs := checks.Judge(h, pol, o)
	doc := reports.Build(h, pol, rs)
	if err := judgeThresholds(doc, h, pol, ts); err != nil {
		return nil, nil, nil, err
	}
	return doc, rs, h, nil
}

// conclude renders doc and returns the exit the verdicts call for.
func conclude(doc *reports.Document, rs []checks.Result, h *history.History, formats []string, out string, fo *failOn, stdout, stderr io.Writer) error {
	if err := render(doc, formats, out, stdout); err != nil {
		return runErr(err)
	}
	switch fails := append(fo.fails(rs), fo.thresholdFails(doc.Thresholds)...); {
	case len(fails) > 0:
		return &exitError{code: ExitFail, fails: fails}
	case doc.Interrupted && (h.End == nil || strings.HasPrefix(h.End.Reason, "interrupted")):
		// Interrupted by a signal, or killed (no end record): the verdicts
		// cover only part of the plan. Runs stopped by --max-* bounds the
		// user chose are complete for what they asked.
		fmt.Fprintln(stderr, "rlverify: run interrupted; verdicts cover what was recorded")
		return &exitError{code: ExitInterrupted}
	}
	return nil
}

// render writes the first format to stdout and every format into out (when
// set), plus result.json so `rlverify report` can render it again.
func render(doc *reports.Document, formats []string, out string, stdout io.Writer) error {
	for i, format := range formats {
		r, err := reports.Lookup(format)
		if err != nil {
			return err
		}
		if i == 0 {
			if t, ok := r.(reports.Text); ok {
				t.Color = colorOn(stdout)
				r = t
			}
			if err := r.Render(stdout, doc); err != nil {
				return err
			}
		}
		if out == "" {
			continue
		}
		if err := writeReport(filepath.Join(out, "report."+reports.Extension(format)), r, doc); err != nil {
			return err
		}
	}
	if out != "" {
		return writeReport(filepath.Join(out, "result.json"), reports.JSON{}, doc)
	}
	return nil
}

func writeReport(file string, r reports.Renderer, doc *reports.Document) error {
	if t, ok := r.(reports.Text); ok {
		t.Color = false
		r = t
	}
	fh, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := r.Render(fh, doc); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

func allUnreachable(h *history.History) bool {
	if len(h.Events) == 0 {
		return false
	}
	for i := range h.Events {
		if h.Events[i].Status != 0 {
			return false
		}
	}
	return true
}

// commonestErr is the error most requests of h got, and how many got it.
func commonestErr(h *history.History) (string, int) {
	n := map[string]int{}
	best := ""
	for i := range h.Events {
		e := h.Events[i].Err
		if e == "" {
			e = "no status"
		}
		n[e]++
		if n[e] > n[best] || (n[e] == n[best] && e < best) {
			best = e
		}
	}
	return best, n[best]
}

func parseShard(s string) (int, int, error) {
	if s == "" {
		return 0, 1, nil
	}
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 1 || i > n || n > 1000 {
		return 0, 0, fmt.Errorf("--shard %q: want i/n with 1 ≤ i ≤ n, e.g. 2/3", s)
	}
	return i - 1, n, nil
}

// checkTargets refuses targets outside loopback unless allowed.
func checkTargets(urls []string, allowRemote bool) error {
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--target %q: want an http(s) base URL such as http://127.0.0.1:8080", raw)
		}
		if allowRemote {
			continue
		}
		host := u.Hostname()
		if host == "localhost" {
			continue
		}
		ip := net.ParseIP(host)
		if ip == nil || !ip.IsLoopback() {
			return fmt.Errorf("--target %s is not a loopback address; pass --allow-remote to attack it (only services you own)", raw)
		}
	}
	return nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0 && os.Getenv("TERM") != "dumb"
}

// enforcedPolicy is what the reference limiter enforces: the declared
// policy, or --limiter-policy in the limiter's family (noted in the run).
func enforcedPolicy(f *attackFlags, declared *policy.Policy, a policy.Algorithm, run *history.Run) (*policy.Policy, error) {
	if f.limiterPolicy == "" {
		return declared, nil
	}
	p, err := loadPolicy(f.limiterPolicy)
	if err != nil {
		return nil, err
	}
	run.Notes = append(run.Notes, fmt.Sprintf("the reference limiter enforces %s, not the declared %s", p.Source, declared.Source))
	return p.WithAlgorithm(a), nil
}

// probeCap is how long a probe or a retrying client honours advice: twice
// the longest a single request ever has to wait under the policy (1/r for
// buckets, W for windows) plus the whole second advice is rounded up to.
// Longer advice is itself a finding (the key's state is wrong), not a wait.
func probeCap(p *policy.Policy) time.Duration {
	var w time.Duration
	for _, t := range p.Tiers {
		for _, l := range t.Limits {
			d := l.W()
			if l.Algorithm.Bucketed() {
				d = time.Duration(float64(time.Second) / l.R())
			}
			w = max(w, d)
		}
	}
	return 2*w + time.Second
}
