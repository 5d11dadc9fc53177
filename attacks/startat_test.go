package attacks

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

func TestCheckStart(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name string
		at   time.Time
		want string
	}{
		{"now", now, ""},
		{"ahead", now.Add(2 * time.Minute), ""},
		{"at the bound", now.Add(MaxStartWait), ""},
		{"past", now.Add(-1500 * time.Millisecond), "start instant 2026-01-02T03:04:03.5Z is 1.5s in the past"},
		{"too far", now.Add(MaxStartWait + time.Second), "start instant 2026-01-02T04:04:06Z is 1h0m1s ahead, more than the 1h0m0s a run waits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckStart(tc.at, now)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// fakeClock is a clock that moves only when slept on.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(_ context.Context, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
}

const startPlan = "name: s\nphases:\n  - kind: burst\n    key: free-a\n    requests: 5\n"

func TestRunWaitsForStartAt(t *testing.T) {
	srv, n := countingServer(t, 10)
	clock := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	at := clock.now.Add(90 * time.Second)
	h, _, err := runPlan(t, context.Background(), startPlan, Options{Instances: []string{srv.URL}, Now: clock.Now, Sleep: clock.Sleep, StartAt: at})
	require.NoError(t, err)
	require.Equal(t, 90*time.Second, clock.sleeps[0], "the first wait is the one until the start instant")
	require.True(t, h.Run.Start.Equal(at), "the run starts at the instant: %s", h.Run.Start)
	require.Len(t, h.Events, 5)
	require.Equal(t, int64(5), n.Load())
}

func TestRunRefusesAStartInThePast(t *testing.T) {
	srv, n := countingServer(t, 10)
	clock := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	p, err := Parse("s.yaml", []byte(startPlan))
	require.NoError(t, err)
	var buf bytes.Buffer
	e, err := New(Options{Instances: []string{srv.URL}, Policy: policy.Default(), Writer: history.NewWriter(&buf),
		Now: clock.Now, Sleep: clock.Sleep, StartAt: clock.now.Add(-time.Second)})
	require.NoError(t, err)
	_, err = e.Run(context.Background(), p, history.Run{})
	var pe *PrepareError
	require.True(t, errors.As(err, &pe), "%v", err)
	require.ErrorContains(t, err, "is 1s in the past")
	require.Empty(t, clock.sleeps)
	require.Zero(t, buf.Len(), "nothing written")
	require.Zero(t, n.Load(), "nothing sent")
}

// TestRunStartsAtTheInstantOnTheRealClock: with the real clock the run's
// recorded start is not before the instant (a timer never fires early).
func TestRunStartsAtTheInstantOnTheRealClock(t *testing.T) {
	srv, _ := countingServer(t, 10)
	at := time.Now().Add(200 * time.Millisecond)
	h, _, err := runPlan(t, context.Background(), startPlan, Options{Instances: []string{srv.URL}, StartAt: at})
	require.NoError(t, err)
	require.False(t, h.Run.Start.Before(at), "started %s before the instant", at.Sub(h.Run.Start))
	require.Less(t, h.Run.Start.Sub(at), 5*time.Second)
}

func TestCancelWhileWaitingForStart(t *testing.T) {
	srv, n := countingServer(t, 10)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	began := time.Now()
	h, sum, err := runPlan(t, ctx, startPlan, Options{Instances: []string{srv.URL}, StartAt: time.Now().Add(time.Minute)})
	require.NoError(t, err)
	require.Less(t, time.Since(began), 30*time.Second, "the wait ends with the context")
	require.True(t, sum.Interrupted)
	require.NotNil(t, h.End)
	require.True(t, h.End.Interrupted)
	require.Zero(t, n.Load(), "nothing sent")
}
