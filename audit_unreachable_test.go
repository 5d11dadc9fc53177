package rlverify_test

import (
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/envs"
)

// The library stops an audit at the first plan when the target does not
// answer: every other plan would end the same way.
func TestAuditStopsOnAnUnreachableTarget(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	var started []string
	a, err := rlverify.Audit(context.Background(), rlverify.AuditOptions{
		Attack: rlverify.AttackOptions{Targets: []string{"http://" + addr}},
		Dir:    t.TempDir(),
		Log:    func(format string, args ...any) { started = append(started, format) },
	})
	require.Nil(t, a)
	require.ErrorIs(t, err, envs.ErrUnreachable)
	require.ErrorContains(t, err, "no further plan was run")
	require.Len(t, started, 1, "one plan started")
}
