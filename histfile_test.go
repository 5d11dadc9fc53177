package rlverify

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 26, item 10: a history file never replaces an existing file
// unless asked, and two runs never write one file at once.
func TestCreateHistoryNeverClobbers(t *testing.T) {
	dir := t.TempDir()
	precious := filepath.Join(dir, "precious.jsonl")
	require.NoError(t, os.WriteFile(precious, []byte("an earlier run\n"), 0o644))

	var oe *OptionError
	err := checkHistoryFile(precious, false)
	require.True(t, errors.As(err, &oe), "%v", err)
	require.ErrorContains(t, err, "already exists")
	_, err = createHistory(precious, false)
	require.True(t, errors.As(err, &oe), "%v", err)
	b, _ := os.ReadFile(precious)
	require.Equal(t, "an earlier run\n", string(b), "untouched")
	require.ErrorContains(t, checkHistoryFile(dir, true), "not a regular file")

	// Replacing is allowed when asked, but not while another run holds it.
	f, err := createHistory(precious, true)
	require.NoError(t, err)
	_, err = createHistory(precious, true)
	require.True(t, errors.As(err, &oe), "%v", err)
	require.ErrorContains(t, err, "is being written by another run")
	require.NoError(t, f.Close())
	f, err = createHistory(precious, true)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	b, _ = os.ReadFile(precious)
	require.Empty(t, b, "replaced")

	fresh := filepath.Join(dir, "new.jsonl")
	f, err = createHistory(fresh, false)
	require.NoError(t, err)
	_, err = createHistory(fresh, false)
	require.ErrorContains(t, err, "already exists", "a second run given the same new file")
	require.NoError(t, f.Close())
}

// A device or a named pipe is a stream, not a file to overwrite: a history
// may go to /dev/stdout or to a FIFO a reader waits on, without --force.
func TestHistoryToAStream(t *testing.T) {
	require.NoError(t, checkHistoryFile(os.DevNull, false))
	f, err := createHistory(os.DevNull, false)
	require.NoError(t, err)
	_, err = f.WriteString("{}\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
}
