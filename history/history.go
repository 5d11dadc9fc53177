// Package history is the record of one run: a header, one Event per request,
// the fault windows and the downstream sink's counts, streamed as JSON lines
// while the run goes and read back for offline checking. Several histories
// (shards) can be merged.
//
// history is a leaf package: it imports no other rlverify package.
package history

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/rlverify/rlverify/headers"
)

// Version of the JSONL format written by this package.
const Version = 1

// Record types, the "t" field of every line.
const (
	TypeRun   = "run"
	TypeEvent = "e"
	TypeFault = "fault"
	TypeSink  = "sink"
	TypeEnd   = "end"
	TypePhase = "phase"
	// TypeSample records the harness's own memory and goroutines.
	TypeSample = "sample"
)

// Run is the first line of a history.
type Run struct {
	T       string `json:"t"`
	Version int    `json:"version"`
	ID      string `json:"id"`
	// Start is the wall-clock instant that monotonic offset 0 stands for.
	Start time.Time `json:"start"`
	Plan  string    `json:"plan,omitempty"`
	// Target says what was attacked: "embedded", "external", a limiter name.
	Target  string `json:"target,omitempty"`
	Limiter string `json:"limiter,omitempty"`
	Env     string `json:"env,omitempty"`
	Store   string `json:"store,omitempty"`
	// Policy is the file or built-in name of the declared policy.
	Policy string `json:"policy,omitempty"`
	// Declared is the declared policy itself (policy.Policy as JSON), so a
	// history can be checked without the policy file.
	Declared  json.RawMessage `json:"declared,omitempty"`
	Instances []string        `json:"instances,omitempty"`
	Shard     string          `json:"shard,omitempty"`
	Seed      int64           `json:"seed,omitempty"`
	// Notes are facts a reader of the report should know (e.g. "redis is an
	// in-process emulation").
	Notes []string `json:"notes,omitempty"`
	// NoHeaders says the source of this history kept no response headers
	// (an import from k6 JSON output): an event's empty RetryAfter or
	// RateLimit fields mean "not recorded", not "not sent".
	NoHeaders bool `json:"no_headers,omitempty"`
}

// Event is one request. Times are nanoseconds since Run.Start on one
// monotonic clock. The limiter decided the request somewhere in [Sent, Recv].
type Event struct {
	T  string `json:"t"`
	ID uint64 `json:"id"`
	// Key is the logical identity the plan meant (the API key before any
	// bypass variant was applied).
	Key string `json:"key"`
	// Sent is what was actually put on the wire when it differs from Key
	// (bypass variants: case, whitespace, spoofed X-Forwarded-For).
	Variant  string `json:"variant,omitempty"`
	Tier     string `json:"tier,omitempty"`
	Instance int    `json:"inst"`
	Phase    string `json:"phase"`
	// Path is the request's path and query when it differs from the
	// instance's base URL (a phase's own path, a template with {i}).
	Path string `json:"path,omitempty"`
	// Intended is when the scheduler meant to send; Sent when it did.
	Intended int64 `json:"intended"`
	Sent     int64 `json:"sent"`
	Recv     int64 `json:"recv"`
	// Status is the HTTP status, 0 when no response arrived (see Err).
	Status int `json:"status"`
	// Cost is the tokens the request asked for when the policy declares
	// weighted requests (the zero value: one, unweighted).
	Cost Cost `json:"cost,omitempty"`
	// Fields are the raw rate-limit response headers, as received (one
	// type with what headers parses: no copies between the two).
	headers.Fields
	Err string `json:"err,omitempty"`
	// Date is the response's Date header (an HTTP-date, second
	// resolution), recorded only in runs whose plan steps an instance's
	// clock: the target's clock as it said it, to show that a step took
	// effect.
	Date string `json:"date,omitempty"`
	// Body is a sample of the body of an answer that was neither an
	// admission nor a rejection (at most 256 bytes, one line of printable
	// text; the first 20 such answers of a run), so a report can show
	// what the target said ("the API is POST /v1/orders").
	Body string `json:"body,omitempty"`
}

// ErrCancelled is the Err of a request cut off because the run stopped
// (interrupted, or at --max-duration): not the target's failure.
const ErrCancelled = "cancelled: the run stopped"

// Outcome of a request as far as the limiter's decision is concerned.
type Outcome int8

// Outcomes: admitted (2xx), rejected (429, or 503 with Retry-After from a
// fail-closed limiter), unknown (no response, other 5xx, anything else).
const (
	Unknown Outcome = iota
	Admitted
	Rejected
)

func (o Outcome) String() string {
	switch o {
	case Admitted:
		return "admitted"
	case Rejected:
		return "rejected"
	}
	return "unknown"
}

// Outcome classifies e under the default response contract (2xx admitted,
// 429 rejected, 503 with Retry-After rejected by a fail-closed limiter).
// A policy may declare other statuses (policy.Statuses); checks and
// reports classify with it (checks.Outcome). Checks that bound admissions
// from above count only Admitted; checks that bound from below treat
// Unknown as possibly consumed.
func (e *Event) Outcome() Outcome {
	switch {
	case e.Status >= 200 && e.Status < 300:
		return Admitted
	case e.Status == 429:
		return Rejected
	case e.Status == 503 && e.RetryAfter != "":
		return Rejected
	}
	return Unknown
}

// Fault is a window during which a fault was injected.
type Fault struct {
	T string `json:"t"`
	// Kind: store-down, store-slow, clock-skew, instance-down, partition.
	Kind   string `json:"kind"`
	Target string `json:"target,omitempty"`
	// Start and End are offsets like Event times; End is 0 while open.
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// Param is the fault's size: latency, skew.
	Param string `json:"param,omitempty"`
	// Injecting is when the injection began and Cleared when the clearing
	// ended: the fault surely held in [Start, End] (Start is when the
	// injection had taken effect, End when the clearing began) and possibly
	// in [Injecting, Cleared]. Zero when not recorded (older histories).
	Injecting int64 `json:"injecting,omitempty"`
	Cleared   int64 `json:"cleared,omitempty"`
	// Hooks are the user's commands that injected and cleared the fault.
	Hooks []FaultHook `json:"hooks,omitempty"`
}

// FaultHook is one command run to inject or clear a fault.
type FaultHook struct {
	Action  string `json:"action"`
	Command string `json:"command"`
	// Took is how long it ran, ns; Exit its exit status.
	Took   int64  `json:"took"`
	Exit   int    `json:"exit"`
	Output string `json:"output,omitempty"`
}

// Span is the widest window the fault may have held in: [Injecting,
// Cleared] when recorded, else [Start, End]. An open fault (End 0) spans to
// the end of time.
func (f *Fault) Span() (from, to int64) {
	from, to = f.Start, f.End
	if f.Injecting != 0 && f.Injecting < from {
		from = f.Injecting
	}
	if f.End == 0 {
		return from, 1<<62 - 1
	}
	if f.Cleared > to {
		to = f.Cleared
	}
	return from, to
}

// Sink is what the downstream sink saw for one key by the end of the run.
type Sink struct {
	T        string `json:"t"`
	Key      string `json:"key"`
	Arrivals int64  `json:"arrivals"`
	// First and Last arrival offsets.
	First int64 `json:"first,omitempty"`
	Last  int64 `json:"last,omitempty"`
	// PeakPerSecond is the most arrivals (all keys for Key "*") in any one
	// second-long rolling window.
	PeakPerSecond int64 `json:"peak_per_second,omitempty"`
	// Phase is the phase after which the downstream was read; empty for the
	// reading at the end of the run. At is the offset of the reading. Each
	// reading counts the arrivals since the run started.
	Phase string `json:"phase,omitempty"`
	At    int64  `json:"at,omitempty"`
}

// Phase records how one phase of the plan went: its span and, for bursts,
// how tightly the requests left (spread of actual send times around the
// release instant) and how close a boundary burst landed to its aim.
type Phase struct {
	T        string `json:"t"`
	Name     string `json:"name"`
	Kind     string `json:"kind"`
	Start    int64  `json:"start"`
	End      int64  `json:"end"`
	Requests int64  `json:"requests"`
	// Spread of send times after the release, ns (bursts only).
	SpreadP50 int64 `json:"spread_p50,omitempty"`
	SpreadP99 int64 `json:"spread_p99,omitempty"`
	SpreadMax int64 `json:"spread_max,omitempty"`
	// Staged is how long before its release a burst sent by last-byte
	// synchronisation began staging its requests (dialling, writing all but
	// the last byte), ns: a server's header-read timeout shorter than this
	// answers them 400.
	Staged int64 `json:"staged,omitempty"`
	// AimError is the signed distance between the intended release instant
	// and the median actual send time, ns (boundary and probe phases).
	AimError int64 `json:"aim_error,omitempty"`
	// Target is the instant aimed at (a window edge), as an offset.
	Target int64 `json:"target,omitempty"`
	// Late and Dropped count sends after their intended time (beyond the
	// tolerance) and sends that never happened (rate phases).
	Late    int64 `json:"late,omitempty"`
	Dropped int64 `json:"dropped,omitempty"`
	// Rate is the achieved send rate per second (rate phases).
	Rate float64 `json:"rate,omitempty"`
	// Wanted is the requested rate per second (rate phases).
	Wanted float64 `json:"wanted,omitempty"`
	// Notes say what the phase could not do and why (a probe with nothing
	// to probe, a bypass variant the declared identity rules out).
	Notes []string `json:"notes,omitempty"`
}

// Sample is the load generator's own footprint at one moment, so a long
// run shows whether history streaming kept memory and goroutines flat.
type Sample struct {
	T string `json:"t"`
	// At is the offset of the sample.
	At int64 `json:"at"`
	// HeapBytes is the live heap (runtime HeapAlloc); Goroutines the count.
	HeapBytes  uint64 `json:"heap_bytes"`
	Goroutines int    `json:"goroutines"`
	// Requests sent so far.
	Requests int64 `json:"requests"`
}

// End is the last line of a history that was closed properly.
type End struct {
	T           string `json:"t"`
	Elapsed     int64  `json:"elapsed"`
	Interrupted bool   `json:"interrupted,omitempty"`
	Reason      string `json:"reason,omitempty"`
	Requests    int64  `json:"requests"`
	// Late counts requests sent more than the plan's tolerance after their
	// intended time; Dropped those the engine could not send at all.
	Late    int64 `json:"late,omitempty"`
	Dropped int64 `json:"dropped,omitempty"`
	// Reorder is how far out of send order, in nanoseconds, the writer
	// wrote the events before this line (Writer.Reorder): a Stream whose
	// ReorderBound is above it holds back only the events sent within it.
	// Written by WriteEnd; nil in histories from before it was measured.
	Reorder *int64 `json:"reorder,omitempty"`
	// Digest is "crc32c:" and the CRC-32C of the file before this line and
	// of this line without its digest field (see digest.go): a check that
	// the history was not edited after the run. Written last; empty in
	// histories from before digests.
	Digest string `json:"digest,omitempty"`
}

// History is a whole run in memory.
type History struct {
	Run    Run
	Events []Event
	Faults []Fault
	Sink   []Sink
	Phases []Phase
	// Samples are the harness's resource samples (long runs).
	Samples []Sample
	// End is nil when the file ended without an end record (crash or kill).
	End *End
	// Truncated is set when the last line was cut off and skipped.
	Truncated bool
	// Source names where the history was read from (the file), for
	// messages; empty for a history built in memory or merged.
	Source string
	// Integrity is what the end record's digest says about the file as
	// read ("" for a history built in memory). A merge is Modified when
	// any shard is, naming it in ModifiedShards.
	Integrity      Integrity
	ModifiedShards []string
	// MissingShards names the shards of the run's split (e.g. "2/3") that
	// were not given: the history covers part of the run.
	MissingShards []string
}

// Stats counts outcomes.
type Stats struct {
	Requests int64 `json:"requests"`
	Admitted int64 `json:"admitted"`
	Rejected int64 `json:"rejected"`
	Errors   int64 `json:"errors"`
}

// Stats counts h's events by outcome under the default contract.
func (h *History) Stats() Stats { return h.StatsBy((*Event).Outcome) }

// StatsBy counts h's events by the outcome classify gives them.
func (h *History) StatsBy(classify func(*Event) Outcome) Stats {
	var s Stats
	for i := range h.Events {
		s.Requests++
		switch classify(&h.Events[i]) {
		case Admitted:
			s.Admitted++
		case Rejected:
			s.Rejected++
		default:
			s.Errors++
		}
	}
	return s
}

// Interrupted reports whether the run did not end normally.
func (h *History) Interrupted() bool { return h.End == nil || h.End.Interrupted }

// How an End.Reason starts when a signal stopped the run, and when a bound
// the caller chose did: ReasonBound, then the option's field and its value
// ("stopped at the bound MaxRequests 500", "… MaxDuration 10s").
const (
	ReasonSignal = "interrupted: "
	ReasonBound  = "stopped at the bound "
)

// reasonBoundV1 is how histories written before ReasonBound named the bound
// (by the command's flag); they still read as complete.
const reasonBoundV1 = "stopped at --max-"

// Completion is how much of its plan a run carried out.
type Completion int

const (
	// Complete: the plan ran to its end, or to a bound the user chose.
	Complete Completion = iota
	// CutBySignal: a signal stopped the run, or it was killed (no end
	// record).
	CutBySignal
	// CutShort: a step of the plan could not be carried out (a fault hook
	// that failed or timed out, a target that went away mid-plan).
	CutShort
)

// Completion says how much of its plan the run carried out, and why not
// all of it.
func (h *History) Completion() (Completion, string) {
	switch {
	case h.End == nil:
		return CutBySignal, "the history has no end record (the run was killed or is still going)"
	case !h.End.Interrupted || strings.HasPrefix(h.End.Reason, ReasonBound) || strings.HasPrefix(h.End.Reason, reasonBoundV1):
		return Complete, ""
	case strings.HasPrefix(h.End.Reason, "interrupted"):
		return CutBySignal, h.End.Reason
	}
	return CutShort, h.End.Reason
}

// Wall converts an event offset to wall-clock time.
func (h *History) Wall(off int64) time.Time { return h.Run.Start.Add(time.Duration(off)) }
