package rlverify

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLatestIsAFileWhereSymlinksFail(t *testing.T) {
	symlink = func(string, string) error { return errors.New("no symlinks here") }
	defer func() { symlink = os.Symlink }()
	dir := t.TempDir()
	a, err := RunFolder(dir, "aaa", false, false)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "aaa"), a)
	b, err := os.ReadFile(filepath.Join(dir, LatestName))
	require.NoError(t, err)
	require.Equal(t, "aaa\n", string(b))
	_, err = RunFolder(dir, "bbb", false, false)
	require.NoError(t, err)
	require.Equal(t, "bbb", latestTarget(t, dir))
}

// latestTarget is the folder DIR/latest names (symlink or file).
func latestTarget(t *testing.T, dir string) string {
	t.Helper()
	l := filepath.Join(dir, LatestName)
	if target, err := os.Readlink(l); err == nil {
		return target
	}
	b, err := os.ReadFile(l)
	require.NoError(t, err)
	return string(b[:len(b)-1])
}
