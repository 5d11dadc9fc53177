package discover

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/rlverify/rlverify/policy"
)

// TestReadCurve: the recovery curves of limiters whose refusals cost (N=5,
// W or K/r = 2s), as their samples would be, name their family with every
// true number in range, or are left open with the reason.
func TestReadCurve(t *testing.T) {
	ms := func(x int) time.Duration { return time.Duration(x) * time.Millisecond }
	ladder := func(gots ...int) []sample {
		var out []sample
		for i, g := range gots {
			out = append(out, sample{d: ms(840 * (i + 1)), u: ms(5), got: g})
		}
		return out
	}
	mid := time.Unix(1_000_000, 750_000_000) // away from every half-second edge
	edge := time.Unix(1_000_000, 20_000_000) // just after a whole second
	tests := []struct {
		name   string
		ss     []sample
		spent  time.Time
		family policy.Algorithm
		anchor string
		// w is the true W (or K/r) the range must hold; open, when the
		// family is left open, a word of the reason.
		w    float64
		open string
	}{
		{"bucket refilling at 2.5/s", []sample{{ms(500), ms(5), 1}, {ms(1000), ms(5), 2}, {ms(1500), ms(5), 3}, {ms(2000), ms(5), 5}, {ms(2500), ms(5), 5}}, mid, policy.TokenBucket, "", 2, ""},
		{"counter anchored at the first request", ladder(0, 0, 2, 4, 5, 5), mid, policy.SlidingCounter, policy.AnchorFirst, 2, ""},
		{"counter spent just after a round edge", ladder(0, 0, 2, 4, 5, 5), edge, policy.SlidingCounter, "", 2, ""},
		{"window: nothing, then all", ladder(0, 0, 5, 5), mid, policy.FixedWindow, "", 2, ""},
		{"too coarse: whole at once from the first sample", ladder(5, 5, 5), mid, "", "", 0, "too coarse"},
		{"never whole", ladder(0, 1, 2), mid, "", "", 0, "never the whole quota"},
		{"fits nothing", ladder(3, 0, 5, 1, 5), mid, "", "", 0, "fits neither"},
		{"too few samples", ladder(0, 5), mid, "", "", 0, "too few samples"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tier := Tier{Capacity: Number{Value: 5, Low: 5, High: 5, Pinned: true}}
			fam, ev, ok := readCurve(&tier, 5, tt.ss, []time.Time{tt.spent})
			if tt.open != "" {
				assert.False(t, ok, ev)
				assert.Contains(t, ev, tt.open)
				return
			}
			assert.True(t, ok, ev)
			assert.Equal(t, tt.family, fam, ev)
			assert.Equal(t, tt.anchor, tier.Anchor, tier.AnchorEvidence)
			assert.True(t, tier.Window.Pinned && tier.Window.Low <= tt.w && tt.w <= tier.Window.High, "W %s holds %g", tier.Window.Range(), tt.w)
		})
	}
}
