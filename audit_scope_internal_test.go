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
