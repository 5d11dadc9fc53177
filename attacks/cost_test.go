package attacks

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

func TestCostExpressions(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want costExpr
		text string
		err  bool
	}{
		{in: "0", want: costExpr{}, text: "0"},
		{in: "7", want: costExpr{delta: 7}, text: "7"},
		{in: "K", want: costExpr{k: true}, text: "K"},
		{in: "K+1", want: costExpr{k: true, delta: 1}, text: "K+1"},
		{in: " K - 2 ", want: costExpr{k: true, delta: -2}, text: "K-2"},
		{in: "K2", err: true},
		{in: "k", err: true},
		{in: "-1", err: true},
		{in: "65535", err: true},
		{in: "1.5", err: true},
	} {
		got, err := parseCostExpr(tc.in)
		if tc.err {
			require.Error(t, err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
		require.Equal(t, tc.text, got.String())
	}
}

func TestCostPartsFollowThePolicy(t *testing.T) {
	r := &req{cost: history.CostOf(3)}
	h, q, ok := costParts(&policy.Cost{In: policy.CostInHeader, Name: "X-Units"}, r)
	require.True(t, ok)
	require.Equal(t, [2]string{"X-Units", "3"}, h)
	require.Empty(t, q)
	_, q, ok = costParts(&policy.Cost{In: policy.CostInQuery, Name: "units"}, &req{cost: history.CostPeek})
	require.True(t, ok)
	require.Equal(t, "units=0", q)
	_, _, ok = costParts(&policy.Cost{Name: "X-Units"}, &req{})
	require.False(t, ok, "an unweighted request sends no cost")
	_, _, ok = costParts(nil, r)
	require.False(t, ok, "no cost section: nothing sent")

	c := &costCycle{costs: []int64{0, 2, 5}}
	var got []int64
	for range 7 {
		got = append(got, c.take().Tokens())
	}
	require.Equal(t, []int64{0, 2, 5, 0, 2, 5, 0}, got)
}
