//go:build !docker

package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The default build has no docker environment: --env docker says how to
// build one that has it, and no run starts (scripts/test.sh runs this
// without tags; the docker environment's own tests run with -tags docker).
func TestDefaultBuildHasNoDocker(t *testing.T) {
	_, stderr, code := rl(t, "attack", "--plan", "concurrent-burst", "--env", "docker", "--out", t.TempDir(), "--quiet")
	require.Equal(t, ExitRun, code, stderr)
	require.Contains(t, stderr, "go build -tags docker ./cmd/rlverify")
}
