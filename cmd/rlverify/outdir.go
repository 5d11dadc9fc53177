package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/rlverify/rlverify"
)

// addForceFlag registers --force.
func addForceFlag(fl *pflag.FlagSet, dst *bool) {
	fl.BoolVar(dst, "force", false, "write into the run's folder under --out even when it already holds another run's files (the same --run-id again), and replace an existing --history FILE")
}

// outHelp is the help of a --out base directory.
func outHelp(what string) string {
	return "base directory: each run writes " + what + " into DIR/RUN-ID/ and points DIR/latest at it"
}

// runFolder is BASE/ID/ (see rlverify.RunFolder), its errors said with flags.
func runFolder(base, id string, random, force bool) (string, error) {
	dir, err := rlverify.RunFolder(base, id, random, force)
	return dir, fromLib(err)
}

// newRunID is a random run id.
func newRunID() string { return rlverify.NewRunID() }

// runFolder is where an attack writes: out itself for a plan of an audit
// or a column of a comparison, else out/RUN-ID/ (a shard's
// out/RUN-ID-shard-I-of-N/). It returns the run id the engine must use,
// drawn here when none is given.
func (f *attackFlags) runFolder(runID string, shard, shards int) (string, string, error) {
	if runID == "" && f.exactOut {
		return f.out, "", ensureDir(f.out)
	}
	random := runID == ""
	if random {
		runID = newRunID()
	}
	name := runID
	if shards > 1 {
		name = fmt.Sprintf("%s-shard-%d-of-%d", runID, shard+1, shards)
	}
	if f.exactOut {
		return f.out, runID, ensureDir(f.out)
	}
	dir, err := runFolder(f.out, name, random, f.force)
	if err != nil {
		return "", "", err
	}
	if random {
		runID = filepath.Base(dir) // another was drawn if the first was taken
	}
	return dir, runID, nil
}

func ensureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return runErr(fmt.Errorf("--out: %w", err))
	}
	return nil
}
