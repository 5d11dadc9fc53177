package rlverify_test

import (
	"context"
	"io"
	"path/filepath"
	"testing"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/internal/bench"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/reports"
)

// BenchmarkCheckFile is `rlverify check --history FILE --format json`
// without the process: read a 10^6-event history from disk, judge it, build
// the result document and render it. scripts/bench.sh times the command
// itself.
func BenchmarkCheckFile(b *testing.B) {
	const n = 1_000_000
	file := filepath.Join(b.TempDir(), "history.jsonl")
	if err := bench.WriteHistory(file, bench.Generate(n, 10_000)); err != nil {
		b.Fatal(err)
	}
	pol, err := policy.Parse("bench-policy.yaml", []byte(bench.PolicyYAML))
	if err != nil {
		b.Fatal(err)
	}
	json, err := reports.Lookup("json")
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out, err := rlverify.Check(context.Background(), rlverify.CheckOptions{Histories: []string{file}, Policy: pol})
		if err != nil {
			b.Fatal(err)
		}
		if err := json.Render(io.Discard, out.Document); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(n*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkBuild is the result document of a judged 10^6-event history
// (reports.Build), the part of `rlverify check` after the checks.
func BenchmarkBuild(b *testing.B) {
	h := bench.Generate(1_000_000, 10_000)
	pol, err := policy.Parse("bench-policy.yaml", []byte(bench.PolicyYAML))
	if err != nil {
		b.Fatal(err)
	}
	rs := checks.Judge(h, pol, checks.Options{})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		reports.Build(h, pol, rs)
	}
	b.ReportMetric(float64(len(h.Events))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
