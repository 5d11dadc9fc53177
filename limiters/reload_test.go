package limiters

import (
	"context"
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

// The Redis limiter and the resilient wrapper around it reload in place
// as the memory bucket does: a lowering caps a key's level, a raise keeps
// it and refills to the raised capacity at the raised rate.
func TestRedisReloadKeepsState(t *testing.T) {
	ctx := context.Background()
	rl, err := NewRedis(policy.TokenBucket, singleClient(t), []policy.Limit{bucketLimit(10, 5)}, CallerTime())
	require.NoError(t, err)
	res, err := NewResilient(rl, policy.TokenBucket, []policy.Limit{bucketLimit(10, 5)}, policy.Failure{Mode: policy.FailLocal}, nil)
	require.NoError(t, err)
	t0 := time.Unix(1_700_000_000, 0)
	drained, touched := uniqueKey("drained"), uniqueKey("touched")
	allow := func(at time.Time, key string) Decision {
		d, err := res.Allow(ctx, at, key, 1)
		require.NoError(t, err)
		return d
	}
	for range 10 {
		require.True(t, allow(t0, drained).Allowed)
	}
	require.True(t, allow(t0, touched).Allowed) // 9 left
	for _, c := range []struct {
		name   string
		limits []policy.Limit
		// at (after t0) and what a key then holds.
		at      time.Duration
		key     string
		admits  int
		limitIs int64
	}{
		{"lowered: a drained key stays drained", []policy.Limit{bucketLimit(5, 2)}, 0, drained, 0, 5},
		{"lowered: the level is capped at the new capacity", []policy.Limit{bucketLimit(5, 2)}, 0, touched, 5, 5},
		{"raised: the drained key refills at the raised rate to the raised capacity", []policy.Limit{bucketLimit(20, 10)}, 3 * time.Second, drained, 20, 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, res.Reload(c.limits))
			n := 0
			var last Decision
			for {
				d := allow(t0.Add(c.at), c.key)
				if !d.Allowed {
					last = d
					break
				}
				n++
			}
			assert.Equal(t, c.admits, n)
			assert.Equal(t, c.limitIs, last.Limit)
		})
	}
	require.ErrorContains(t, rl.Reload([]policy.Limit{bucketLimit(1, 1), bucketLimit(2, 2)}), "2 limit(s) for its 1")
	r2, err := NewResilient(noReload{}, policy.TokenBucket, []policy.Limit{bucketLimit(10, 5)}, policy.Failure{}, nil)
	require.NoError(t, err)
	require.ErrorContains(t, r2.Reload([]policy.Limit{bucketLimit(5, 2)}), "cannot change its limits in place")
}

// noReload is a store limiter without Reload.
type noReload struct{}

func (noReload) Allow(context.Context, time.Time, string, int) (Decision, error) {
	return Decision{Allowed: true}, nil
}
