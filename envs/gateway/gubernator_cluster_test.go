//go:build gubernator

package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/limiters/catalog"
)

// gubernator's cluster comes up, decides through every front, and goes
// down within its bound.
func TestGubernatorClusterUpDown(t *testing.T) {
	for _, mode := range []string{"local", "global"} {
		t.Run(mode, func(t *testing.T) {
			env := Environment{Gateway: catalog.Gateway{Kind: catalog.Gubernator, Mode: mode}}
			st, err := env.Start(context.Background(), envs.Spec{Policy: slowRefill(t), Instances: 1})
			require.NoError(t, err)
			require.Len(t, st.Instances, 3, "one front per peer however few instances the plan asks for")
			got := burst(t, st, "free-guber-"+mode, 15)
			if mode == "local" {
				assert.Equal(t, 5, got, "the owning peer decides: one bucket of 5")
			} else {
				assert.GreaterOrEqual(t, got, 5, "GLOBAL admits at least one bucket")
				assert.LessOrEqual(t, got, 15)
			}
			assert.Equal(t, int64(got), sinkArrivals(t, st, "free-guber-"+mode))
			start := time.Now()
			require.NoError(t, st.Close())
			assert.Less(t, time.Since(start), gubernatorSettle+3*gubernatorCloseTimeout)
		})
	}
}
