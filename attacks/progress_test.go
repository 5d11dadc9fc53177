package attacks

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// TestProgressCountsEachPhaseOnItsOwn runs three phases against a server
// that admits 10 requests in all and expects the last snapshot of each
// phase to carry that phase's counts only, with its planned size.
func TestProgressCountsEachPhaseOnItsOwn(t *testing.T) {
	srv, _ := countingServer(t, 10)
	var mu sync.Mutex
	last := map[string]Progress{}
	var order []string
	o := Options{Instances: []string{srv.URL}, Progress: func(p Progress) {
		mu.Lock()
		defer mu.Unlock()
		if p.Done {
			if _, seen := last[p.Phase]; !seen {
				order = append(order, p.Phase)
			}
			last[p.Phase] = p
		}
	}}
	plan := `name: p
phases:
  - name: first
    kind: burst
    key: free-a
    requests: 30
  - name: pause
    kind: idle
    duration: 50ms
  - name: second
    kind: spread
    key: free-b
    requests: 12
`
	h, _, err := runPlan(t, context.Background(), plan, o)
	require.NoError(t, err)
	require.Len(t, h.Events, 42)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"first", "pause", "second"}, order)

	first := last["first"]
	require.Equal(t, 0, first.Index)
	require.Equal(t, 3, first.Phases)
	require.Equal(t, int64(30), first.PhaseSent)
	require.Equal(t, int64(10), first.PhaseAdmitted)
	require.Equal(t, int64(20), first.PhaseRejected)
	require.Equal(t, int64(30), first.PlannedRequests)

	pause := last["pause"]
	require.Zero(t, pause.PhaseSent)
	require.Equal(t, 50*time.Millisecond, pause.PlannedDuration)
	require.GreaterOrEqual(t, pause.PhaseElapsed, 50*time.Millisecond)

	second := last["second"]
	require.Equal(t, 2, second.Index)
	require.Equal(t, int64(12), second.PhaseSent, "the second phase does not carry the first one's requests")
	require.Zero(t, second.PhaseAdmitted, "the server's 10 admissions went to the first phase")
	require.Equal(t, int64(12), second.PhaseRejected)
	require.Equal(t, int64(42), second.Sent, "the run's counts still cover every phase")
}

func TestPlannedSize(t *testing.T) {
	srv, _ := countingServer(t, 0)
	for _, tc := range []struct {
		name  string
		phase Phase
		reqs  int64
		d     time.Duration
	}{
		{"burst", Phase{Kind: KindBurst, Key: "free-a", Requests: 40}, 40, 0},
		{"burst default drains the key", Phase{Kind: KindBurst, Key: "free-a"}, 2*10 + DefaultBypassExtra, 0},
		{"boundary sends two sides", Phase{Kind: KindBoundary, Key: "free-a", Requests: 7}, 14, 0},
		{"rate over a duration", Phase{Kind: KindRate, Key: "free-a", Rate: 100, Duration: policy.Duration(2 * time.Second)}, 200, 2 * time.Second},
		{"rate bounded by requests", Phase{Kind: KindRate, Key: "free-a", Rate: 100, Duration: policy.Duration(2 * time.Second), Requests: 50}, 50, 2 * time.Second},
		{"ramp sends the mean rate", Phase{Kind: KindRate, Key: "free-a", Rate: 100, RateTo: 300, Duration: policy.Duration(time.Second)}, 200, time.Second},
		{"rate_x of the tier rate", Phase{Kind: KindRate, Key: "free-a", RateX: 2, Duration: policy.Duration(time.Second)}, 10, time.Second},
		{"idle", Phase{Kind: KindIdle, Duration: policy.Duration(time.Second)}, 0, time.Second},
		{"fault", Phase{Kind: KindFault}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New(Options{Instances: []string{srv.URL}, Policy: policy.Default(), Writer: history.NewWriter(io.Discard)})
			require.NoError(t, err)
			reqs, d := e.planned(&tc.phase)
			require.Equal(t, tc.reqs, reqs)
			require.Equal(t, tc.d, d)
		})
	}
}
