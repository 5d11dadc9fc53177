package limitread

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, n int) string {
		file := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(file, []byte(strings.Repeat("x", n)), 0o644))
		return file
	}
	for _, tc := range []struct {
		name string
		file string
		want string // error; "" for none
	}{
		{"empty", write("empty", 0), ""},
		{"at the limit", write("at", 100), ""},
		{"one byte over", write("over", 101), "over is 101 bytes, more than the 100 allowed"},
		{"a device that never ends", "/dev/zero", "/dev/zero holds more than the 100 bytes allowed"},
		{"missing", filepath.Join(dir, "nope"), "no such file or directory"},
		{"a directory", dir, "is a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := File(tc.file, 100)
			if tc.want == "" {
				require.NoError(t, err)
				info, serr := os.Stat(tc.file)
				require.NoError(t, serr)
				require.Len(t, data, int(info.Size()))
				return
			}
			require.ErrorContains(t, err, tc.want)
			require.Nil(t, data)
			var tl *TooLargeError
			if strings.Contains(tc.want, "allowed") {
				require.True(t, errors.As(err, &tl))
				require.Equal(t, int64(100), tl.Limit)
			}
		})
	}
}
