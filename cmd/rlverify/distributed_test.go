package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/history"
)

func TestStartAtFlag(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, in string
		want     time.Time
		err      string
	}{
		{"unset", "", time.Time{}, ""},
		{"ahead", "2026-05-01T12:02:00Z", now.Add(2 * time.Minute), ""},
		{"with offset and fraction", "2026-05-01T14:00:30.5+02:00", now.Add(30*time.Second + 500*time.Millisecond), ""},
		{"past", "2026-05-01T11:59:00Z", time.Time{}, "--start-at: start instant 2026-05-01T11:59:00Z is 1m0s in the past"},
		{"too far", "2026-05-02T12:00:00Z", time.Time{}, "more than the 1h0m0s a run waits"},
		{"not RFC 3339", "12:00", time.Time{}, `want an RFC 3339 instant such as 2026-05-01T12:00:00Z, got "12:00"`},
		{"empty (a variable that expanded to nothing)", "", time.Time{}, `got ""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f distFlags
			var err error
			if tc.name != "unset" {
				err = f.startAt.Set(tc.in)
			}
			at := time.Time{}
			if err == nil {
				at, err = f.start(now)
			}
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.True(t, tc.want.Equal(at), "%s", at)
		})
	}
}

func TestAttackStartAtAndShardIndex(t *testing.T) {
	_, stderr, code := rl(t, "attack", "--plan", "concurrent-burst", "--start-at", "2001-01-01T00:00:00Z", "--out", t.TempDir())
	require.Equal(t, ExitUsage, code)
	require.Contains(t, stderr, "--start-at: start instant 2001-01-01T00:00:00Z is")
	require.Contains(t, stderr, "in the past")
	_, stderr, code = rl(t, "attack", "--plan", "concurrent-burst", "--start-at", "", "--out", t.TempDir())
	require.Equal(t, ExitUsage, code)
	require.Contains(t, stderr, `invalid argument "" for "--start-at" flag: want an RFC 3339 instant`)

	// Shard 0-based 1 of 2 begins at the instant given.
	out := t.TempDir()
	at := time.Now().Add(1500 * time.Millisecond).UTC().Truncate(time.Millisecond)
	_, stderr, code = rl(t, "attack", "--plan", "concurrent-burst", "--shard-index", "1/2", "--start-at", at.Format(time.RFC3339Nano),
		"--out", out, "--fail-on", "none")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "rlverify: waiting until "+at.Format(time.RFC3339Nano))
	h, err := history.ReadFile(filepath.Join(out, "latest", "history.jsonl"))
	require.NoError(t, err)
	require.Equal(t, "2/2", h.Run.Shard)
	require.False(t, h.Run.Start.Before(at), "began %s before the instant", at.Sub(h.Run.Start))
	require.Len(t, h.Events, 50, "half of the burst's 100 requests")
}
