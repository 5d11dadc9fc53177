package importers

import (
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// endless repeats line forever, as /dev/zero or a runaway pipe would.
type endless struct{ line []byte }

func (e endless) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		n += copy(p[n:], e.line)
	}
	return n, nil
}

// Issue 26, item 12: an import streams its input with caps. An endless
// input of valid lines ends at the byte cap, gzip is decompressed as a
// stream under the same cap, and a line without an end at the line cap;
// none of it is held in memory (see docs/reliability.md for the RSS).
func TestImportInputIsCapped(t *testing.T) {
	k6Line := `{"type":"Point","metric":"vus","data":{"time":"2025-03-04T09:20:00.1Z","value":1,"tags":{}}}` + "\n"
	in, empty, err := openInput("endless.json", endless{[]byte(k6Line)}, 1<<20)
	require.NoError(t, err)
	require.False(t, empty)
	err = in.eachLine(func(int, []byte) error { return nil })
	require.ErrorContains(t, err, "endless.json: more than 1048576 bytes: not a results file")

	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(bytes.Repeat([]byte(k6Line), 40000)) // 3.8 MB from ~20 KB
	require.NoError(t, zw.Close())
	in, _, err = openInput("bomb.json.gz", &gz, 1<<20)
	require.NoError(t, err)
	err = in.eachLine(func(int, []byte) error { return nil })
	require.ErrorContains(t, err, "bomb.json.gz: more than 1048576 bytes after decompression")

	in, _, err = openInput("zero", endless{[]byte{0}}, MaxInputBytes)
	require.NoError(t, err)
	require.ErrorContains(t, in.eachLine(func(int, []byte) error { return nil }), "zero:1: a line longer than 1048576 bytes")

	// Through Import, each format stops on /dev/zero's bytes at once.
	for _, f := range Formats() {
		_, err := Import(f, io.LimitReader(endless{[]byte{0}}, 64<<20), history.NewWriter(io.Discard), Options{Policy: policy.Default(), Key: "free-a", Name: "zero"})
		var ie *InputError
		require.ErrorAs(t, err, &ie, f)
	}
	// Blank lines before the first record keep the line numbers right.
	_, err = Import(K6, strings.NewReader("\n\n"+k6Line+"{\n"), history.NewWriter(io.Discard), Options{Policy: policy.Default(), Key: "free-a", Name: "in.txt"})
	require.ErrorContains(t, err, "in.txt:4: not k6 JSON output")
}
