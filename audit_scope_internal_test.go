package rlverify

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/policy"
)

// TestFirstEdgeApplies: the first-edge plan runs for a window anchored at a
// key's first request whose close a run can reach, not for epoch-aligned
// windows or buckets, nor for a one-off quota spelt as a window of days.
func TestFirstEdgeApplies(t *testing.T) {
	for _, tc := range []struct {
		name, limit, want string
	}{
		{"first-anchored 2s", "algorithm: fixed-window\n        limit: 10\n        window: 2s\n        anchor: first", ""},
		{"epoch-aligned 2s", "algorithm: fixed-window\n        limit: 10\n        window: 2s", "no window is anchored at a key's first request (anchor: first)"},
		{"bucket", "algorithm: token-bucket\n        capacity: 10\n        rate: 5/s", "no window is anchored at a key's first request (anchor: first)"},
		{"one-off quota", "algorithm: fixed-window\n        limit: 10\n        window: 9600h\n        anchor: first", "every window anchored at a key's first request is longer than 5m0s (9600h0m0s): its close is beyond a run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := policy.Parse("p.yaml", []byte("name: p\ntiers:\n  - name: free\n    limits:\n      - "+tc.limit+"\ndefault_tier: free\n"))
			require.NoError(t, err)
			require.Equal(t, tc.want, firstAnchored(&auditScope{pol: p}))
		})
	}
}

// TestWeightedAndOneOffPlansApply: the weighted plan runs only for a policy
// that declares a cost (not for a rate-limit service); the plans that wait
// for a refill or a window edge are skipped, with the one-off limit named,
// when a limit never refills (rate: 0).
func TestWeightedAndOneOffPlansApply(t *testing.T) {
	parse := func(limit, extra string) *policy.Policy {
		p, err := policy.Parse("p.yaml", []byte("name: p\ntiers:\n  - name: free\n    limits:\n      - "+limit+"\ndefault_tier: free\n"+extra))
		require.NoError(t, err)
		return p
	}
	bucket := "capacity: 10\n        rate: 5/s"
	require.Equal(t, "the policy declares no cost (every request costs one)", declaresCost(&auditScope{pol: parse(bucket, "")}))
	require.Equal(t, "", declaresCost(&auditScope{pol: parse(bucket, "cost: {name: X-Units, min: 0}\n")}))
	require.Contains(t, declaresCost(&auditScope{pol: parse(bucket, "cost: {}\n"), service: true}), "hits_addend")

	oneOff := parse("capacity: 10\n        rate: 0", "")
	for _, name := range []string{"precision", "boundary-burst", "first-edge", "retry-after", "retry-elsewhere", "refill-elsewhere"} {
		for _, ap := range auditPlans {
			if ap.name == name {
				require.Equal(t, "tier free's limit 10-once is a one-off quota (never refills): the plan waits for a refill or window edge that no run reaches", ap.applies(&auditScope{pol: oneOff}), name)
				require.NotContains(t, ap.applies(&auditScope{pol: parse(bucket, "")}), "one-off", name)
			}
		}
	}
	for _, ap := range auditPlans {
		if ap.name == "idle-refill" || ap.name == "concurrent-burst" {
			require.Equal(t, "", ap.applies(&auditScope{pol: oneOff}), "%s still runs: it proves nothing refilled", ap.name)
		}
	}
}
