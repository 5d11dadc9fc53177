package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/checks"
)

// TestMutationMatrix is the diagnosis matrix: every defect's row, through
// real attacks. The correct limiter passes every check; the faulty one fails
// exactly its root-cause check, the checks it explains say so, and every
// other check passes or has nothing to judge. Rows run two at a time (go
// test's -parallel, GOMAXPROCS by default): each row's runs are judged
// with the timing tolerance of a busy machine, and rlverify selftest's
// runs beside a CPU hog show the rows hold so (docs/reliability.md).
func TestMutationMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real attacks (about two minutes)")
	}
	covered := map[string]bool{}
	for _, row := range rlverify.MutationMatrix {
		covered[row.Root] = true
		t.Run(fmt.Sprintf("%s/%s/%s", row.Root, row.Plan, strings.ReplaceAll(row.Bad, "/", "-")), func(t *testing.T) {
			t.Parallel()
			r := rlverify.RunMatrixRow(context.Background(), row, t.TempDir())
			require.NoError(t, r.Err)
			require.Empty(t, r.Problems())
		})
	}
	for _, name := range checks.Names() {
		require.True(t, covered[name], "check %s is the root of no row in the diagnosis matrix", name)
	}
}
