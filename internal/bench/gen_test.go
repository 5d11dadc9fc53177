package bench

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/importers"
	"github.com/rlverify/rlverify/policy"
)

// TestGeneratedHistoryPasses: the synthetic correct bucket must pass every
// check, or the benchmark would time failure paths.
func TestGeneratedHistoryPasses(t *testing.T) {
	p, err := policy.Parse("bench", []byte(PolicyYAML))
	require.NoError(t, err)
	for _, keys := range []int{1, 100, 10_000} {
		h := Generate(20_000, keys)
		for _, r := range checks.Run(h, p, checks.Options{}) {
			require.NotEqual(t, checks.Fail, r.Verdict, "keys=%d %s: %s %+v", keys, r.Name, r.Summary, r.Evidence)
		}
	}
}

// TestImportInputImports: every import input converts to a history of all
// its requests, so the import rows time a successful import.
func TestImportInputImports(t *testing.T) {
	p, err := policy.Parse("bench", []byte(PolicyYAML))
	require.NoError(t, err)
	for _, f := range importers.Formats() {
		in, err := ImportInput(f, 1000)
		require.NoError(t, err, f)
		var out bytes.Buffer
		w := history.NewWriter(&out)
		sum, err := importers.Import(f, bytes.NewReader(in), w, importers.Options{Policy: p, Key: ImportKey, Name: f})
		require.NoError(t, err, f)
		require.NoError(t, w.Flush(), f)
		h, err := history.Read(f, &out)
		require.NoError(t, err, f)
		require.Len(t, h.Events, 1000, "%s: %+v", f, sum)
		// Imports redact keys by default (policy.RedactKey): the tier's
		// prefix stays readable.
		tier, ok := p.TierFor(ImportKey)
		require.True(t, ok, f)
		require.Equal(t, p.RedactKey(ImportKey, tier.Name), h.Events[0].Key, f)
	}
	_, err = ImportInput("curl", 1)
	require.Error(t, err)
}

// TestWriteGeneratedIsWriteHistory: the streamed generator writes byte for
// byte the file of the in-memory one.
func TestWriteGeneratedIsWriteHistory(t *testing.T) {
	dir := t.TempDir()
	for _, keys := range []int{1, 50} {
		a, b := dir+"/a.jsonl", dir+"/b.jsonl"
		require.NoError(t, WriteHistory(a, Generate(3000, keys)))
		require.NoError(t, WriteGenerated(b, 3000, keys))
		want, err := os.ReadFile(a)
		require.NoError(t, err)
		got, err := os.ReadFile(b)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
	}
}
