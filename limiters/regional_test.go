package limiters

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/policy"
)

// TestRegionalReplicasReconcile: two regions admit from their own replica
// until the other's consumption arrives as a debt; after the debit the
// replica is held back by what the other region admitted.
func TestRegionalReplicasReconcile(t *testing.T) {
	ctx := context.Background()
	lim := []policy.Limit{{Algorithm: policy.TokenBucket, Capacity: 10, Rate: 0.1, Count: 10, Window: policy.Duration(100 * time.Second)}}
	a, err := NewRegional(singleClient(t), lim)
	require.NoError(t, err)
	// One Redis stands for both regions' stores, so each region's replica
	// of the key gets its own name.
	b, err := NewRegional(singleClient(t), lim)
	require.NoError(t, err)
	keyA, keyB := "rl:{free:reg-a-"+t.Name()+"}:api:v1", "rl:{free:reg-b-"+t.Name()+"}:api:v1"

	for i := 0; i < 7; i++ {
		d, err := a.Allow(ctx, time.Now(), keyA, 1)
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	drained := a.Drain()
	require.Equal(t, map[string]int64{keyA: 7}, drained)
	require.Nil(t, a.Drain(), "drained once")

	// Region b learns that 7 tokens were spent elsewhere.
	require.NoError(t, b.Debit(ctx, keyB, drained[keyA]))
	admitted := 0
	for i := 0; i < 10; i++ {
		d, err := b.Allow(ctx, time.Now(), keyB, 1)
		require.NoError(t, err)
		if d.Allowed {
			admitted++
		}
	}
	require.Equal(t, 3, admitted, "one global quota of 10 minus the 7 admitted in the other region")
	require.NoError(t, b.Debit(ctx, keyB, 0), "a zero debit is a no-op")
}
