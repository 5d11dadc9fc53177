package checks_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/internal/bench"
	"github.com/rlverify/rlverify/policy"
)

// TestStreamerMatchesRunDownstream is the differential test of the
// streamed downstream check: histories with downstream readings (after a
// phase and at the end), judged in memory (Run) and streamed, give the
// same result — verdict, summary, figures and every piece of evidence —
// for readings within the admissions, beyond them, beyond the envelope
// between two readings, a counter that went backwards, a global guard's
// peak and total, and requests decided by the failure mode, another
// scope, cost-0 peeks and unanswered requests on several instances.
func TestStreamerMatchesRunDownstream(t *testing.T) {
	pol, err := policy.Parse("bench", []byte(bench.PolicyYAML))
	require.NoError(t, err)
	guarded, err := policy.Parse("bench-global", []byte(bench.PolicyYAML+"global:\n  name: all\n  algorithm: token-bucket\n  capacity: 60\n  rate: 30/s\n"))
	require.NoError(t, err)
	closed, err := policy.Parse("bench-closed", []byte(bench.PolicyYAML[:len(bench.PolicyYAML)-len("  mode: open\n  store_timeout: 50ms\n")]+"  mode: closed\n  store_timeout: 50ms\n"))
	require.NoError(t, err)
	require.Equal(t, policy.FailClosed, closed.Failure.Mode)
	perInst, err := policy.Parse("bench-instance", []byte(strings.Replace(bench.PolicyYAML, "rate: 5/s\n", "rate: 5/s\n        scope: instance\n", 1)))
	require.NoError(t, err)
	require.True(t, perInst.Tiers[0].Limits[0].PerInstance())
	sec := int64(time.Second)
	// readings are the sink's readings of h's keys: after phase "rate" at
	// mid and at the end, each the key's admissions so far, changed by
	// bend (key index → arrivals at mid and at the end).
	readings := func(h *history.History, p *policy.Policy, bend func(k int, mid, end int64) (int64, int64)) []history.Sink {
		mid := h.Events[len(h.Events)/2].Sent
		last := h.Events[len(h.Events)-1].Recv
		var keys []string
		adm := map[string][2]int64{}
		for i := range h.Events {
			e := &h.Events[i]
			if _, ok := adm[e.Key]; !ok {
				keys = append(keys, e.Key)
			}
			a := adm[e.Key]
			if checks.Outcome(p, e) == history.Admitted {
				if e.Recv <= mid {
					a[0]++
				}
				a[1]++
			}
			adm[e.Key] = a
		}
		var out []history.Sink
		for k, key := range keys {
			m, end := bend(k, adm[key][0], adm[key][1])
			out = append(out, history.Sink{Key: key, Arrivals: m, Phase: "rate", At: mid}, history.Sink{Key: key, Arrivals: end, At: last + sec})
		}
		return out
	}
	same := func(_ int, mid, end int64) (int64, int64) { return mid, end }
	for _, tc := range []struct {
		name string
		pol  *policy.Policy
		h    func(p *policy.Policy) *history.History
		want checks.Verdict
	}{
		{"one key, within", pol, func(p *policy.Policy) *history.History {
			h := bench.Generate(2000, 1)
			h.Sink = readings(h, p, same)
			return h
		}, checks.Pass},
		{"no sink", pol, func(*policy.Policy) *history.History { return bench.Generate(500, 3) }, checks.Skip},
		{"many keys: beyond admissions, between readings, a reset", pol, func(p *policy.Policy) *history.History {
			h := bench.Generate(5000, 60)
			h.Sink = readings(h, p, func(k int, mid, end int64) (int64, int64) {
				switch k % 7 {
				case 1:
					return mid, end + 3 // more than was admitted
				case 2:
					return 0, end // everything arrived after the mid reading
				case 3:
					return mid, mid - 1 // the counter went backwards
				}
				return mid, end
			})
			return h
		}, checks.Fail},
		{"a global guard's peak and total", guarded, func(p *policy.Policy) *history.History {
			h := bench.Generate(3000, 20)
			h.Sink = append(readings(h, p, same), history.Sink{Key: "*", Arrivals: 100_000, PeakPerSecond: 120, At: h.Events[len(h.Events)-1].Recv})
			return h
		}, checks.Fail},
		{"faults, scopes, peaks and errors on instances", pol, func(p *policy.Policy) *history.History {
			h := bench.Generate(5000, 40)
			for i := range h.Events {
				e := &h.Events[i]
				e.Instance = i % 3
				switch i % 17 {
				case 2:
					e.Status, e.Err = 0, "timeout"
				case 5:
					e.Fallback = "open"
				case 8:
					e.Scope = "global"
				case 11:
					e.Cost = history.CostOf(0)
				}
			}
			h.Faults = []history.Fault{{Kind: "store-down", Start: 2 * sec, End: 4 * sec}, {Kind: "store-slow", Start: 9 * sec, End: 0}}
			h.Sink = readings(h, p, func(k int, mid, end int64) (int64, int64) {
				switch k % 5 {
				case 1:
					return 0, end // within only with what faults and peeks add
				case 3:
					return mid, end + 1 // within only with the unanswered requests
				}
				return mid, end
			})
			return h
		}, checks.Pass},
		{"a per-instance limit: the instances seen widen the bound", perInst, func(p *policy.Policy) *history.History {
			h := bench.Generate(3000, 5)
			for i := range h.Events {
				h.Events[i].Instance = i % 4
			}
			h.Sink = readings(h, p, func(k int, mid, end int64) (int64, int64) {
				if k == 0 {
					return 0, end + mid // beyond admissions
				}
				return 0, end
			})
			return h
		}, checks.Fail},
		{"fail-closed: an outage's admissions count", closed, func(p *policy.Policy) *history.History {
			h := bench.Generate(3000, 4)
			for i := range h.Events {
				if i%9 == 0 {
					h.Events[i].Fallback = "open"
				}
			}
			h.Faults = []history.Fault{{Kind: "store-down", Start: sec, End: 3 * sec}}
			h.Sink = readings(h, p, func(k int, mid, end int64) (int64, int64) { return 0, end })
			return h
		}, checks.Fail},
	} {
		for _, maxEv := range []int{0, 1 << 20} {
			t.Run(fmt.Sprintf("%s/evidence %d", tc.name, maxEv), func(t *testing.T) {
				h := tc.h(tc.pol)
				file := filepath.Join(t.TempDir(), "h.jsonl")
				writeHistorySinks(t, file, h)
				whole, err := history.ReadFile(file)
				require.NoError(t, err)
				o := checks.Options{Only: []string{"downstream"}, MaxEvidence: maxEv}
				want := checks.Run(whole, tc.pol, o)
				require.Equal(t, tc.want, want[0].Verdict, want[0].Summary)
				require.Equal(t, want, streamResults(t, file, tc.pol, o))
				if maxEv == 0 {
					// With the other streaming checks beside it.
					o.Only = checks.Streamable()
					require.Equal(t, checks.Run(whole, tc.pol, o), streamResults(t, file, tc.pol, o))
				}
			})
		}
	}
}

// writeHistorySinks is writeHistory with h's downstream readings after the
// events.
func writeHistorySinks(t *testing.T, file string, h *history.History) {
	t.Helper()
	w, err := history.Create(file)
	require.NoError(t, err)
	require.NoError(t, w.WriteRun(h.Run))
	for i := range h.Events {
		if i == len(h.Events)/2 {
			for _, f := range h.Faults {
				require.NoError(t, w.WriteFault(f))
			}
		}
		require.NoError(t, w.WriteEvent(&h.Events[i]))
	}
	for _, s := range h.Sink {
		require.NoError(t, w.WriteSink(s))
	}
	require.NoError(t, w.WriteEnd(*h.End))
	require.NoError(t, w.Close())
}
