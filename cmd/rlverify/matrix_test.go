package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rlverify/rlverify/internal/matrix"
)

// TestPublishedMatrixStableCells reruns every plan of the published matrix
// (README.md, docs/compare.md) over every implementation and requires each
// cell the matrix does not mark unstable to keep its published verdict: a
// fail must fail again (or be explained by another check's defect) and a
// pass must not fail (it may come out unknown,
// when a loaded machine widens the intervals so far that oversell can
// neither prove nor clear a key). A cell that differs gets one more run of
// its plan before it fails: the matrix was made on a shared 2-core machine.
// After a real change: bash scripts/compare-matrix.sh. Takes 5–8 minutes.
func TestPublishedMatrixStableCells(t *testing.T) {
	needGateway(t, "nginx", "haproxy")
	d, err := matrix.Load(filepath.Join("..", "..", "docs", "compare", "matrix.json"))
	if err != nil {
		t.Fatal(err)
	}
	stable := d.Stable()
	for _, p := range matrix.Plans {
		t.Run(p.Name, func(t *testing.T) {
			differ := func() map[[3]string]string {
				dir := t.TempDir()
				_, stderr, code := rl(t, append(matrix.Args(p.Name), "--out", dir, "--format", "json", "--fail-on", "none")...)
				if code != ExitPass {
					t.Fatalf("compare %s: exit %d: %s", p.Name, code, stderr)
				}
				cmp := readComparison(t, dir, len(matrix.Implementations))
				got := matrix.FromComparison(&cmp)
				out := map[[3]string]string{}
				for _, c := range got.Columns {
					for check, v := range c.Checks {
						k := [3]string{p.Name, c.Name, check}
						if want, ok := stable[k]; ok && !sameVerdict(want, v) {
							out[k] = v
						}
					}
				}
				return out
			}
			first := differ()
			if len(first) == 0 {
				return
			}
			again := differ()
			for _, k := range matrix.SortedKeys(first) {
				if v, ok := again[k]; ok {
					assert.Failf(t, "matrix cell changed", "%s · %s · %s: published %s, got %s then %s", k[0], k[1], k[2], stable[k], first[k], v)
				}
			}
		})
	}
}

// sameVerdict: a fail stays a fail (or explained: a violation whose cause
// is another check's defect), skip stays skip, pass may become unknown.
func sameVerdict(published, got string) bool {
	class := func(v string) string {
		switch v {
		case "unknown":
			return "pass"
		case "explained":
			return "fail"
		}
		return v
	}
	return class(published) == class(got)
}
