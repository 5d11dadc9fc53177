package attacks

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
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

// A tenants phase's costs cycle per tenant, K resolved against each
// tenant's own tier; a rate phase sends its costs too, in the declared
// header.
func TestRateAndTenantsPhasesSendTheirCosts(t *testing.T) {
	var mu sync.Mutex
	sentUnits := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sentUnits[r.Header.Get("X-Units")]++
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	pol := policy.Default()
	pol.Cost = &policy.Cost{Name: "X-Units", Max: 1000}
	h, _, err := runPlan(t, context.Background(), `name: w
phases:
  - kind: tenants
    rate: 100/s
    requests: 40
    tenants:
      - {key: free-a, weight: 1}
      - {key: paid-a, weight: 1}
    costs: ["1", K]
  - kind: rate
    key: free-b
    rate: 100/s
    requests: 6
    costs: ["2", "3"]
`, Options{Instances: []string{srv.URL}, Policy: pol})
	require.NoError(t, err)
	require.Len(t, h.Events, 46)
	k := map[string]int64{}
	for _, t := range pol.Tiers {
		k[t.Name] = t.Limits[0].Count
		for _, l := range t.Limits[1:] {
			k[t.Name] = min(k[t.Name], l.Count)
		}
	}
	got := map[string][]int64{}
	recorded := map[string]int{}
	for _, e := range h.Events {
		got[e.Key] = append(got[e.Key], e.Cost.Tokens())
		recorded[strconv.FormatInt(e.Cost.Tokens(), 10)]++
	}
	require.Equal(t, recorded, sentUnits, "each request sends the cost its event records")
	for key, costs := range got {
		tier := strings.SplitN(key, "-", 2)[0]
		want := []int64{1, k[tier]}
		if strings.HasSuffix(key, "-b") {
			want = []int64{2, 3}
		}
		require.ElementsMatch(t, want, slices.Compact(slices.Sorted(slices.Values(costs))), "key %s", key)
	}
	require.Len(t, got, 3)
}
