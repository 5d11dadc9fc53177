package rlverify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/envoyrls"
	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/service"
	"github.com/rlverify/rlverify/thresholds"
)

// Environment names of AttackOptions.Env.
const (
	EnvEmbedded = "embedded"
	EnvLocal    = "local"
	EnvDocker   = "docker"
	EnvExternal = "external"
	// EnvGateway runs a gateway limiter (nginx, HAProxy, gubernator): the
	// Environment comes from envs/gateway, already configured.
	EnvGateway = "gateway"
)

// DefaultLimiter is the reference limiter Attack runs when none is named.
const DefaultLimiter = "token-bucket"

// AttackOptions configure one attack. Plan is required; the zero value of
// every other field means its default.
type AttackOptions struct {
	// Plan is the attack plan (attacks.Load reads a built-in or a file).
	Plan *attacks.Plan
	// Policy is the declared policy, what the limiter promises (default,
	// for a limiter rlverify starts: the plan's policy, else the built-in
	// one). Against your own service (Targets, Handler) it is required:
	// Prepare refuses a run without it (MissingPolicyError).
	Policy *policy.Policy
	// Overrides change the declared policy's identity and statuses (also
	// a plan's own policy, and a discovered one).
	Overrides PolicyOverrides
	// LimiterPolicy, when set, is what the reference limiter enforces
	// instead of Policy (a limiter configured unlike its promise).
	LimiterPolicy *policy.Policy
	// JudgedPolicy, when set, is what the run is judged against instead of
	// Policy (a gateway's policy in its family, or its honest policy).
	JudgedPolicy *policy.Policy

	// Env is where the limiter runs: EnvEmbedded (default), EnvLocal,
	// EnvDocker, EnvExternal or EnvGateway. Targets or Handler imply
	// EnvExternal.
	Env string
	// Environment starts the stack for EnvDocker (docker.Docker) and
	// EnvGateway (gateway.Environment); for EnvExternal it may be an
	// envs.External carrying fault injection and a downstream reader.
	Environment envs.Environment
	// RecordedEnv, when set, is the environment name the history records
	// (a gateway's kind).
	RecordedEnv string
	// Limiter is the reference limiter's catalog name (DefaultLimiter). A
	// gateway limiter (nginx/…, haproxy/…, gubernator/…) runs as its own
	// process or cluster, configured from the declared policy.
	Limiter string
	// Honest judges a gateway limiter against the policy it really
	// enforces (its honest policy), not the declared one.
	Honest bool
	// Store is its state store, catalog.Memory or catalog.Redis (default:
	// Redis when the plan needs shared state).
	Store string
	// RedisURL is an existing Redis to use instead of starting one.
	RedisURL string
	// RedisCluster > 0 runs a Redis Cluster of that many nodes (EnvLocal).
	RedisCluster int
	// Instances is the number of limiter instances (default: the plan's
	// minimum, else 1).
	Instances int
	// Targets are the base URLs of your own instances.
	Targets []string
	// Handler is your own limiter, served on 127.0.0.1 for the run.
	Handler http.Handler
	// AllowRemote allows targets and a Redis outside loopback (only
	// services you own).
	AllowRemote bool
	// Regions > 1 runs the reference token bucket in that many regions
	// (embedded and docker; default: the plan's), sharing the quota as
	// RegionMode says (service.RegionReplicated when empty).
	Regions       int
	RegionMode    string
	RegionSync    time.Duration
	RegionLatency time.Duration

	// Request is the shape of the requests (method, headers, body,
	// identity) over the plan's; Keys are real API keys by tier.
	Request attacks.Request
	Keys    *attacks.KeyFile
	// KeysFile, when Keys is nil, is read into Keys against the declared
	// policy (attacks.LoadKeyFile).
	KeysFile string
	// KeepKeys sends the plan's keys unchanged (they are redacted).
	KeepKeys bool
	// Checks chooses the checks (default: the plan's, else all).
	Checks checks.Options
	// Thresholds are pass/fail criteria on the history besides the plan's
	// own, which are always evaluated; a phase they name must be the plan's.
	Thresholds []thresholds.Threshold
	// FailOn, when set, is how the caller will read the verdicts: each
	// threshold it names must be one of the run's.
	FailOn *FailOn

	// Run bounds and engine settings (attacks.Options; defaults there).
	MaxRequests    int64
	MaxDuration    time.Duration
	Timeout        time.Duration
	MaxHeaderBytes int64
	MaxHeaders     int
	// Shard (0-based) of Shards runs a share of the plan.
	Shard, Shards int
	Seed          int64
	// RunID tags keys so runs never share limiter state (random when
	// empty; derived from plan and seed when sharded).
	RunID string
	// StartAt, when set, is the instant the shards start together.
	StartAt time.Time

	// Dir is the run's folder: a gateway keeps its honest policy and
	// generated configurations there (default: HistoryFile's folder).
	Dir string
	// HistoryFile is where the history is recorded and read back from to
	// judge it; a temporary file, removed afterwards, when empty. An
	// existing file is an error unless ReplaceHistory.
	HistoryFile string
	// ReplaceHistory lets the run replace an existing HistoryFile (--force);
	// a file another run is writing is refused even so.
	ReplaceHistory bool
	// HistoryCopy, when set, receives a copy of the history as it is
	// recorded; a failing copy does not fail the run.
	HistoryCopy io.Writer
	// OnEvent receives every request's event as it completes, from the
	// engine's goroutines one at a time; it must not block for long.
	OnEvent func(history.Event)
	// Progress is called after every phase and every ~250ms;
	// ProgressDone once the engine has finished.
	Progress     func(attacks.Progress)
	ProgressDone func()
	// Log receives progress lines (environment start-up, shard waits);
	// Warn receives what went wrong without failing the run. Either may be
	// nil.
	Log, Warn func(format string, args ...any)
	// Notes are facts for the report, added to the run's own.
	Notes []string
	// InMemory judges the run's history in memory even where it could be
	// streamed (see ChoosePath; Outcome.Path says which path was taken):
	// both give the same document.
	InMemory bool
}

// Attack runs one plan and judges its history. It is Prepare followed by
// Prepared.Run.
func Attack(ctx context.Context, o AttackOptions) (*Outcome, error) {
	p, err := Prepare(o)
	if err != nil {
		return nil, err
	}
	return p.Run(ctx)
}

// Prepared is an attack whose options are checked and whose environment
// is chosen, not yet started. Its RunID and HistoryFile may still be set
// (the command names the run's folder between the two steps).
type Prepared struct {
	o AttackOptions
	// Env is the environment Run starts; a command may adjust its value
	// between the two steps (a gateway keeps its configurations in the
	// run's folder, known only then).
	Env      envs.Environment
	spec     envs.Spec
	declared *policy.Policy
	run      history.Run
	defPath  string
	// thresholds are the plan's and the caller's.
	thresholds []thresholds.Threshold
	// gw is a gateway limiter's honest policy, written at Run.
	gw *gatewayRun
	// Dir is the run's folder (see AttackOptions.Dir).
	Dir string
	// RunID is the tag of the run's keys ("" draws one at Run).
	RunID string
	// HistoryFile is where the history goes (see AttackOptions).
	HistoryFile string
	// Notes are facts for the report added after Prepare.
	Notes []string
}

// env is the environment o runs in: Targets or Handler imply EnvExternal,
// nothing EnvEmbedded.
func (o *AttackOptions) env() string {
	switch {
	case o.Handler != nil || len(o.Targets) > 0:
		return EnvExternal
	case o.Env == "":
		return EnvEmbedded
	}
	return o.Env
}

// Validate checks every rule about what an attack may do, before anything
// starts: a plan, bounds, which options apply to which environment, and
// consent for every address outside loopback. Prepare calls it; a command
// calls it (through Prepare) so its users get the same rules as the
// library's. Errors are *OptionError naming the field at fault.
func (o AttackOptions) Validate() error {
	if o.Plan == nil {
		return fieldErr("Plan", "is required (see rlverify plans)")
	}
	plan, env := o.Plan, o.env()
	if o.Handler != nil && len(o.Targets) > 0 {
		return fieldErr("Handler", "and Targets: give one, not both")
	}
	if o.Instances != 0 {
		if env == EnvEmbedded && o.Instances < plan.MinInstances() {
			return fieldErr("Instances", "%d: plan %s needs at least %d", o.Instances, plan.Name, plan.MinInstances())
		}
		if o.Instances < 1 || o.Instances > envs.MaxInstances {
			return fieldErr("Instances", "%d: want 1 … %d", o.Instances, envs.MaxInstances)
		}
	}
	if err := attacks.CheckRequest(plan, o.Request); err != nil {
		return &OptionError{Field: "Request", Err: err}
	}
	if o.Keys != nil {
		pol := o.Policy
		if pol == nil {
			var err error
			if pol, err = LoadPolicy(plan.Policy); err != nil {
				return err
			}
		}
		if err := attacks.CheckKeys(plan, pol, o.Keys); err != nil {
			return &OptionError{Field: "Keys", Err: err}
		}
	}
	var phases []string
	for _, ph := range plan.Phases {
		phases = append(phases, ph.Name)
	}
	if err := thresholds.CheckPhases(o.Thresholds, phases); err != nil {
		return fieldErr("Thresholds", "plan %s: %w", plan.Name, err)
	}
	if o.FailOn != nil {
		if err := o.FailOn.CheckThresholds(append(plan.PlanThresholds(), o.Thresholds...)); err != nil {
			return err
		}
	}
	if o.Policy != nil {
		if err := checks.Validate(o.Policy.ChecksOff); err != nil {
			return &OptionError{Err: fmt.Errorf("policy %s: checks_off: %w", o.Policy.Source, err)}
		}
	}
	for _, c := range []struct {
		field string
		names []string
	}{{"Checks.Only", o.Checks.Only}, {"Checks.Off", o.Checks.Off}} {
		if err := checks.Validate(c.names); err != nil {
			return &OptionError{Field: c.field, Err: err}
		}
	}
	if !(o.Checks.MaxErrorRate >= 0 && o.Checks.MaxErrorRate <= 1) {
		return fieldErr("Checks.MaxErrorRate", "%g: want a share in (0, 1], e.g. 0.01 for 1%%", o.Checks.MaxErrorRate)
	}
	if _, err := o.Overrides.Apply(policy.Default()); err != nil {
		return err
	}
	if o.MaxHeaderBytes < 0 {
		return fieldErr("MaxHeaderBytes", "%d: want at least 1", o.MaxHeaderBytes)
	}
	if o.MaxHeaders < 0 {
		return fieldErr("MaxHeaders", "%d: want at least 1", o.MaxHeaders)
	}
	if o.MaxHeaderBytes > attacks.MaxHeaderBytesCeiling || o.MaxHeaders > attacks.MaxHeadersCeiling {
		return fieldErr("MaxHeaderBytes", "%d, MaxHeaders %d: want at most %d bytes and %d fields", o.MaxHeaderBytes, o.MaxHeaders, attacks.MaxHeaderBytesCeiling, attacks.MaxHeadersCeiling)
	}
	if o.RedisURL != "" {
		// The reference limiter writes every key's state there: a remote
		// Redis is someone's data, so it needs the consent a target does.
		addr, err := envs.RedisAddr(o.RedisURL)
		if err == nil {
			err = envs.CheckLoopbackAddr(addr, o.AllowRemote)
		}
		if err != nil {
			return &OptionError{Field: "RedisURL", Err: err}
		}
	}
	if err := o.checkGateway(env); err != nil {
		return err
	}
	if x, ok := o.Environment.(envs.External); env != EnvExternal && ok && (len(x.StoreProxies) > 0 || x.Toxiproxy != "" || len(x.Hooks) > 0 || x.Downstream != nil) {
		return fieldErr("Environment", "external settings (store proxies, Toxiproxy, hooks, a downstream reader) are for your own service: Env %s does not apply", env)
	}
	kind, err := kindOf(env)
	if err != nil {
		return err
	}
	return kind.validate(o)
}

// requireDeclaredPolicy is the rule for judging a service rlverify did not
// start: against the policy its owner declares. A plan's own policy
// describes how rlverify's reference service is set up (retry-after's slow
// refill, tiers' seeds): a verdict against it says nothing about a service
// configured otherwise, so o.Policy must be given and not the plan's own.
// (A target without any declared policy belongs here too.)
func requireDeclaredPolicy(o AttackOptions) error {
	if err := missingPolicy(o); err != nil {
		return err
	}
	if o.Plan.Policy == "" {
		return nil
	}
	own := o.Policy == nil
	if !own {
		if pp, err := LoadPolicy(o.Plan.Policy); err == nil && pp.Source == o.Policy.Source {
			own = true
		}
	}
	if !own {
		return nil
	}
	return fieldErr("Policy", "is required: plan %s judges against its own policy (%s), which describes rlverify's reference service; against a target give your service's declared policy (rlverify audit measures what a service does)", o.Plan.Name, o.Plan.Policy)
}

// Prepare checks o (Validate) and chooses the environment.
func Prepare(o AttackOptions) (*Prepared, error) {
	if o.Keys == nil && o.KeysFile != "" && o.Plan != nil {
		pol := o.Policy
		if pol == nil {
			pol, _ = LoadPolicy(o.Plan.Policy)
		}
		if pol != nil {
			kf, err := attacks.LoadKeyFile(o.KeysFile, pol)
			if err != nil {
				return nil, &OptionError{Field: "KeysFile", Err: err}
			}
			o.Keys = kf
		}
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	plan := o.Plan
	pol := o.Policy
	if pol == nil {
		var err error
		if pol, err = LoadPolicy(plan.Policy); err != nil {
			return nil, err
		}
	}
	pol, err := o.Overrides.Apply(pol)
	if err != nil {
		return nil, err
	}
	if o.Limiter == "" {
		o.Limiter = DefaultLimiter
	}
	o.Env = o.env()
	if o.RegionMode == "" {
		o.RegionMode = service.RegionReplicated
	}
	if o.Shards == 0 {
		o.Shards = 1
	}
	instances := o.Instances
	if instances == 0 {
		instances = plan.MinInstances()
	}
	if o.Regions == 0 && (o.Env == EnvEmbedded || o.Env == EnvDocker) {
		o.Regions = plan.Regions
	}
	runID := o.RunID
	if runID == "" && o.Shards > 1 {
		sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", plan.Name, o.Seed)))
		runID = hex.EncodeToString(sum[:3])
	}
	if o.HistoryFile != "" {
		if err := checkHistoryFile(o.HistoryFile, o.ReplaceHistory); err != nil {
			return nil, err
		}
	}
	p := &Prepared{o: o, RunID: runID, HistoryFile: o.HistoryFile, Dir: o.Dir, defPath: attacks.DefaultPath, declared: pol,
		thresholds: append(plan.PlanThresholds(), o.Thresholds...)}
	p.run = history.Run{Env: o.Env, Policy: pol.Source, Notes: append([]string(nil), o.Notes...)}
	if entry := gatewayEntry(o.Limiter); entry != nil && o.Env == EnvEmbedded {
		if err := p.asGateway(entry); err != nil {
			return nil, err
		}
		o = p.o
	}
	if o.RecordedEnv != "" {
		p.run.Env = o.RecordedEnv
	}
	p.spec = envs.Spec{Instances: instances, RedisURL: o.RedisURL, Log: o.Log}
	if err := envKinds[o.Env].prepare(p, pol); err != nil {
		return nil, err
	}
	return p, nil
}

// reference sets up a reference limiter from the catalog: the declared
// policy in its family, and what it enforces.
func (p *Prepared) reference(entry catalog.Entry, pol *policy.Policy, store string) {
	p.declared = pol.WithAlgorithm(entry.Algorithm)
	p.spec.Policy, p.spec.Limiter, p.spec.Store = p.declared, entry.Name, store
	p.spec.Entry = &entry
	if lp := p.o.LimiterPolicy; lp != nil {
		p.run.Notes = append(p.run.Notes, fmt.Sprintf("the reference limiter enforces %s, not the declared %s", lp.Source, p.declared.Source))
		p.spec.Policy = lp.WithAlgorithm(entry.Algorithm)
	}
	p.run.Limiter, p.run.Target = entry.Name, entry.Name
}

// Declared is the policy the run is judged against.
func (p *Prepared) Declared() *policy.Policy { return p.declared }

// EnvName is the environment the run starts.
func (p *Prepared) EnvName() string { return p.Env.Name() }

// Run starts the environment, runs the plan, tears the environment down
// and judges the history, read back once from HistoryFile.
func (p *Prepared) Run(ctx context.Context) (*Outcome, error) {
	o, plan := p.o, p.o.Plan
	if o.Handler != nil {
		url, stop, err := service.ServeLoopback(o.Handler)
		if err != nil {
			return nil, fmt.Errorf("serve the handler: %w", err)
		}
		defer stop()
		p.spec.Targets = []string{url}
		p.run.Target = url
	}
	if err := p.placeGateway(p.HistoryFile); err != nil {
		return nil, err
	}
	histFile, temp := p.HistoryFile, false
	if histFile == "" {
		f, err := os.CreateTemp("", "rlverify-history-*.jsonl")
		if err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
		histFile, temp = f.Name(), true
		f.Close()
		defer os.Remove(histFile)
	}
	f, err := createHistory(histFile, temp || o.ReplaceHistory)
	if err != nil {
		return nil, err
	}
	var hw io.Writer = f
	if o.HistoryCopy != nil {
		// The copy's reader may go away (`--history - | head`): the run
		// then stops as if interrupted, and the file gets the rest.
		var stopCopy context.CancelCauseFunc
		ctx, stopCopy = context.WithCancelCause(ctx)
		defer stopCopy(nil)
		hw = &teeFile{File: f, copy: o.HistoryCopy, stop: stopCopy}
	}
	w := history.NewWriter(hw)
	if o.OnEvent != nil {
		w.OnEvent(o.OnEvent)
	}
	defer w.Close()

	stack, err := p.Env.Start(ctx, p.spec)
	if err != nil {
		return nil, fmt.Errorf("start %s environment: %w", p.Env.Name(), err)
	}
	defer stack.Close()
	for _, ph := range plan.Phases {
		if ph.Kind == attacks.KindFault && ph.Action == "inject" && (stack.Faults == nil || !stack.Faults.Supports(ph.Fault)) {
			return nil, fmt.Errorf("plan %s injects %s, which the %s environment cannot do with this store (see docs/environments.md)", plan.Name, ph.Fault, p.Env.Name())
		}
	}
	run := p.run
	run.Instances = stack.Instances
	run.Store = stack.StoreDesc
	run.Notes = append(append(run.Notes, p.Notes...), stack.Notes...)
	if b, err := json.Marshal(p.declared); err == nil {
		run.Declared = b
	}
	eo := attacks.Options{
		Instances: stack.Instances, Policy: p.declared, Writer: w,
		Faults: stack.Faults, Sink: stack.Sink,
		MaxRequests: o.MaxRequests, MaxDuration: o.MaxDuration, Timeout: o.Timeout,
		MaxHeaderBytes: o.MaxHeaderBytes, MaxHeaders: o.MaxHeaders,
		Shard: o.Shard, Shards: o.Shards, Seed: o.Seed, Progress: o.Progress,
		RunID: p.RunID, KeepKeys: o.KeepKeys,
		Request: o.Request, DefaultPath: p.defPath, Keys: o.Keys, StartAt: o.StartAt,
		MaxProbeWait: ProbeCap(p.declared),
	}
	if grpc, _ := serviceTargets(stack.Instances); grpc && p.declared.Service != nil {
		if eo.Timeout <= 0 {
			eo.Timeout = attacks.DefaultTimeout
		}
		c := envoyrls.NewClient(eo.Timeout)
		defer c.CloseIdleConnections()
		if err := probeService(ctx, c, p.declared, stack.Instances, p.RunID); err != nil {
			return nil, err
		}
		eo.Client = serviceClient(c, p.declared.Service)
	}
	eng, err := attacks.New(eo)
	if err != nil {
		return nil, optionWrap(err)
	}
	if !o.StartAt.IsZero() && o.Log != nil {
		o.Log("rlverify: waiting until %s (in %s) to start with the other shards",
			o.StartAt.UTC().Format(time.RFC3339Nano), time.Until(o.StartAt).Round(time.Millisecond))
	}
	sum, runE := eng.Run(ctx, plan, run)
	if cause := context.Cause(ctx); errors.Is(cause, ErrHistoryCopy) && runE == nil {
		runE = cause
	}
	var pe *attacks.PrepareError
	if errors.As(runE, &pe) {
		return nil, optionWrap(pe)
	}
	if o.ProgressDone != nil {
		o.ProgressDone()
	}
	closeErr := w.Close()
	if err := stack.Close(); err != nil {
		p.warn("rlverify: tearing down the %s environment: %v", p.Env.Name(), err)
	}
	if closeErr != nil {
		// The history on disk is incomplete: no verdict is drawn from it.
		if runE != nil {
			return nil, fmt.Errorf("%w (history %s is incomplete)", runE, histFile)
		}
		return nil, fmt.Errorf("%w (history %s is incomplete)", closeErr, histFile)
	}
	if runE != nil {
		p.warn("rlverify: the run stopped early: %v", runE)
	}
	co := o.Checks
	if len(co.Only) == 0 {
		co.Only = plan.Checks
	}
	out, reached, err := p.judgeRun(histFile, co, w.Reorder())
	if err != nil {
		return nil, err
	}
	h := out.History
	kept := histFile
	if temp {
		kept = "a temporary file, removed"
	}
	if sum.Requests > 0 && reached.none() {
		why, n := reached.commonest()
		err := envs.Unreachable(fmt.Errorf("no request got a response (%d of %d: %s): is the target up? (history kept in %s)", n, reached.events, why, kept))
		if h.End != nil && h.End.Interrupted && strings.HasPrefix(h.End.Reason, "interrupted") {
			// A signal ended the run: that, not the target, is why the
			// requests in flight got no answer.
			return nil, &InterruptedError{Err: err}
		}
		return nil, err
	}
	out.HistoryFile, out.Stopped = p.HistoryFile, runE
	if runE != nil && out.Document.Verdict != checks.Interrupted {
		// A step of the plan could not be done (a fault hook that failed
		// or timed out): what was recorded is judged, but it is not the
		// proof the plan promises.
		out.Document.MarkCut(checks.Incomplete, "the plan did not complete: "+runE.Error())
	}
	if temp {
		out.HistoryFile = ""
	}
	return out, nil
}

func (p *Prepared) warn(format string, args ...any) {
	if p.o.Warn != nil {
		p.o.Warn(format, args...)
	}
}

// teeFile writes to its file and copies what it wrote to another writer;
// a failing copy (a reader that went away) does not fail the file.
type teeFile struct {
	*os.File
	copy    io.Writer
	copyErr error
	// stop ends the run when the copy cannot be written.
	stop context.CancelCauseFunc
}

// ErrHistoryCopy is why a run stopped when AttackOptions.HistoryCopy could
// not be written (its reader went away: `attack --history - | head`); the
// history file is complete, with its end record.
var ErrHistoryCopy = errors.New("the copy of the history cannot be written (did its reader go away?)")

func (t *teeFile) Write(b []byte) (int, error) {
	n, err := t.File.Write(b)
	if t.copyErr == nil && n > 0 {
		if _, t.copyErr = t.copy.Write(b[:n]); t.copyErr != nil && t.stop != nil {
			t.stop(fmt.Errorf("%w: %v", ErrHistoryCopy, t.copyErr))
		}
	}
	return n, err
}

// judgeRun judges the history the run wrote to file, by the same rule
// as Check (ChoosePath): on the streaming path when every check judged
// streams, else in memory; the outcome says which and why. reached is
// what the events say of the target's reachability, from either path.
//
// The run's writer measured how far out of send order it wrote the events
// (reorder): the stream holds back only the events sent within that bound
// and reads in small windows, so judging needs about the memory sending
// did, not the tens of MB of the default stream. A file edited since
// (further out of order than measured) is read again with the default
// bound.
func (p *Prepared) judgeRun(file string, co checks.Options, reorder time.Duration) (out *Outcome, reached *reachTally, err error) {
	// What sending used (connections, buffers, the engine's goroutines) is
	// garbage now: hand it back before the judgement allocates its own, so
	// that the run's peak is the larger of the two, not their sum; and
	// hold the judgement to what sending held (judgeMemory).
	defer judgeMemory()()
	debug.FreeOSMemory()
	o := CheckOptions{Histories: []string{file}, Policy: p.declared, Checks: co, Thresholds: p.thresholds, InMemory: p.o.InMemory}
	path, why, rec, names := choosePath(o)
	if path == Streaming {
		out, reached, err = judgeStreamLean(o, rec, names, reorder)
		if !fallsBack(err) {
			if err != nil {
				return nil, nil, err
			}
			out.Path, out.PathWhy = path, why
			return out, reached, nil
		}
		path, why = InMemory, err.Error()
	}
	h, err := ReadHistories(o.Histories, nil)
	if err != nil {
		return nil, nil, err
	}
	if out, err = judge(h, o.Policy, co, o.Thresholds); err != nil {
		return nil, nil, err
	}
	reached = newReachTally()
	for i := range h.Events {
		reached.add(&h.Events[i], uint64(i))
	}
	out.Path, out.PathWhy = path, why
	return out, reached, nil
}

// reachTally is what the unreachable-target error reads of a run's
// events, gathered one event at a time (in any order): how many there
// were, whether any got a status, and the errors of those that did not,
// grouped by checks.ErrorKind (a local port, an address or a key in a URL
// differ from request to request), each kind with its first message in
// file order, verbatim.
type reachTally struct {
	events, answered int
	n                map[string]int
	example          map[string]string
	first            map[string]uint64
}

func newReachTally() *reachTally {
	return &reachTally{n: map[string]int{}, example: map[string]string{}, first: map[string]uint64{}}
}

// add counts e, the event at file position seq.
func (t *reachTally) add(e *history.Event, seq uint64) {
	t.events++
	if e.Status != 0 {
		t.answered++
		return
	}
	msg := e.Err
	if msg == "" {
		msg = "no status"
	}
	k := checks.ErrorKind(msg)
	if f, ok := t.first[k]; !ok || seq < f {
		t.first[k], t.example[k] = seq, msg
	}
	t.n[k]++
}

// none is whether the run had events and none got a response.
func (t *reachTally) none() bool { return t.events > 0 && t.answered == 0 }

// commonest is the error most requests got, and how many got it: the
// largest kind, the first by name among equals.
func (t *reachTally) commonest() (string, int) {
	best := ""
	for k, n := range t.n {
		if n > t.n[best] || (n == t.n[best] && k < best) {
			best = k
		}
	}
	return t.example[best], t.n[best]
}

// CheckTargets refuses a target that is not an http(s) base URL, or is
// outside loopback unless allowRemote (envs.CheckLoopback). Errors are
// *OptionError of the field Targets.
func CheckTargets(urls []string, allowRemote bool) error {
	for _, raw := range urls {
		if err := envs.CheckLoopbackURL(raw, allowRemote); err != nil {
			return &OptionError{Field: "Targets", Err: err}
		}
	}
	return nil
}

// ProbeCap is how long a probe or a retrying client honours advice: twice
// the longest a single request ever has to wait under the policy (1/r for
// buckets, W for windows) plus the whole second advice is rounded up to.
// Longer advice is itself a finding (the key's state is wrong), not a wait.
func ProbeCap(p *policy.Policy) time.Duration {
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
