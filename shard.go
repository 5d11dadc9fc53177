package rlverify

import (
	"strconv"
	"strings"
)

// MaxShards bounds the shards of one run.
const MaxShards = 1000

// ParseShard reads which share of a plan one load machine runs
// (docs/distributed.md): shard is 1-based i/n, shardIndex 0-based INDEX/n
// as Kubernetes' $JOB_COMPLETION_INDEX counts; at most one is given. It
// returns the 0-based shard and the count (0 of 1 for neither). Errors are
// *OptionError of the field Shard or ShardIndex.
func ParseShard(shard, shardIndex string) (int, int, error) {
	switch {
	case shard == "" && shardIndex == "":
		return 0, 1, nil
	case shard != "" && shardIndex != "":
		return 0, 0, fieldErr("Shard", "%s and ShardIndex %s: give one of them", shard, shardIndex)
	}
	field, s, first := "Shard", shard, 1
	if shardIndex != "" {
		field, s, first = "ShardIndex", shardIndex, 0
	}
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < first || i >= n+first || n > MaxShards {
		if first == 0 {
			return 0, 0, fieldErr(field, "%q: want INDEX/n with 0 ≤ INDEX < n, e.g. 0/3 (Kubernetes: $(JOB_COMPLETION_INDEX)/3)", s)
		}
		return 0, 0, fieldErr(field, "%q: want i/n with 1 ≤ i ≤ n, e.g. 2/3", s)
	}
	return i - first, n, nil
}
