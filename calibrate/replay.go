package calibrate

import (
	"runtime"
	"sync"

	"github.com/rlverify/rlverify/limiters"
	"github.com/rlverify/rlverify/policy"
)

// group is the keys of one tier, with which of their arrivals are abusive.
type group struct {
	keys    []int32 // indexes into Traffic
	abusive [][]bool
	// legit[i] is the number of legitimate arrivals of keys[i]; total sums.
	legit               []int
	legitTotal, abTotal int
}

// tally is the outcome of one replay.
type tally struct {
	legitRefused, abusiveRefused int
	// worstKeyShare is the largest share of one key's legitimate arrivals
	// refused.
	worstKeyShare float64
}

// replay runs the keys of g (those sel keeps, all when sel is nil) through
// a fresh reference limiter of alg over limits, every arrival of a key in
// time order, and counts the refusals. Keys are independent, so they are
// split over GOMAXPROCS workers, each with its own limiter. visit, when
// set, sees every decision; it is called from several goroutines at once,
// never for the same key i at once.
func (t *Traffic) replay(g *group, alg policy.Algorithm, limits []policy.Limit, sel func(i int) bool, visit func(i, j int, allowed bool)) (tally, error) {
	workers := runtime.GOMAXPROCS(0)
	if len(g.keys) < 64 {
		workers = 1
	}
	out := make([]tally, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			lim, err := limiters.New(alg, limits)
			if err != nil {
				errs[w] = err
				return
			}
			res := &out[w]
			for i := w; i < len(g.keys); i += workers {
				if sel != nil && !sel(i) {
					continue
				}
				k := g.keys[i]
				key := t.keys[k]
				ab := g.abusive[i]
				refused := 0
				for j, at := range t.times[k] {
					ok := lim.AllowAt(at, key, 1).Allowed
					if visit != nil {
						visit(i, j, ok)
					}
					if ok {
						continue
					}
					if ab != nil && ab[j] {
						res.abusiveRefused++
					} else {
						refused++
					}
				}
				res.legitRefused += refused
				if g.legit[i] > 0 {
					res.worstKeyShare = max(res.worstKeyShare, float64(refused)/float64(g.legit[i]))
				}
			}
		}(w)
	}
	wg.Wait()
	var total tally
	for w, r := range out {
		if errs[w] != nil {
			return tally{}, errs[w]
		}
		total.legitRefused += r.legitRefused
		total.abusiveRefused += r.abusiveRefused
		total.worstKeyShare = max(total.worstKeyShare, r.worstKeyShare)
	}
	return total, nil
}
