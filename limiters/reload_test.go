package limiters

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/policy"
)

// A reload keeps every key's level, capped at a lowered capacity, and
// refills at the new rate from then on.
func TestTokenBucketReloadKeepsState(t *testing.T) {
	tb, err := NewTokenBucket([]policy.Limit{bucketLimit(10, 5)})
	require.NoError(t, err)
	t0 := time.Unix(1_700_000_000, 0).UnixNano()
	for range 10 {
		require.True(t, tb.AllowAt(t0, "drained", 1).Allowed)
	}
	require.True(t, tb.AllowAt(t0, "touched", 1).Allowed) // 9 left
	require.NoError(t, tb.Reload([]policy.Limit{bucketLimit(5, 2)}))
	assert.False(t, tb.AllowAt(t0, "drained", 1).Allowed, "a drained key stays drained")
	n := 0
	for tb.AllowAt(t0, "touched", 1).Allowed {
		n++
	}
	assert.Equal(t, 5, n, "the level is capped at the new capacity")
	d := tb.AllowAt(t0+int64(400*time.Millisecond), "drained", 1)
	assert.False(t, d.Allowed, "0.8 tokens at the new rate")
	assert.Equal(t, int64(5), d.Limit)
	assert.True(t, tb.AllowAt(t0+int64(500*time.Millisecond), "drained", 1).Allowed)
	require.ErrorContains(t, tb.Reload(nil), "")
}

func TestTokenBucketReloadIsSafeUnderLoad(t *testing.T) {
	tb, err := NewTokenBucket([]policy.Limit{bucketLimit(10, 5)})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				tb.AllowAt(int64(i)*int64(time.Millisecond), "k", 1+g%2)
			}
		}()
	}
	for i := range 50 {
		require.NoError(t, tb.Reload([]policy.Limit{bucketLimit(int64(5+i%5), 2)}))
	}
	wg.Wait()
}
