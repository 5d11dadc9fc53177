package checks

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The counts-all and anchor-first fixtures pass only because the policy
// says so: judged as a counter of admitted requests in epoch-aligned
// windows, the same refusals (and the same refused probe) are wrong.
func TestCountsAllAndAnchorFirstMatter(t *testing.T) {
	for _, tc := range []struct {
		file, check   string
		counts, anchr string
	}{
		{"under-admission-ok-counts-all.jsonl", "under-admission", "admitted", "first"},
		{"under-admission-ok-anchor-first.jsonl", "under-admission", "all", "epoch"},
		{"retry-after-ok-counts-all.jsonl", "retry-after", "admitted", "first"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			h, p, _, _ := loadFixture(t, filepath.Join("testdata", tc.file))
			rs := Run(h, p, Options{Only: []string{tc.check}})
			require.Equal(t, Pass, rs[0].Verdict, rs[0].Summary)
			l := &p.Tiers[0].Limits[0]
			l.Counts, l.Anchor = tc.counts, tc.anchr
			rs = Run(h, p, Options{Only: []string{tc.check}})
			assert.Equal(t, Fail, rs[0].Verdict, rs[0].Summary)
		})
	}
}
