// Package faults is the one home of the fault kinds a plan injects, their
// parameters, and the two interfaces between the engine and an
// environment: Injector (breaks and mends the target's stack) and
// SinkReader (reads what reached the downstream). attacks consumes them,
// envs and service implement them; neither imports the other. It imports
// only history.
package faults

import (
	"context"
	"time"

	"github.com/rlverify/rlverify/history"
)

// Fault kinds a plan's fault phase names: the store's, and the two the
// service's control endpoint takes.
const (
	StoreDown = "store-down"
	StoreSlow = "store-slow"
	// ClockSkew shifts an instance's clock (param: the skew).
	ClockSkew = "clock-skew"
	// RulesDown makes the service's rule source unreadable: it must apply
	// the conservative defaults from code (policy.Conservative).
	RulesDown = "rules-down"
	// LimitChange applies a limit change the policy declares (param: its
	// name, policy.Change); clearing it restores the declared limits.
	LimitChange = "limit-change"
)

// Kinds are every fault kind, in the order the engine clears them.
var Kinds = []string{StoreDown, StoreSlow, ClockSkew, RulesDown, LimitChange}

// Parameters that choose how a store fails.
const (
	// StoreDownReset: store-down with TCP resets instead of closed
	// connections (docker: the Redis container is killed, not stopped).
	StoreDownReset = "reset"
	// StoreDownPartition: store-down as a network partition, the store
	// alive and keeping its state but unreachable (docker: the Redis
	// container leaves the stack's network; the fault proxy stalls).
	StoreDownPartition = "partition"
	// StoreSlowStall: store-slow where nothing gets through at all, so
	// every call runs into its timeout (docker's store-slow always is).
	StoreSlowStall = "stall"
)

// Injector breaks and mends parts of the target's stack; an environment
// provides it (envs.Stack.Faults).
type Injector interface {
	// Inject starts a fault; param is its size (latency for store-slow,
	// skew for clock-skew, empty otherwise).
	Inject(ctx context.Context, kind, param string) error
	// Clear ends the fault of that kind.
	Clear(ctx context.Context, kind string) error
	// Supports reports whether kind can be injected.
	Supports(kind string) bool
}

// SinkReader reads what reached the downstream: per request key, plus one
// record with Key "*" for the aggregate. Counts may be cumulative (a
// service's own counter) or since start (the sink): the engine reads once
// before the run and subtracts that reading. Offsets (First, Last) are from
// start. An unreachable or malformed source is an error, never nothing.
type SinkReader interface {
	Read(ctx context.Context, start time.Time) ([]history.Sink, error)
	// Describe names the source for notes and messages.
	Describe() string
}
