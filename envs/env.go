// Package envs starts the stacks rlverify attacks: the embedded (in
// process), local (redis-server child processes) and external (the user's
// own instances) environments, their fault injection (store faults through
// internal/faultproxy, a user's Toxiproxy, fault hooks),
// multi-region stacks, state-store start-up and the downstream readers
// (JSON counter, Prometheus metric, a remote sink). Docker lives in
// envs/docker so that only users of --env docker pull in testcontainers.
//
// envs imports service, limiters, policy and history; never attacks,
// checks, reports or the rlverify library. Its FaultInjector and
// SinkReader are faults' interfaces, which attacks consumes.
package envs

import (
	"context"
	"fmt"
	"time"

	"github.com/rlverify/rlverify/faults"
	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policy"
)

// Spec says what stack to start.
type Spec struct {
	// Policy is the declared policy the instances enforce.
	Policy *policy.Policy
	// Limiter is the catalog name of the limiter implementation.
	Limiter string
	// Entry, when set, is Limiter's catalog entry for Store, already
	// looked up (the environment then does not look it up again).
	Entry *catalog.Entry
	// Store is "memory" or "redis".
	Store string
	// RedisURL points at an existing Redis instead of starting one.
	RedisURL string
	// RedisCluster > 0 starts a cluster of that many nodes (local env).
	RedisCluster int
	// Instances is the number of service instances (default 1).
	Instances int
	// Targets are the base URLs of external instances (external env).
	Targets []string
	// Skews gives instance i a clock offset of Skews[i] (every environment
	// but external; faulty/instance-clock trusts it).
	Skews []time.Duration
	// Regions, when set, starts a multi-region stack (embedded and docker).
	Regions *RegionSpec
	// Log receives progress lines about the environment (may be nil).
	Log func(format string, args ...any)
}

// The fault kinds, their parameters and the injector and downstream-reader
// interfaces live in faults/; these are their names in envs.
const (
	FaultStoreDown     = faults.StoreDown
	FaultStoreSlow     = faults.StoreSlow
	FaultClockSkew     = faults.ClockSkew
	FaultRulesDown     = faults.RulesDown
	StoreDownReset     = faults.StoreDownReset
	StoreDownPartition = faults.StoreDownPartition
	StoreSlowStall     = faults.StoreSlowStall
)

// FaultInjector is faults.Injector: what Stack.Faults holds.
type FaultInjector = faults.Injector

// SinkReader is faults.SinkReader: what Stack.Sink holds.
type SinkReader = faults.SinkReader

// CatalogEntry is spec's catalog entry for store: Entry when it is the one,
// else looked up.
func (spec Spec) CatalogEntry(store string) (catalog.Entry, error) {
	if spec.Entry != nil && spec.Entry.Name == spec.Limiter && spec.Entry.Store == store {
		return *spec.Entry, nil
	}
	return catalog.Lookup(spec.Limiter, store)
}

// Stack is a started environment.
type Stack struct {
	// Env is the environment's name.
	Env string
	// Instances are the base URLs to attack, one per instance.
	Instances []string
	// Sink is nil when downstream arrivals cannot be observed.
	Sink SinkReader
	// Faults is nil when the environment cannot inject faults.
	Faults FaultInjector
	// Notes are facts for the report ("redis: in-process emulation").
	Notes []string
	// StoreDesc describes the state store ("memory", "redis 127.0.0.1:6379").
	StoreDesc string
	closers   []func() error
}

// OnClose registers f to run (in reverse order) when the stack closes.
func (s *Stack) OnClose(f func() error) { s.closers = append(s.closers, f) }

// Close tears everything down, always running every closer, and returns the
// first error.
func (s *Stack) Close() error {
	var first error
	for i := len(s.closers) - 1; i >= 0; i-- {
		if err := s.closers[i](); err != nil && first == nil {
			first = err
		}
	}
	s.closers = nil
	return first
}

// Environment starts stacks.
type Environment interface {
	Name() string
	Start(ctx context.Context, spec Spec) (*Stack, error)
}

// ErrUnavailable wraps errors of an environment that cannot run here (no
// Docker, no redis-server).
var ErrUnavailable = fmt.Errorf("environment unavailable")

// ErrUnreachable wraps the error of a target that does not answer (its port
// refuses connections, or no request got a response): every plan against it
// would end the same way, so an audit stops at once.
var ErrUnreachable = fmt.Errorf("target unreachable")

// Unreachable marks err as ErrUnreachable, its message unchanged.
func Unreachable(err error) error { return unreachableError{err} }

type unreachableError struct{ err error }

func (u unreachableError) Error() string   { return u.err.Error() }
func (u unreachableError) Unwrap() []error { return []error{u.err, ErrUnreachable} }
