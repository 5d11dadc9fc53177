package attacks

import (
	"context"
	"time"

	"github.com/rlverify/rlverify/history"
)

// Fault kinds a plan's fault phase names. An environment's injector
// supports some of them (envs.Fault* are the same names).
const (
	FaultStoreDown = "store-down"
	FaultStoreSlow = "store-slow"
	FaultClockSkew = "clock-skew"
	FaultRulesDown = "rules-down"
)

// FaultKinds are every fault kind, in the order the engine clears them.
var FaultKinds = []string{FaultStoreDown, FaultStoreSlow, FaultClockSkew, FaultRulesDown}

// FaultInjector breaks and mends parts of the target's stack; an
// environment provides it (envs.Stack.Faults satisfies it).
type FaultInjector interface {
	// Inject starts a fault; param is its size (latency for store-slow,
	// skew for clock-skew, empty otherwise).
	Inject(ctx context.Context, kind, param string) error
	// Clear ends the fault of that kind.
	Clear(ctx context.Context, kind string) error
	// Supports reports whether kind can be injected.
	Supports(kind string) bool
}

// SinkReader reads what reached the downstream: per request key, plus one
// record with Key "*" for the aggregate. Counts may be cumulative or since
// start: the engine reads once before the run and subtracts that reading.
// An unreachable or malformed source is an error, never nothing
// (envs.Stack.Sink satisfies it).
type SinkReader interface {
	Read(ctx context.Context, start time.Time) ([]history.Sink, error)
	// Describe names the source for notes and messages.
	Describe() string
}
