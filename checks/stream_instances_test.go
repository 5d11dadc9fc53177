package checks_test

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// TestStreamerMatchesRunInstances is instances' differential test: on a
// run where no key's requests (variants aside) went to two instances the
// streamed result is Run's (a SKIP with the run's count of instances);
// where one key's did, the Streamer says the run needs the in-memory path
// (InMemory, naming the key) and its result is UNKNOWN, never a verdict.
func TestStreamerMatchesRunInstances(t *testing.T) {
	pol := policy.Default()
	// gen makes n events of keys keys, key i's on instance inst(i, j) for
	// its j-th request; variant(i, j) makes that request a variant.
	gen := func(n, keys int, inst func(k, j int) int, variant func(k, j int) bool) *history.History {
		h := &history.History{Run: history.Run{T: history.TypeRun, Version: 1, ID: "inst"}, End: &history.End{T: history.TypeEnd}}
		count := make([]int, keys)
		for i := range n {
			k := i % keys
			j := count[k]
			count[k]++
			e := history.Event{T: history.TypeEvent, ID: uint64(i + 1), Key: "free-k" + strconv.Itoa(k), Instance: inst(k, j),
				Phase: "run", Sent: int64(i) * 20e6, Recv: int64(i)*20e6 + 1e6, Status: 200}
			if j >= 10 {
				e.Status, e.RetryAfter = 429, "1"
			}
			if variant != nil && variant(k, j) {
				e.Variant = "FREE-K" + strconv.Itoa(k)
			}
			h.Events = append(h.Events, e)
		}
		h.End.Requests = int64(n)
		h.End.Elapsed = int64(n) * 20e6
		return h
	}
	for _, c := range []struct {
		name   string
		h      *history.History
		spread string // the key InMemory names ("": none)
		insts  float64
	}{
		{"one instance", gen(300, 5, func(int, int) int { return 0 }, nil), "", 1},
		{"keys pinned to three instances", gen(300, 6, func(k, _ int) int { return k % 3 }, nil), "", 3},
		{"a variant on another instance", gen(300, 4, func(k, j int) int {
			if j == 7 {
				return 1
			}
			return 0
		}, func(_, j int) bool { return j == 7 }), "", 2},
		{"a key spread over two instances", gen(300, 4, func(k, j int) int {
			if k == 2 && j == 20 {
				return 1
			}
			return 0
		}, nil), "free-k2", 2},
		{"every key round robin", gen(300, 3, func(_, j int) int { return j % 2 }, nil), "free-k0", 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "h.jsonl")
			writeHistory(t, file, c.h)
			whole, err := history.ReadFile(file)
			require.NoError(t, err)
			for _, only := range [][]string{{"instances"}, append(checks.Streamable(), "instances")} {
				o := checks.Options{Only: only, MaxEvidence: 1 << 20}
				want := checks.Run(whole, pol, o)
				got, why, inMemory := streamInstances(t, file, pol, o)
				if c.spread == "" {
					require.False(t, inMemory, why)
					require.Equal(t, want, got)
					require.Equal(t, checks.Skip, resultNamed(got, "instances").Verdict)
					require.Equal(t, c.insts, resultNamed(got, "instances").Figures["instances"])
					continue
				}
				require.True(t, inMemory)
				require.Contains(t, why, "key "+c.spread+"'s requests went to instances")
				r := resultNamed(got, "instances")
				require.Equal(t, checks.Unknown, r.Verdict)
				require.Contains(t, r.Summary, why)
				// Run judged it: the watch did not send a run to memory
				// for nothing.
				require.NotEqual(t, checks.Skip, resultNamed(want, "instances").Verdict)
			}
		})
	}
}

// TestStreamerInstancesOnFixtures: on every fixture the streamed
// instances is Run's, or the Streamer sends the run to memory because a
// key's requests went to two instances.
func TestStreamerInstancesOnFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/*.jsonl")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	streamed, spread := 0, 0
	defer func() {
		// Both sides of the watch are met: fixtures judged on the stream,
		// and the instances fixtures, whose keys go to several instances.
		require.Positive(t, streamed)
		require.Positive(t, spread)
	}()
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			whole, err := history.ReadFile(file)
			require.NoError(t, err)
			pol, err := policy.Load(filepath.Join("testdata", whole.Run.Policy))
			require.NoError(t, err)
			o := checks.Options{Only: []string{"instances"}, MaxEvidence: 1 << 20}
			got, why, inMemory := streamInstances(t, file, pol, o)
			if !inMemory {
				require.Equal(t, checks.Run(whole, pol, o), got)
				streamed++
				return
			}
			spread++
			first := map[string]int{}
			isSpread := false
			for _, e := range whole.Events {
				if e.Variant != "" {
					continue
				}
				if in, ok := first[e.Key]; ok && in != e.Instance {
					isSpread = true
				} else if !ok {
					first[e.Key] = e.Instance
				}
			}
			require.True(t, isSpread, why)
		})
	}
}

// streamInstances judges file through a Streamer, and says whether it
// asked for the in-memory path.
func streamInstances(t *testing.T, file string, pol *policy.Policy, o checks.Options) ([]checks.Result, string, bool) {
	t.Helper()
	s, _ := streamFile(t, file, pol, o)
	why, inMemory := s.InMemory()
	return s.Results(), why, inMemory
}
