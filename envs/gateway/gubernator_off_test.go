//go:build !gubernator

package gateway

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/limiters/catalog"
)

// A default build has gubernator's honest policy but not its cluster: it
// says so, how to build one that has it, and compare can skip the column.
func TestGubernatorNeedsItsBuildTag(t *testing.T) {
	require.ErrorIs(t, Available(catalog.Gubernator), ErrUnavailable)
	env := Environment{Gateway: catalog.Gateway{Kind: catalog.Gubernator, Mode: "local"}}
	_, err := env.Start(context.Background(), envs.Spec{Policy: slowRefill(t), Instances: 1})
	require.True(t, errors.Is(err, ErrUnavailable), "got %v", err)
	require.ErrorContains(t, err, "go build -tags gubernator ./cmd/rlverify")
	_, _, err = Honest(catalog.Gateway{Kind: catalog.Gubernator, Mode: "local"}, slowRefill(t))
	require.NoError(t, err, "the honest policy needs no cluster")
}
