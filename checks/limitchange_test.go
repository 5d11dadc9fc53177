package checks

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Histories of the reference token bucket under the limit-change plans
// (recorded, testdata/limitchange): after a lowering and after a raise,
// the changed tier's headers are judged while the change is in force and
// its refusals, advice and remaining counts from each key's refill from
// empty under the changed limits; what stays unjudged says so. The faulty
// ones are diagnosis fixtures (testdata/diagnosis/limit-*.jsonl).
func TestChangedTierJudgedAfterTheChange(t *testing.T) {
	for _, c := range []struct {
		file string
		// texts each check's summary must hold.
		texts map[string][]string
	}{
		{"testdata/limitchange/limit-change-honest.jsonl", map[string][]string{
			"headers": {"after the limit change halve (tier free: token-bucket K=5 r=2/s (≡ 5 per 2.5s)) made at", "valid and consistent"},
			// The plan's keys never rest 2.5s after the lowering.
			"under-admission": {"not judged (no key of the tier had refilled from empty under the changed limits after it was in force)"},
			"token-bounds":    {"not judged"},
		}},
		{"testdata/limitchange/limit-raise-honest.jsonl", map[string][]string{
			"oversell":        {"judged against the limit change double"},
			"headers":         {"after the limit change double"},
			"under-admission": {"each key from its first request after a refill from empty under them", "could be shown wrong", "are not judged (what a key held at the change is not known exactly)"},
			"token-bounds":    {"after the limit change double", "within bounds"},
			"retry-after":     {"after the limit change double"},
		}},
	} {
		t.Run(c.file, func(t *testing.T) {
			h, p, _, _ := loadFixture(t, c.file)
			rs := Judge(h, p, Options{})
			for _, r := range rs {
				require.Contains(t, []Verdict{Pass, Skip}, r.Verdict, "%s: %s", r.Name, r.Summary)
			}
			for name, texts := range c.texts {
				r := resultOf(t, rs, name)
				assert.Equal(t, Pass, r.Verdict, r.Summary)
				for _, s := range texts {
					assert.Contains(t, r.Summary, s, name)
				}
			}
		})
	}
}

// A limiter deaf to a raise refuses wrongfully once a key has refilled
// under the raised limit: the evidence names the change and the old limit
// it still decides by, not another cause (the refusals-cost attribution
// would fit the same counts).
func TestRaiseIgnoredNamedAfterTheChange(t *testing.T) {
	h, p, _, _ := loadFixture(t, "testdata/diagnosis/limit-raise-keeps-old.jsonl")
	under := resultOf(t, Judge(h, p, Options{}), "under-admission")
	require.Equal(t, Fail, under.Verdict, under.Summary)
	require.NotEmpty(t, under.Evidence)
	for _, e := range under.Evidence {
		assert.Contains(t, e.Message, "the tier's limits before the change (token-bucket K=10 r=5/s")
		assert.Contains(t, e.Message, "after the limit change double (tier free: token-bucket K=20 r=10/s")
		assert.NotContains(t, e.Message, "refusals cost tokens")
		assert.NotEqual(t, CauseSelfInflicted, e.Cause)
	}
}
