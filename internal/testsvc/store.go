package testsvc

import (
	"sync"
	"time"
)

// Store is the in-memory state of the memory-backed services (orders,
// windowed, sessions): one value per limiter key. Instances built on one
// Store decide on shared state, one quota per key across all of them;
// instances each given their own Store keep per-instance state. Give one
// Store to one kind of service only. Safe for concurrent use; build it with
// NewStore.
type Store struct {
	mu sync.Mutex
	m  map[string]any
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{m: map[string]any{}} }

// step runs one read-decide-write of key's state S: atomically under the
// store's lock, or, with a racy pause, as a read, the pause and a separate
// write, so requests arriving together all decide on the same stale state
// and the last write wins (the racy quirk). decide gets the state and
// whether there was one; it must not keep or modify a state it was given
// (under racy the same value is handed to every request that read it).
func step[S any](s *Store, key string, racy time.Duration, decide func(S, bool) (S, decision)) decision {
	if racy <= 0 {
		s.mu.Lock()
		defer s.mu.Unlock()
		old, ok := s.m[key].(S)
		next, d := decide(old, ok)
		s.m[key] = next
		return d
	}
	s.mu.Lock()
	old, ok := s.m[key].(S)
	s.mu.Unlock()
	time.Sleep(racy)
	next, d := decide(old, ok)
	s.mu.Lock()
	s.m[key] = next
	s.mu.Unlock()
	return d
}
