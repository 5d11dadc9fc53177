package rlverify

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestJudgeMemoryCapsTheJudgementAndRestores(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")                  // unset for this test: judgeMemory reads it
	orig := debug.SetMemoryLimit(math.MaxInt64) // none, as in a process without GOMEMLIMIT
	t.Cleanup(func() { debug.SetMemoryLimit(orig) })

	restore := judgeMemory()
	set := debug.SetMemoryLimit(-1)
	require.Less(t, set, int64(math.MaxInt64), "a limit is set while judging")
	require.GreaterOrEqual(t, set, int64(judgeMemFloor))
	restore()
	require.Equal(t, int64(math.MaxInt64), debug.SetMemoryLimit(-1), "the limit is restored")

	// A limit the program set is kept.
	debug.SetMemoryLimit(1 << 30)
	restore = judgeMemory()
	require.Equal(t, int64(1<<30), debug.SetMemoryLimit(-1))
	restore()
	require.Equal(t, int64(1<<30), debug.SetMemoryLimit(-1))
}

func TestJudgeMemLimit(t *testing.T) {
	for _, tc := range []struct{ held, want int64 }{
		{0, judgeMemFloor},
		{8 << 20, judgeMemFloor},
		{16 << 20, 24 << 20},
		{100 << 20, 150 << 20},
	} {
		require.Equal(t, tc.want, judgeMemLimit(tc.held), "held %d", tc.held)
	}
}
