package calibrate

import (
	"bytes"
	"testing"

	"github.com/rlverify/rlverify/internal/bench"
	"github.com/rlverify/rlverify/policy"
)

const benchPolicy = bench.CalibratePolicyYAML

// benchLog is 10^6 lines of bench.AccessLog (10^4 keys, 50 lines a
// second, with the scraper), about 166 MB.
func benchLog(b *testing.B) []byte {
	b.Helper()
	var buf bytes.Buffer
	if err := bench.AccessLog(&buf, bench.AccessLogOptions{Lines: 1_000_000, Keys: 10_000, PerSecond: 50, Seed: 1, Scraper: true}); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// BenchmarkReadCombined: parsing alone, per 10^6 lines.
func BenchmarkReadCombined(b *testing.B) {
	data := benchLog(b)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Read([]Input{{Name: "bench", R: bytes.NewReader(data)}}, ReadOptions{Format: Combined, KeyField: "extra1"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCalibrate: the replays and searches of 10^6 requests, read
// once beforehand.
func BenchmarkCalibrate(b *testing.B) {
	data := benchLog(b)
	t, err := Read([]Input{{Name: "bench", R: bytes.NewReader(data)}}, ReadOptions{Format: Combined, KeyField: "extra1"})
	if err != nil {
		b.Fatal(err)
	}
	p, err := policy.Parse("bench.yaml", []byte(benchPolicy))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Calibrate(t, Options{Policy: p, AbusiveKeys: []string{"free-scraper"}}); err != nil {
			b.Fatal(err)
		}
	}
}
