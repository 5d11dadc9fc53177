package history

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// digestHistory writes a small history with an end record through Writer.
func digestHistory(t *testing.T, end End) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf)
	require.NoError(t, w.WriteRun(Run{ID: "r1", Plan: "p", Declared: []byte(`{"name":"x","checks_off":[]}`)}))
	for i := 1; i <= 5; i++ {
		require.NoError(t, w.WriteEvent(&Event{ID: uint64(i), Key: "free-a", Sent: int64(i) * 1000, Recv: int64(i)*1000 + 500, Status: 200}))
	}
	require.NoError(t, w.WritePhase(Phase{Name: "burst", Kind: "burst", Start: 0, End: 6000, Requests: 5}))
	require.NoError(t, w.WriteEnd(end))
	require.NoError(t, w.Close())
	return buf.Bytes()
}

// Issue 26 item 9: a history edited after the run (events deleted, the
// declared policy or the end record changed, recv widened) read as
// genuine. The end record's digest now tells.
func TestDigestDetectsEdits(t *testing.T) {
	good := digestHistory(t, End{Elapsed: 7000, Requests: 5, Interrupted: true, Reason: "interrupted: signal"})
	require.Contains(t, string(good), `,"digest":"crc32c:`)
	lines := strings.SplitAfter(string(good), "\n")
	edit := func(f func([]string) []string) string {
		return strings.Join(f(append([]string(nil), lines...)), "")
	}
	for _, tc := range []struct {
		name string
		in   string
		want Integrity
	}{
		{"as written", string(good), Intact},
		{"trailing blank lines", string(good) + "\n \n", Intact},
		{"an event deleted", edit(func(l []string) []string { return append(l[:2], l[3:]...) }), Modified},
		{"checks_off added to the declared policy", strings.Replace(string(good), `"checks_off":[]`, `"checks_off":["oversell"]`, 1), Modified},
		{"recv widened", strings.Replace(string(good), `"recv":1500`, `"recv":9500`, 1), Modified},
		{"the end record says it was not interrupted", strings.Replace(string(good), `"interrupted":true,`, ``, 1), Modified},
		{"the digest itself edited", strings.Replace(string(good), `"digest":"crc32c:`, `"digest":"crc32c:0`, 1), Modified},
		{"a record appended after the end", string(good) + `{"t":"sink","key":"free-a","arrivals":1,"at":1}` + "\n", Modified},
		{"no digest (an older rlverify)", strings.Replace(string(good), string(good[bytes.Index(good, []byte(`,"digest"`)):bytes.LastIndexByte(good, '}')]), "", 1), NoDigest},
		{"no end record (a cut run)", edit(func(l []string) []string { return l[:len(l)-2] }), NoEnd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := Read("h.jsonl", strings.NewReader(tc.in))
			require.NoError(t, err)
			require.Equal(t, tc.want, h.Integrity)
			file := filepath.Join(t.TempDir(), "h.jsonl")
			require.NoError(t, os.WriteFile(file, []byte(tc.in), 0o644))
			for _, cs := range []int{1, 7, 64, 4096} {
				f, err := os.Open(file)
				require.NoError(t, err)
				hf, err := readSeeker(file, f, int64(len(tc.in)), cs, 3)
				f.Close()
				require.NoError(t, err)
				require.Equal(t, tc.want, hf.Integrity, "chunk size %d", cs)
			}
		})
	}
}

// Issue 26 item 9: one shard checked alone says which are missing; a
// merge is as trustworthy as its least trustworthy shard.
func TestMissingShardsAndMergedIntegrity(t *testing.T) {
	shard := func(s string, in Integrity) *History {
		return &History{Run: Run{ID: "r", Plan: "p", Shard: s}, Integrity: in, End: &End{}}
	}
	one, err := Merge(shard("1/3", Intact))
	require.NoError(t, err)
	require.Equal(t, []string{"2/3", "3/3"}, one.MissingShards)
	two, err := Merge(shard("1/3", Intact), shard("3/3", Modified))
	require.NoError(t, err)
	require.Equal(t, []string{"2/3"}, two.MissingShards)
	require.Equal(t, Modified, two.Integrity)
	all, err := Merge(shard("1/2", Intact), shard("2/2", NoDigest))
	require.NoError(t, err)
	require.Empty(t, all.MissingShards)
	require.Equal(t, NoDigest, all.Integrity)
	solo, err := Merge(&History{Run: Run{ID: "r"}})
	require.NoError(t, err)
	require.Empty(t, solo.MissingShards, "a run that was not split misses nothing")
}

// BenchmarkDigestLines is the digest's share of reading the history of
// BenchmarkReadFile: the same 100,000 event lines through digester.lines.
func BenchmarkDigestLines(b *testing.B) {
	data := benchLines(100_000)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d := newDigester()
		d.lines(data)
	}
	b.ReportMetric(100_000*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
