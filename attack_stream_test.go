package rlverify_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/thresholds"
)

// streamPlan is a short attack on two keys: a burst, then a steady rate
// above the refill (about a second, 190 requests).
const streamPlan = `name: stream-attack
phases:
  - name: burst
    kind: burst
    key: free-a
    requests: 40
  - name: steady
    kind: tenants
    rate: 150/s
    duration: 1s
    tenants:
      - key: free-a
        weight: 1
      - key: free-b
        weight: 2
`

// TestAttackJudgesOnTheStreamingPath (issue 29: the attack stays flat):
// an attack whose checks all stream judges its own history on the
// streaming path — Outcome.Path and PathWhy say so — and gives the
// document the in-memory path gives for the same history file (Check with
// InMemory), on a correct limiter and an oversold one, with the history
// kept, temporary, and copied as it is written; asked for (InMemory),
// or with checks that do not stream, it judges in memory.
func TestAttackJudgesOnTheStreamingPath(t *testing.T) {
	pol, err := policy.Parse("example.yaml", []byte(promise))
	require.NoError(t, err)
	plan, err := attacks.Parse("stream-attack.yaml", []byte(streamPlan))
	require.NoError(t, err)
	streamable := checks.Options{Only: checks.Streamable()}
	for _, tc := range []struct {
		name     string
		burst    float64 // the limiter's real burst (the policy declares 10)
		checks   checks.Options
		inMemory bool
		temp     bool
		copy     bool
		cut      bool // interrupted during the steady phase
		want     rlverify.Path
		why      string
		oversell checks.Verdict
	}{
		{"correct", 10, streamable, false, false, false, false, rlverify.Streaming, "every check judged streams: " + strings.Join(checks.Streamable(), ", "), checks.Pass},
		{"oversold", 16, streamable, false, false, false, false, rlverify.Streaming, "every check judged streams", checks.Fail},
		{"temporary history, copied", 16, checks.Options{Only: []string{"oversell"}}, false, true, true, false, rlverify.Streaming, "every check judged streams: oversell", checks.Fail},
		{"interrupted", 10, streamable, false, false, false, true, rlverify.Streaming, "every check judged streams", checks.Pass},
		{"asked for in memory", 16, streamable, true, false, false, false, rlverify.InMemory, "asked for", checks.Fail},
		{"thresholds", 10, checks.Options{Only: []string{"oversell"}}, false, false, false, false, rlverify.InMemory, "thresholds read the events in memory", checks.Pass},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(t.TempDir(), "history.jsonl")
			o := rlverify.AttackOptions{Plan: plan, Policy: pol, Checks: tc.checks, InMemory: tc.inMemory,
				Handler: tokenBucket(http.HandlerFunc(hello), tc.burst, 1)}
			if tc.name == "thresholds" {
				// Thresholds read the events: in memory.
				th, err := thresholds.Parse("errors<100%")
				require.NoError(t, err)
				o.Thresholds = []thresholds.Threshold{th}
			}
			if !tc.temp {
				o.HistoryFile = file
			}
			var cp bytes.Buffer
			if tc.copy {
				o.HistoryCopy = &cp
			}
			ctx := context.Background()
			if tc.cut {
				// Cut off once the steady phase has begun.
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				defer cancel()
				o.OnEvent = func(e history.Event) {
					if e.Phase == "steady" {
						cancel()
					}
				}
			}
			out, err := rlverify.Attack(ctx, o)
			require.NoError(t, err)
			if tc.cut {
				require.Equal(t, checks.Interrupted, out.Document.Verdict)
			}
			require.Equal(t, tc.want, out.Path, out.PathWhy)
			require.Contains(t, out.PathWhy, tc.why)
			require.Equal(t, tc.oversell, rlverify.ResultVerdict(out.Results, "oversell"))
			if tc.temp {
				require.Empty(t, out.HistoryFile)
				// The copy is the whole history: judge it.
				require.NoError(t, os.WriteFile(file, cp.Bytes(), 0o600))
			} else {
				require.Equal(t, file, out.HistoryFile)
			}
			if tc.want == rlverify.Streaming {
				require.Empty(t, out.History.Events, "the streaming path keeps the records only")
			}
			// The same history judged in memory: the same document.
			whole, err := rlverify.Check(context.Background(), rlverify.CheckOptions{Histories: []string{file}, Policy: pol, Checks: tc.checks, Thresholds: o.Thresholds, InMemory: true})
			require.NoError(t, err)
			require.Equal(t, rlverify.InMemory, whole.Path)
			require.Equal(t, whole.Results, out.Results)
			require.Equal(t, whole.Document, out.Document)
			if tc.oversell == checks.Fail {
				for _, r := range out.Results {
					if r.Name == "oversell" {
						require.NotEmpty(t, r.Evidence)
					}
				}
			}
		})
	}
}

// TestAttackStreamingPathTargetUnreachable: on the streaming path too, a
// target that answers nothing is an unreachable error naming the commonest
// error, not a verdict.
func TestAttackStreamingPathTargetUnreachable(t *testing.T) {
	pol, err := policy.Parse("example.yaml", []byte(promise))
	require.NoError(t, err)
	plan, err := attacks.Parse("tiny.yaml", []byte("name: tiny\nphases:\n  - name: burst\n    kind: burst\n    key: free-a\n    requests: 6\n"))
	require.NoError(t, err)
	// It accepts connections and hangs up on every request.
	hangUp := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			c.Close()
		}
	})
	for _, tc := range []struct {
		name     string
		inMemory bool
	}{
		{"streaming", false},
		{"in memory", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rlverify.Attack(context.Background(), rlverify.AttackOptions{Plan: plan, Policy: pol, Checks: checks.Options{Only: checks.Streamable()},
				InMemory: tc.inMemory, Handler: hangUp, HistoryFile: filepath.Join(t.TempDir(), "h.jsonl")})
			require.Error(t, err)
			require.True(t, errors.Is(err, envs.ErrUnreachable), "%v", err)
			require.ErrorContains(t, err, "no request got a response (6 of 6: ")
			require.ErrorContains(t, err, "EOF")
		})
	}
}
