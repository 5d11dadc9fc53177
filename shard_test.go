package rlverify_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify"
)

func TestParseShard(t *testing.T) {
	for _, tc := range []struct {
		name, shard, index string
		i, n               int
		err                string
	}{
		{"none", "", "", 0, 1, ""},
		{"shard 1-based", "2/3", "", 1, 3, ""},
		{"shard past the end", "4/3", "", 0, 0, `Shard "4/3": want i/n with 1 ≤ i ≤ n`},
		{"shard zero", "0/3", "", 0, 0, "Shard"},
		{"index 0-based, first", "", "0/3", 0, 3, ""},
		{"index 0-based, last", "", "2/3", 2, 3, ""},
		{"index past the end", "", "3/3", 0, 0, `ShardIndex "3/3": want INDEX/n with 0 ≤ INDEX < n`},
		{"index negative", "", "-1/3", 0, 0, "ShardIndex"},
		{"index garbage", "", "$(JOB_COMPLETION_INDEX)/3", 0, 0, "ShardIndex"},
		{"too many", "1/1001", "", 0, 0, "Shard"},
		{"both", "1/3", "0/3", 0, 0, "give one of them"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i, n, err := rlverify.ParseShard(tc.shard, tc.index)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				var oe *rlverify.OptionError
				require.ErrorAs(t, err, &oe)
				return
			}
			require.NoError(t, err)
			require.Equal(t, []int{tc.i, tc.n}, []int{i, n})
		})
	}
}
