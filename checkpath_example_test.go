package rlverify_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/policy"
)

// Check streams a history file when every check it judges streams, and
// judges it in memory otherwise; ChoosePath says which, and why, before.
func ExampleChoosePath() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "h.jsonl")
	err = os.WriteFile(file, []byte(`{"t":"run","version":1,"id":"r","start":"2026-01-01T00:00:00Z"}
{"t":"e","id":1,"key":"free-a","inst":0,"phase":"p","intended":0,"sent":0,"recv":1000,"status":200}
{"t":"e","id":2,"key":"free-a","inst":0,"phase":"p","intended":0,"sent":0,"recv":2000,"status":200}
{"t":"e","id":3,"key":"free-a","inst":0,"phase":"p","intended":0,"sent":0,"recv":3000,"status":200}
{"t":"end","elapsed":3000,"requests":3}
`), 0o644)
	if err != nil {
		fmt.Println(err)
		return
	}
	pol, err := policy.Parse("p.yaml", []byte(`name: p
version: v1
tiers:
  - name: free
    key_prefix: "free-"
    limits:
      - {algorithm: token-bucket, capacity: 2, rate: 1/s}
default_tier: free
delay:
  max_wait: 600ms
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, only := range [][]string{{"oversell"}, {"oversell", "delay"}} {
		o := rlverify.CheckOptions{Histories: []string{file}, Policy: pol, Checks: checks.Options{Only: only}}
		out, err := rlverify.Check(context.Background(), o)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s (%s): %s\n", out.Path, out.PathWhy, out.Document.Verdict)
	}
	// Output:
	// streaming (every check judged streams: oversell): fail
	// in-memory (delay does not stream (streaming: oversell, under-admission, token-bounds, retry-after, headers, isolation, fail-mode, downstream, bypass, calibration, regions, delay); delay streams only when the policy declares no delay (this one does)): fail
}
