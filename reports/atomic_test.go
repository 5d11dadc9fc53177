package reports

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 26, item 11: a report is written whole or not at all.
func TestHardeningReportsAreWrittenAtomically(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "report.json")
	require.NoError(t, os.WriteFile(file, []byte("the earlier report"), 0o644))
	err := WriteFile(file, func(w io.Writer) error {
		_, _ = io.WriteString(w, strings.Repeat("x", 100<<10)) // past the buffer: on disk already
		return errors.New("disk full")
	})
	require.ErrorContains(t, err, "disk full")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file left behind")
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, "the earlier report", string(b), "the earlier file stays whole")

	require.NoError(t, WriteFile(file, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }))
	st, err := os.Stat(file)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), st.Mode().Perm())
}
