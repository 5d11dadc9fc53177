package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 17, item 7: the control endpoint beyond loopback needs a token.
func TestServeControlBeyondLoopbackNeedsAToken(t *testing.T) {
	_, stderr, code := rl(t, "serve", "--control", "--addr", "0.0.0.0:0")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, stderr, "give --control-token TOKEN")
}
