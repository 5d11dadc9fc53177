package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/envs"
)

// The library's option errors name fields; the command says them as its
// flags, through the one table.
func TestLibraryFieldsAreSaidAsFlags(t *testing.T) {
	burst, err := attacks.Load("concurrent-burst")
	require.NoError(t, err)
	for _, tc := range []struct {
		o    rlverify.AttackOptions
		want string
	}{
		{rlverify.AttackOptions{}, "--plan is required (see rlverify plans)"},
		{rlverify.AttackOptions{Plan: burst, Instances: -1}, "--instances -1: plan concurrent-burst needs at least 1"},
		{rlverify.AttackOptions{Plan: burst, RedisURL: "redis://192.0.2.1:6379"}, "--redis 192.0.2.1:6379 is not a loopback address; set --allow-remote to use it"},
		{rlverify.AttackOptions{Plan: burst, Targets: []string{"http://127.0.0.1:1"}, Environment: envs.External{Downstream: &envs.RemoteSink{URL: "http://192.0.2.1:9/sink"}}}, "--sink http://192.0.2.1:9/sink is not a loopback address"},
	} {
		err := tc.o.Validate()
		require.Error(t, err)
		require.Contains(t, fromLib(err).Error(), tc.want)
		require.Equal(t, ExitUsage, fromLib(err).(*exitError).code)
	}
}
