package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCostSection(t *testing.T) {
	base := "name: p\ntiers:\n  - name: free\n    limits: [{capacity: 10, rate: 5/s}]\n"
	for _, tc := range []struct {
		name, yaml string
		in, hdr    string
		min, max   int64
		def        int64
		peeks      bool
		err        string
	}{
		{name: "defaults", yaml: "cost: {}\n", in: "header", hdr: "X-Cost", min: 1, max: MaxCost, def: 1},
		{name: "peeks", yaml: "cost:\n  name: X-Weight\n  min: 0\n  max: 20\n", in: "header", hdr: "X-Weight", min: 0, max: 20, def: 1, peeks: true},
		{name: "query", yaml: "cost:\n  in: query\n", in: "query", hdr: "cost", min: 1, max: MaxCost, def: 1},
		{name: "bad in", yaml: "cost:\n  in: body\n", err: "p.yaml:6: cost.in: \"body\": want header or query"},
		{name: "bad header", yaml: "cost:\n  name: \"X Cost\"\n", err: "cost.name: \"X Cost\" is not a header name"},
		{name: "max below min", yaml: "cost:\n  min: 3\n  max: 2\n  default: 3\n", err: "cost.max: 2: want 3 … 65534"},
		{name: "too big", yaml: "cost:\n  max: 70000\n", err: "cost.max: 70000"},
		{name: "negative min", yaml: "cost:\n  min: -1\n", err: "cost.min: -1: want 0 … 65534"},
		{name: "default outside", yaml: "cost:\n  max: 5\n  default: 6\n", err: "cost.default: 6: outside the declared costs 1 … 5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse("p.yaml", []byte(base+tc.yaml))
			if tc.err != "" {
				require.Error(t, err)
				require.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			require.True(t, p.Weighted())
			c := p.Cost
			require.Equal(t, tc.in, c.In)
			require.Equal(t, tc.hdr, c.Name)
			require.Equal(t, tc.min, c.MinCost())
			require.Equal(t, tc.max, c.Max)
			require.Equal(t, tc.def, c.Default)
			require.Equal(t, tc.peeks, c.Peeks())
			require.True(t, c.Allows(tc.max))
			require.False(t, c.Allows(tc.max+1))
			q := p.Clone()
			*q.Cost.Min = 7
			require.Equal(t, tc.min, p.Cost.MinCost(), "Clone copies the cost section")
		})
	}
	require.False(t, Default().Weighted())
	var none *Cost
	require.True(t, none.Allows(1))
	require.False(t, none.Allows(2))
}

func TestZeroRateIsAOneOffQuota(t *testing.T) {
	p, err := Parse("p.yaml", []byte("name: p\ntiers:\n  - name: trial\n    limits:\n      - capacity: 5\n        rate: 0\n"))
	require.NoError(t, err)
	l := p.Tiers[0].Limits[0]
	require.True(t, l.NeverRefills())
	require.Equal(t, FixedWindow, l.Algorithm)
	require.Equal(t, AnchorFirst, l.Anchor)
	require.Equal(t, int64(5), l.Count)
	require.Equal(t, int64(5), l.Capacity)
	require.Equal(t, MaxWindow, l.W())
	require.Equal(t, "5-once", l.Name)
	require.True(t, strings.HasPrefix(l.Describe(), "one-off quota N=5, never refilled"), l.Describe())
	require.Less(t, l.Envelope(time.Hour), 11.0, "no refill within any run: at most two windows' worth even for the loosest figure")

	// The spelled-out equivalent is the same promise.
	q, err := Parse("q.yaml", []byte("name: q\ntiers:\n  - name: trial\n    limits:\n      - algorithm: fixed-window\n        limit: 5\n        window: 400d\n        anchor: first\n"))
	require.NoError(t, err)
	require.True(t, q.Tiers[0].Limits[0].NeverRefills())
	require.False(t, Default().Tiers[0].Limits[0].NeverRefills())

	// A policy built in code says rate 0 the same way; read back it stays one.
	c := &Policy{Name: "c", Tiers: []Tier{{Name: "t", Limits: []Limit{{Capacity: 3}}}}}
	require.NoError(t, c.Validate())
	require.True(t, c.Tiers[0].Limits[0].NeverRefills())
	require.NoError(t, c.Validate(), "normalizing twice keeps it")
	require.True(t, c.Tiers[0].Limits[0].NeverRefills())
}

func TestRefundOn(t *testing.T) {
	base := "name: p\ntiers:\n  - name: free\n    limits: [{capacity: 10, rate: 5/s}]\n"
	p, err := Parse("p.yaml", []byte(base+"refund_on: [502, 504]\n"))
	require.NoError(t, err)
	require.True(t, p.RefundOn.Has(502))
	require.False(t, p.RefundOn.Has(503))
	q := p.Clone()
	q.RefundOn[0] = StatusRange{Lo: 500, Hi: 500}
	require.True(t, p.RefundOn.Has(502), "Clone copies refund_on")
	_, err = Parse("p.yaml", []byte(base+"refund_on: [429]\n"))
	require.Error(t, err)
	require.Contains(t, err.Error(), "refund_on: 429: a refunded answer is neither an admission (2xx) nor a refusal (429)")
}
