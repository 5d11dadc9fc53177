// Package catalog names every limiter rlverify can run: the reference
// algorithms on each store and the deliberately faulty variants. The CLI and
// the reference service pick limiters from here by name.
//
// catalog imports limiters and limiters/faulty; nothing in limiters imports it.
package catalog

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/rlverify/rlverify/limiters"
	"github.com/rlverify/rlverify/limiters/faulty"
	"github.com/rlverify/rlverify/policy"
)

// Stores a limiter can keep its state in.
const (
	Memory = "memory"
	Redis  = "redis"
)

// Env is what a constructor may use besides the limits.
type Env struct {
	// Instance is the index of the service instance building the limiter.
	Instance int
	// Now is the instance clock (time.Now when nil).
	Now func() time.Time
}

// Entry describes one limiter.
type Entry struct {
	Name string
	// Algorithm is the family the limiter claims to implement: the policy it
	// is checked against is the run's policy in this family.
	Algorithm policy.Algorithm
	Store     string
	Faulty    bool
	// Breaks names the invariant a faulty limiter violates.
	Breaks      string
	Description string
	New         func(limits []policy.Limit, env Env) (limiters.Limiter, error)
}

var entries = []Entry{
	{
		Name: "token-bucket", Algorithm: policy.TokenBucket, Store: Memory,
		Description: "token bucket, capacity K refilled at r/s, starts full",
		New: func(l []policy.Limit, _ Env) (limiters.Limiter, error) {
			return limiters.NewTokenBucket(l)
		},
	},
	{
		Name: "sliding-log", Algorithm: policy.SlidingLog, Store: Memory,
		Description: "sliding-window log, at most N admitted in any rolling W",
		New: func(l []policy.Limit, _ Env) (limiters.Limiter, error) {
			return limiters.NewSlidingLog(l)
		},
	},
	{
		Name: "faulty/racy-token-bucket", Algorithm: policy.TokenBucket, Store: Memory, Faulty: true,
		Breaks:      "oversell: read-modify-write is not atomic",
		Description: "token bucket whose read and write are separate steps; concurrent requests oversell",
		New: func(l []policy.Limit, _ Env) (limiters.Limiter, error) {
			return faulty.NewRacyTokenBucket(l, 0), nil
		},
	},
}

// All returns every entry, reference limiters first, then faulty ones, each
// group sorted by name then store.
func All() []Entry {
	out := append([]Entry(nil), entries...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Faulty != b.Faulty {
			return !a.Faulty
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Store < b.Store
	})
	return out
}

// Lookup finds name on store ("" picks the memory variant when there is
// one, else the only one).
func Lookup(name, store string) (Entry, error) {
	var cands []Entry
	for _, e := range entries {
		if e.Name == name {
			cands = append(cands, e)
		}
	}
	if len(cands) == 0 {
		return Entry{}, fmt.Errorf("unknown limiter %q (known: %s; see rlverify limiters)", name, strings.Join(Names(), ", "))
	}
	if store == "" {
		store = Memory
	}
	for _, e := range cands {
		if e.Store == store {
			return e, nil
		}
	}
	if len(cands) == 1 && store == Memory {
		return cands[0], nil
	}
	stores := make([]string, len(cands))
	for i, e := range cands {
		stores[i] = e.Store
	}
	return Entry{}, fmt.Errorf("limiter %q has no %s store (it has: %s)", name, store, strings.Join(stores, ", "))
}

// Names lists the distinct limiter names.
func Names() []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range All() {
		if !seen[e.Name] {
			seen[e.Name] = true
			out = append(out, e.Name)
		}
	}
	return out
}
