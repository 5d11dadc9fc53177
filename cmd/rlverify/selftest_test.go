package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/checks"
)

// TestMutationMatrix proves every checker against a correct limiter and the
// faulty variant that breaks its invariant, through real attacks.
func TestMutationMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real attacks (about a minute)")
	}
	covered := map[string]bool{}
	for i, row := range mutationMatrix {
		covered[row.Check] = true
		t.Run(fmt.Sprintf("%s/%s/%s", row.Check, row.Plan, row.Bad), func(t *testing.T) {
			r := runMatrixRow(context.Background(), row, t.TempDir())
			require.NoError(t, r.Err)
			require.Equal(t, checks.Pass, r.GoodVerdict, "%s against %s", row.Check, row.Good)
			require.Equal(t, checks.Fail, r.BadVerdict, "%s against %s", row.Check, row.Bad)
			_ = i
		})
	}
	for _, name := range checks.Names() {
		require.True(t, covered[name], "checker %s has no row in the mutation matrix", name)
	}
}
