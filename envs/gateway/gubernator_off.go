//go:build !gubernator

package gateway

import (
	"context"

	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/policy"
)

// gubernatorBuilt says this binary can start the cluster: not without
// -tags gubernator (see gubernator_cluster.go).
const gubernatorBuilt = false

func startGubernator(context.Context, Environment, *policy.Policy, int) (*envs.Stack, error) {
	return nil, errNoGubernatorBuild
}
