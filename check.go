package rlverify

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/importers"
	"github.com/rlverify/rlverify/policies"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/reports"
	"github.com/rlverify/rlverify/thresholds"
)

// Stdin is the history name that means CheckOptions.Stdin.
const Stdin = "-"

// CheckOptions say which histories to judge and how.
type CheckOptions struct {
	// Histories are history files (JSON lines), merged as shards of one
	// run; Stdin ("-", at most once) reads Stdin.
	Histories []string
	Stdin     io.Reader
	// History is a history already in memory, judged instead of Histories.
	History *history.History
	// Policy is the declared policy; nil judges against the one the
	// history declares.
	Policy *policy.Policy
	// Checks chooses and tunes the checks (all that apply when zero).
	Checks checks.Options
	// Thresholds are extra pass/fail criteria on the history.
	Thresholds []thresholds.Threshold
	// FailOn, when set, is how the caller will read the verdicts: each
	// threshold it names must be one of Thresholds.
	FailOn *FailOn
	// InMemory judges in memory even where the history could be streamed
	// (see ChoosePath): both paths give the same document.
	InMemory bool
	// PauseGC turns the garbage collector off while the histories are
	// read, unless GOGC is set (see pauseGC): for a process that does
	// nothing else meanwhile, such as the command.
	PauseGC bool
}

// Validate checks o before anything is read. Errors are *OptionError
// naming the field.
func (o CheckOptions) Validate() error {
	if len(o.Histories) == 0 && o.History == nil {
		return fieldErr("Histories", "FILE is required")
	}
	if err := checks.Validate(o.Checks.Only); err != nil {
		return &OptionError{Field: "Checks.Only", Err: err}
	}
	switch s := o.Checks.Slack; {
	case s < 0:
		return fieldErr("Checks.Slack", "%s: must not be negative", s)
	case checks.ValidateSlack(s) != nil:
		return fieldErr("Checks.Slack", "%s: want at most %s, the widest the shards of one run may start apart", s, checks.MaxSlack)
	}
	if r := o.Checks.MaxErrorRate; !(r >= 0 && r <= 1) {
		return fieldErr("Checks.MaxErrorRate", "%g: want a share in (0, 1], e.g. 0.01 for 1%%", r)
	}
	if o.FailOn != nil {
		return o.FailOn.CheckThresholds(o.Thresholds)
	}
	return nil
}

// Outcome is a judged run.
type Outcome struct {
	// Document is the result document every report renders.
	Document *reports.Document
	// Results are the checks' verdicts with their evidence.
	Results []checks.Result
	// History is what was judged: on the streaming path its records
	// only (run header, faults, phases, end), without the events.
	History *history.History
	// HistoryFile is where an attack recorded the history ("" for Check).
	HistoryFile string
	// Path is how Check, or an attack's own judgement, judged (see
	// ChoosePath), and PathWhy why.
	Path    Path
	PathWhy string
	// Stopped is why an attack's plan stopped before its end (nil when it
	// ran whole): what was recorded is judged, but the run is not the
	// proof the plan promises.
	Stopped error
}

// Failed lists the checks whose verdict is FAIL.
func (o *Outcome) Failed() []checks.Result {
	var out []checks.Result
	for _, r := range o.Results {
		if r.Verdict == checks.Fail {
			out = append(out, r)
		}
	}
	return out
}

// Check judges recorded histories. When ctx ends first (a signal) it
// returns an *InterruptedError at once (see Interruptible).
func Check(ctx context.Context, o CheckOptions) (*Outcome, error) {
	if err := checks.ValidateSlack(o.Checks.Slack); err != nil {
		return nil, optionErr("%w", err)
	}
	return Interruptible(ctx, func() (*Outcome, error) {
		path, why, rec, names := choosePath(o)
		if path == Streaming {
			out, err := judgeStreamMeasured(o, rec, names)
			if !fallsBack(err) {
				if out != nil {
					out.Path, out.PathWhy = path, why
				}
				return out, err
			}
			path, why = InMemory, err.Error()
		}
		out, err := checkInMemory(o)
		if out != nil {
			out.Path, out.PathWhy = path, why
		}
		return out, err
	})
}

// checkInMemory is Check on the in-memory path.
func checkInMemory(o CheckOptions) (*Outcome, error) {
	h := o.History
	if h == nil {
		restore := func() {}
		if o.PauseGC {
			restore = pauseGC()
		}
		var err error
		h, err = ReadHistories(o.Histories, o.Stdin)
		restore()
		if err != nil {
			return nil, err
		}
	}
	out, err := judge(h, o.Policy, o.Checks, o.Thresholds)
	if err == nil && len(h.MissingShards) > 0 {
		// One shard's attack judges its share; checking it as the run
		// would judge part of the run as the whole.
		out.Document.MarkCut(checks.Incomplete, fmt.Sprintf("shard %s of the run is missing (judge every shard's history together)", strings.Join(h.MissingShards, ", ")))
	}
	return out, err
}

// Interruptible runs f and returns what it returns, or an
// *InterruptedError as soon as ctx ends. Reading and judging a history is
// memory and CPU work with nothing to undo, so f is left to finish in the
// background: a caller that exits on the error (the CLI, exit 130) stops at
// once instead of after the whole read (a 3.6 M-event check ran on for 22 s
// past Ctrl-C). A library caller that goes on pays for f's remaining work.
func Interruptible[T any](ctx context.Context, f func() (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, &InterruptedError{Err: context.Cause(ctx)}
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		return zero, &InterruptedError{Err: context.Cause(ctx)}
	}
}

// judge checks h against pol (nil: the policy h declares) and ts.
func judge(h *history.History, pol *policy.Policy, o checks.Options, ts []thresholds.Threshold) (*Outcome, error) {
	if pol == nil {
		var err error
		if pol, err = HistoryPolicy(h); err != nil {
			return nil, err
		}
	}
	pol = judgeable(h, pol)
	rs := checks.Judge(h, pol, o)
	doc := reports.Build(h, pol, rs)
	if err := judgeThresholds(doc, h, pol, ts); err != nil {
		return nil, err
	}
	return &Outcome{Document: doc, Results: rs, History: h}, nil
}

// ReadHistories reads the histories to judge (Stdin reads stdin), gives an
// imported one without an end record the end it implies (an import is not
// a run cut off), and merges them.
func ReadHistories(files []string, stdin io.Reader) (*history.History, error) {
	n := 0
	for _, f := range files {
		if f == Stdin {
			n++
		}
	}
	if n > 1 {
		return nil, fieldErr("Histories", "- (standard input) can be given once, not %d times", n)
	}
	var hs []*history.History
	for _, file := range files {
		var h *history.History
		var err error
		if file == Stdin {
			h, err = history.Read("stdin", stdin)
		} else {
			h, err = history.ReadFile(file)
		}
		if err != nil {
			return nil, optionWrap(err)
		}
		importers.Complete(h)
		hs = append(hs, h)
	}
	h, err := history.Merge(hs...)
	if err != nil {
		return nil, optionWrap(err)
	}
	return h, nil
}

// HistoryPolicy is the policy h declares: the one recorded in its header
// ("declared"), else the shipped policy or the file its "policy" names.
func HistoryPolicy(h *history.History) (*policy.Policy, error) {
	if len(h.Run.Declared) > 0 {
		var p policy.Policy
		if err := json.Unmarshal(h.Run.Declared, &p); err != nil {
			return nil, optionWrap(fmt.Errorf("the history's declared policy: %w", err))
		}
		if err := p.Validate(); err != nil {
			return nil, optionWrap(fmt.Errorf("the history's declared policy: %w", err))
		}
		return &p, nil
	}
	name := h.Run.Policy
	if name == "" {
		return nil, fieldErr("Policy", "is required: the history does not carry its policy")
	}
	p, err := LoadPolicy(strings.TrimPrefix(name, "builtin:"))
	if err != nil {
		return nil, fieldErr("Policy", "is required: the history's run header names policy %q: %v", name, err)
	}
	return p, nil
}

// judgeable is pol as it can be judged on h (an import from a format
// without response headers cannot show them), with the reason noted once.
func judgeable(h *history.History, pol *policy.Policy) *policy.Policy {
	pol, notes := importers.Judgeable(pol, h.Run)
	for _, n := range notes {
		if !slices.Contains(h.Run.Notes, n) {
			h.Run.Notes = append(h.Run.Notes, n)
		}
	}
	return pol
}

// judgeThresholds evaluates ts on h into doc. A threshold naming a phase
// that a complete history does not have is an option error (a typo); on an
// interrupted history the phase may just not have run: unknown.
func judgeThresholds(doc *reports.Document, h *history.History, pol *policy.Policy, ts []thresholds.Threshold) error {
	if len(ts) == 0 {
		return nil
	}
	if !h.Interrupted() {
		var phases []string
		for _, ph := range h.Phases {
			phases = append(phases, ph.Name)
		}
		if err := thresholds.CheckPhases(ts, phases); err != nil {
			return optionWrap(err)
		}
	}
	doc.SetThresholds(thresholds.Evaluate(h, func(e *history.Event) history.Outcome { return checks.Outcome(pol, e) }, ts))
	return nil
}

// LoadPolicy reads the policy in file, or the shipped policy of that name
// (see policies/), or the built-in default when file is empty or "default".
func LoadPolicy(file string) (*policy.Policy, error) {
	if file == "" || file == "default" {
		return policy.Default(), nil
	}
	if !strings.ContainsAny(file, `/\`) && !strings.HasSuffix(file, ".yaml") && !strings.HasSuffix(file, ".yml") {
		if b, ok := policies.Get(file); ok {
			p, err := policy.Parse("builtin:"+file, b)
			if err != nil {
				return nil, optionWrap(err)
			}
			return p, nil
		}
		if _, err := os.Stat(file); err != nil {
			return nil, optionErr("no policy file %q and no shipped policy of that name (shipped: %s)", file, strings.Join(policies.Names(), ", "))
		}
	}
	p, err := policy.Load(file)
	if err != nil {
		return nil, optionWrap(err)
	}
	return p, nil
}

// pauseGC turns the garbage collector off until restore is called, unless
// the user set GOGC. Reading a history allocates almost only what it keeps
// (the events, and the slices they outgrow: at most as much again, also
// when stdin is read for a whole attack), so a collection during the read
// frees next to nothing (gctrace on 10^6 events: 783 → 723 MB) while it
// marks every event read so far. On a 2-core VM those collections made
// `rlverify check` of 10^6 events take 5.4–6.3 s instead of 1.4–1.6 s, with
// a higher peak (964 MB instead of 715 MB). A GOMEMLIMIT the user set still
// bounds the heap.
func pauseGC() (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(-1)
	return func() { debug.SetGCPercent(old) }
}
