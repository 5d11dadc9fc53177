package bench

import (
	"bytes"
	"compress/gzip"
	"flag"
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the example access log")

// ExampleLog is how examples/calibrate/access.log.gz was made: an hour of
// a shop's API at nginx's one-second resolution, with a scraper.
var ExampleLog = AccessLogOptions{Lines: 6000, Keys: 60, PerSecond: 2, Seed: 1, Scraper: true}

// TestExampleAccessLogIsGenerated: the README's example log is this
// generator's output (go test -update rewrites it).
func TestExampleAccessLogIsGenerated(t *testing.T) {
	var want bytes.Buffer
	require.NoError(t, AccessLog(&want, ExampleLog))
	const file = "../../examples/calibrate/access.log.gz"
	if *update {
		var gz bytes.Buffer
		zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
		require.NoError(t, err)
		_, err = zw.Write(want.Bytes())
		require.NoError(t, err)
		require.NoError(t, zw.Close())
		require.NoError(t, os.WriteFile(file, gz.Bytes(), 0o644))
	}
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	got, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.Equal(t, want.String(), string(got))
}
