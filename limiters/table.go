package limiters

import (
	"hash/maphash"
	"sync"
)

// shards spreads keys over independent locks.
const shards = 64

// sweepMin is the least number of calls on a shard between two sweeps of its
// expired keys. A sweep also waits for as many calls as the shard holds
// keys, so its cost is amortised to O(1) per call.
const sweepMin = 1024

var seed = maphash.MakeSeed()

// cell is the state of one key: one S per limit, and the instant (Unix ns)
// from which the state is indistinguishable from a fresh one (full bucket,
// empty window), so it may be dropped.
type cell[S any] struct {
	exp int64
	st  []S
}

type shard[S any] struct {
	mu  sync.Mutex
	m   map[string]*cell[S]
	ops int
	_   [40]byte // keep shards on separate cache lines
}

// table is a sharded map from key to per-key state with lazy expiry: no
// goroutine and no clock, only the now of the calls.
type table[S any] struct {
	s [shards]shard[S]
	n int // states per key (one per limit)
}

func newTable[S any](n int) *table[S] {
	t := &table[S]{n: n}
	for i := range t.s {
		t.s[i].m = make(map[string]*cell[S])
	}
	return t
}

// lock locks the shard of key and returns it with the key's cell. fresh
// reports that the cell is new or expired: the caller must initialise its
// states. The caller unlocks sh.mu.
func (t *table[S]) lock(key string, now int64) (sh *shard[S], c *cell[S], fresh bool) {
	sh = &t.s[maphash.String(seed, key)%shards]
	sh.mu.Lock()
	sh.ops++
	if sh.ops >= sweepMin && sh.ops >= len(sh.m) {
		sh.ops = 0
		for k, c := range sh.m {
			if c.exp <= now {
				delete(sh.m, k)
			}
		}
	}
	c = sh.m[key]
	if c == nil {
		c = &cell[S]{st: make([]S, t.n)}
		sh.m[key] = c
		return sh, c, true
	}
	return sh, c, c.exp <= now
}

// Len returns the number of keys held (expired ones not yet swept included).
func (t *table[S]) Len() int {
	n := 0
	for i := range t.s {
		sh := &t.s[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}
