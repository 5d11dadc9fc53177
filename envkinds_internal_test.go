package rlverify

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every environment name is a value with its own rules and preparation;
// an unknown name is an OptionError of Env that lists the known ones.
func TestEveryEnvironmentIsAKind(t *testing.T) {
	for _, name := range []string{EnvEmbedded, EnvLocal, EnvDocker, EnvExternal, EnvGateway} {
		k, err := kindOf(name)
		require.NoError(t, err, name)
		require.NotNil(t, k, name)
	}
	require.Len(t, envKinds, 5, "a new kind is a new Env* name, listed above and in kindOf's message")
	_, err := kindOf("cloud")
	var oe *OptionError
	require.True(t, errors.As(err, &oe))
	require.Equal(t, "Env", oe.Field)
	require.EqualError(t, err, `Env "cloud": want embedded, local, docker, external or gateway`)
}
