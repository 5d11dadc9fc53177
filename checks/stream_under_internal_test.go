package checks

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/internal/bench"
	"github.com/rlverify/rlverify/policy"
)

// TestUnderStreamStateIsBounded: the second pass of the streamed
// under-admission holds per key the candidates a refusal still to be
// judged can read — those within twice the longest W and the tolerance,
// and of older ones by hi the one a bucket's backward walk finds — its requests of
// one attribution window while it has attributions to make, and every
// key's admissions of one attribution window: on a correct bucket offered
// 1.5× its rate (2 keys), the most any key holds is the same on a run of
// 20,000 events as on one of 200,000, under a bound of the policy alone.
func TestUnderStreamStateIsBounded(t *testing.T) {
	pol, err := policy.Parse("bench", []byte(bench.PolicyYAML))
	require.NoError(t, err)
	var most []int
	for _, n := range []int{20_000, 200_000} {
		file := filepath.Join(t.TempDir(), "h.jsonl")
		require.NoError(t, bench.WriteHistory(file, bench.Generate(n, 2)))
		s, pass := fileStreamer(t, file, pol, Options{Only: []string{"under-admission"}})
		pass(s.Add)
		require.True(t, s.Again())
		us := s.under
		keyMost, admMost, pendMost, trimmed := 0, 0, 0, 0
		pass(func(e *history.Event, seq uint64) {
			s.AddAgain(e, seq)
			k := s.keys[e.Key].under
			keyMost = max(keyMost, k.u.size()+len(k.recs))
			admMost = max(admMost, len(us.adm))
			pendMost = max(pendMost, len(us.pending)-us.head)
			trimmed = max(trimmed, k.u.c.hiBase)
		})
		r := s.Results()[0]
		require.Equal(t, Pass, r.Verdict, r.Summary)
		require.Greater(t, r.Figures["rejections_judged"], float64(n)/5)
		// Half again (the trim's slack) a walk block (a key's first
		// candidates are kept until past one) and 5 s of candidates and
		// of requests for attribution
		// (under 40 each at 7.5/s), and the slack: the walk's old
		// candidates are one per rate (cands.gone), whatever their number.
		require.LessOrEqual(t, keyMost, 2*(64+2*40)+underTrimSlack, "%d events", n)
		require.LessOrEqual(t, admMost, 2*64+256, "%d events", n)
		require.LessOrEqual(t, pendMost, 16, "%d events", n)
		most = append(most, keyMost)
		if n > 100_000 {
			require.Positive(t, trimmed, "the long run forgets candidates")
		}
	}
	require.LessOrEqual(t, most[1], most[0]+most[0]/5, "%v", most)
}

// TestWalkExtendMatchesBuild: a walk grown block by block from a base (the
// streaming check's, over its final candidates) answers every query as
// build over the whole array does.
func TestWalkExtendMatchesBuild(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 63, 64, 65, 300, 2000} {
		for _, base := range []int{0, 37, 64, 4096} {
			hi := make([]int64, n)
			for i := range hi {
				// Round times: exact ties of j − rate·hi among them.
				hi[i] = rng.Int64N(int64(n)) * 200_000_000
			}
			slices.Sort(hi)
			var whole, grown walkMin
			whole.build(hi, base, 5e-9)
			grown.build(hi[:0], base, 5e-9)
			for m := 0; m < n; {
				m = min(n, m+1+rng.IntN(100))
				grown.extend(hi[:m])
				for range 50 {
					l := rng.IntN(m)
					r := l + rng.IntN(m-l)
					require.Equal(t, whole.min(base+l, base+r), grown.min(base+l, base+r), "n %d base %d [%d, %d] of %d", n, base, l, r, m)
				}
			}
		}
	}
}

// TestDroppedWalkMatchesWhole: candidates dropped from the front, a walk
// block at a time at two rates, leave room's walk over every earlier
// candidate (least) the answer of a walk over them all.
func TestDroppedWalkMatchesWhole(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	rates := []float64{5e-9, 1e-10}
	for _, n := range []int{100, 1000, 5000} {
		hi := make([]int64, n)
		at := int64(0)
		for i := range hi {
			// Bursts and lulls around 5/s, in round steps: ties too.
			at += rng.Int64N(3) * 100_000_000
			hi[i] = at
		}
		var whole [2]walkMin
		for i, rate := range rates {
			whole[i].build(hi, 0, rate)
		}
		c := &cands{indexed: true, hi: slices.Clone(hi), lo: slices.Clone(hi)}
		for q := 1; q <= n; q++ {
			if rng.IntN(50) == 0 && q > 1 {
				c.drop(hi[q-1], rates)
				c.nwalks = 0
				// room's linear loop (at most walkBlock candidates
				// before a refusal) never meets a dropped key.
				require.True(t, c.hiBase == 0 || c.hiBase > walkBlock, "hiBase %d", c.hiBase)
			}
			for i, rate := range rates {
				j, h := c.least(c.walk(rate), q)
				want := whole[i].min(0, q-1)
				require.Equal(t, want, j, "n %d q %d rate %g hiBase %d", n, q, rate, c.hiBase)
				require.Equal(t, hi[want], h)
			}
		}
		require.Positive(t, c.hiBase, "n %d: something was dropped", n)
	}
}

// TestUnderStreamBuffersFollowTheWindow: a key's buffers grow to its
// busiest window — of requests for attribution, a burst at 200/s to a
// correct bucket, K=10 at 5/s: 4 s hold about 800; of candidates by lo
// and by hi and of their walks, more than walkBlock before the first drop
// — and, once the key is back at 7.5/s, return to about its window's size
// at a trim rather than keep the burst's (over a long run of 10^5 keys,
// most keys' high marks).
func TestUnderStreamBuffersFollowTheWindow(t *testing.T) {
	pol, err := policy.Parse("bench", []byte(bench.PolicyYAML))
	require.NoError(t, err)
	h := &history.History{Run: history.Run{T: history.TypeRun, Version: history.Version, ID: "burst", Start: time.Unix(1_700_000_000, 0)}}
	level, last := 10.0, int64(0)
	add := func(at int64) {
		level = math.Min(10, level+5*float64(at-last)/1e9)
		last = at
		e := history.Event{T: history.TypeEvent, ID: uint64(len(h.Events) + 1), Key: "free-a", Sent: at, Intended: at, Recv: at + 1_000_000, Phase: "run", Status: 200}
		if level >= 1 {
			level--
		} else {
			e.Status, e.RetryAfter = 429, "1"
		}
		h.Events = append(h.Events, e)
	}
	at := int64(0)
	for range 2000 { // 10 s at 200/s
		at += 5_000_000
		add(at)
	}
	for range 2250 { // 300 s at 7.5/s
		at += 133_333_333
		add(at)
	}
	h.End = &history.End{T: history.TypeEnd, Elapsed: at + 1_000_000, Requests: int64(len(h.Events))}
	file := filepath.Join(t.TempDir(), "h.jsonl")
	require.NoError(t, bench.WriteHistory(file, h))
	s, pass := fileStreamer(t, file, pol, Options{Only: []string{"under-admission"}})
	pass(s.Add)
	require.True(t, s.Again())
	most := map[string]int{}
	var k *underKey
	// caps are the key's buffers' sizes: its requests for attribution, its
	// candidates by lo and by hi, and its walks over them.
	caps := func() map[string]int {
		c := map[string]int{"recs": cap(k.recs), "lo": cap(k.u.c.lo), "hi": cap(k.u.c.hi), "walk": 0}
		for _, w := range k.u.c.walks {
			c["walk"] = max(c["walk"], cap(w.v), cap(w.pre), cap(w.suf))
		}
		return c
	}
	pass(func(e *history.Event, seq uint64) {
		s.AddAgain(e, seq)
		k = s.keys[e.Key].under
		for name, c := range caps() {
			most[name] = max(most[name], c)
		}
	})
	require.Equal(t, Pass, s.Results()[0].Verdict)
	for name, c := range caps() {
		// The burst's window (of candidates, those the limiter may have
		// counted: at most 5/s and 10, kept until past walkBlock before
		// their first drop).
		require.Greater(t, most[name], 100, "%s: the burst's window", name)
		// A buffer that kept its size would be at its most still.
		require.Less(t, c, most[name], name)
		// The last 4.1 s at 7.5/s, half again and 16 before a trim, at
		// most twice that plus 32 after it.
		require.LessOrEqual(t, c, 2*(31+31/2+16)+32, name)
	}
}
