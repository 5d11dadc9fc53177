package attacks

import "github.com/rlverify/rlverify/faults"

// The fault kinds and the interfaces to the environment live in faults/;
// these are their names in the engine's API.
const (
	FaultStoreDown = faults.StoreDown
	FaultStoreSlow = faults.StoreSlow
	FaultClockSkew = faults.ClockSkew
	FaultRulesDown = faults.RulesDown
)

// FaultKinds are every fault kind, in the order the engine clears them.
var FaultKinds = faults.Kinds

// FaultInjector is faults.Injector: what Options.Faults takes.
type FaultInjector = faults.Injector

// SinkReader is faults.SinkReader: what Options.Sink takes.
type SinkReader = faults.SinkReader
