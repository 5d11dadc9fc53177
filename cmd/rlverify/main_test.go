package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite golden files")

// rl runs the CLI in process and returns stdout, stderr and the exit code.
func rl(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	err := Run(context.Background(), args, &out, &errb)
	code := 0
	if err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
			if ee.err != nil {
				errb.WriteString(ee.err.Error())
			}
		} else {
			code = -1
			errb.WriteString(err.Error())
		}
	}
	return out.String(), errb.String(), code
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	file := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(file, []byte(got), 0o644))
	}
	want, err := os.ReadFile(file)
	require.NoError(t, err, "run go test -update to create %s", file)
	require.Equal(t, string(want), got)
}

// The seeds' 20 request times and their table (IZIN = ALLOW, TOLAK = DENY).
var seedTimes = "0.0,0.1,0.2,0.3,0.4,0.5,0.6,0.8,1.0,1.2,2.0,2.1,2.5,3.0,3.1,3.2,3.3,3.4,3.5,3.6"

var seedTable = []struct{ bucket, log string }{
	{"IZIN", "IZIN"}, {"IZIN", "IZIN"}, {"IZIN", "IZIN"}, {"IZIN", "IZIN"}, {"IZIN", "IZIN"},
	{"IZIN", "TOLAK"}, {"TOLAK", "TOLAK"}, {"TOLAK", "TOLAK"}, {"IZIN", "IZIN"}, {"TOLAK", "IZIN"},
	{"IZIN", "IZIN"}, {"IZIN", "IZIN"}, {"IZIN", "IZIN"}, {"IZIN", "IZIN"}, {"TOLAK", "IZIN"},
	{"TOLAK", "IZIN"}, {"TOLAK", "IZIN"}, {"TOLAK", "TOLAK"}, {"IZIN", "IZIN"}, {"TOLAK", "TOLAK"},
}

func TestSimulateReproducesSeedsTable(t *testing.T) {
	out, stderr, code := rl(t, "simulate", "--at", seedTimes,
		"--limiter", "token-bucket:capacity=5,rate=2",
		"--limiter", "sliding-log:limit=5,window=1s")
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 21)
	word := map[string]string{"IZIN": "ALLOW", "TOLAK": "DENY"}
	for i, row := range seedTable {
		f := strings.Fields(lines[i+1])
		require.Len(t, f, 3, lines[i+1])
		require.Equal(t, word[row.bucket], f[1], "token bucket at t=%s", f[0])
		require.Equal(t, word[row.log], f[2], "sliding log at t=%s", f[0])
	}
	golden(t, "simulate-seeds.golden", out)
}

func TestSimulateBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no times", []string{"simulate", "--limiter", "token-bucket:capacity=5,rate=2"}, "--at needs"},
		{"garbage time", []string{"simulate", "--at", "0,x", "--limiter", "token-bucket:capacity=5,rate=2"}, `item 2 "x"`},
		{"backwards", []string{"simulate", "--at", "1,0.5", "--limiter", "token-bucket:capacity=5,rate=2"}, "goes back in time"},
		{"unknown limiter", []string{"simulate", "--at", "0", "--limiter", "nope:capacity=1,rate=1"}, "unknown limiter"},
		{"bad param", []string{"simulate", "--at", "0", "--limiter", "token-bucket:size=5"}, "unknown parameter"},
		{"missing rate", []string{"simulate", "--at", "0", "--limiter", "token-bucket:capacity=5"}, "rate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := rl(t, tc.args...)
			require.Equal(t, ExitUsage, code)
			require.Contains(t, stderr, tc.want)
		})
	}
}
