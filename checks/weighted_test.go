package checks

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWeightedFixturesBlameOneCheck runs every check on the weighted and
// one-off fixtures: the fixture's own check fails (or passes) and no other
// check fails beside it — a limiter that breaks one invariant is not
// blamed for another.
func TestWeightedFixturesBlameOneCheck(t *testing.T) {
	for _, tc := range []struct {
		file string
		fail []string
	}{
		{"oversell-bad-weighted", []string{"oversell"}},
		{"oversell-ok-weighted", nil},
		{"under-admission-bad-weighted", []string{"under-admission"}},
		{"under-admission-bad-peek", []string{"under-admission"}},
		{"under-admission-ok-weighted", nil},
		{"token-bounds-bad-weighted", []string{"token-bounds"}},
		{"token-bounds-ok-weighted", nil},
		{"oversell-bad-rate-zero", []string{"oversell"}},
		{"under-admission-ok-rate-zero", nil},
		{"under-admission-bad-refund", []string{"under-admission"}},
		{"under-admission-ok-refund", nil},
	} {
		t.Run(tc.file, func(t *testing.T) {
			h, p, _, _ := loadFixture(t, filepath.Join("testdata", tc.file+".jsonl"))
			var failed []string
			for _, r := range Run(h, p, Options{}) {
				if r.Verdict == Fail && !slices.Contains(p.ChecksOff, r.Name) {
					failed = append(failed, r.Name)
				}
			}
			slices.Sort(failed)
			if !slices.Equal(tc.fail, failed) {
				for _, r := range Run(h, p, Options{}) {
					if r.Verdict == Fail {
						t.Logf("%s: %s %v", r.Name, r.Summary, r.Evidence)
					}
				}
			}
			require.Equal(t, tc.fail, failed)
		})
	}
}
