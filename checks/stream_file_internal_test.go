package checks

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// fileStreamer is a Streamer of o over file's records (its event count
// set), and pass, which hands it file's events in the stream's order (to
// Add, then to AddAgain when it asks).
func fileStreamer(t *testing.T, file string, pol *policy.Policy, o Options) (*Streamer, func(add func(*history.Event, uint64))) {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	rec, n, err := history.ReadRecords(file, f)
	require.NoError(t, err)
	s, err := NewStreamer(rec, pol, o)
	require.NoError(t, err)
	s.SetEvents(n)
	return s, func(add func(*history.Event, uint64)) {
		_, err := f.Seek(0, 0)
		require.NoError(t, err)
		st := history.NewStream(file, f, history.StreamOptions{})
		for st.Next() {
			add(st.Event(), st.Seq())
		}
		require.NoError(t, st.Err())
	}
}
