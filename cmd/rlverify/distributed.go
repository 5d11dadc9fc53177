package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/rlverify/rlverify/attacks"
)

// distFlags are attack's flags for running one plan from several machines
// at once (docs/distributed.md): which shard, and the instant every shard
// begins at.
type distFlags struct {
	shardIndex string
	startAt    instantFlag
}

func addDistFlags(fl *pflag.FlagSet, f *distFlags) {
	fl.StringVar(&f.shardIndex, "shard-index", "", "run shard INDEX/n with a 0-based INDEX, as Kubernetes' $JOB_COMPLETION_INDEX counts: 0/3 is --shard 1/3")
	fl.Var(&f.startAt, "start-at", fmt.Sprintf("wall-clock instant (RFC 3339, e.g. 2026-05-01T12:00:00Z) the run begins at, so shards on several machines start together; at most %s ahead", attacks.MaxStartWait))
}

// instantFlag is an RFC 3339 instant. Given empty it is an error, not
// unset: a cluster job whose start variable expanded to nothing must not
// start its shards whenever each is scheduled.
type instantFlag struct {
	at  time.Time
	set bool
}

func (f *instantFlag) String() string {
	if !f.set {
		return ""
	}
	return f.at.Format(time.RFC3339Nano)
}

// Set implements pflag.Value.
func (f *instantFlag) Set(s string) error {
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return fmt.Errorf("want an RFC 3339 instant such as 2026-05-01T12:00:00Z, got %q", s)
	}
	f.at, f.set = at, true
	return nil
}

// Type implements pflag.Value.
func (f *instantFlag) Type() string { return "RFC3339" }

// start is the instant --start-at names (zero when not given), checked
// against now.
func (f *distFlags) start(now time.Time) (time.Time, error) {
	if !f.startAt.set {
		return time.Time{}, nil
	}
	if err := attacks.CheckStart(f.startAt.at, now); err != nil {
		return time.Time{}, fmt.Errorf("--start-at: %w", err)
	}
	return f.startAt.at, nil
}
