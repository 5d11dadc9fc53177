package main

import (
	"errors"
	"fmt"
	"os"

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
	return dir, outErr(err)
}

// outErr says a run folder's error with --out: a folder that cannot be
// made is a run error, a run id that cannot name one a usage error.
func outErr(err error) error {
	var oe *rlverify.OptionError
	if err != nil && !errors.As(err, &oe) {
		return runErr(fmt.Errorf("--out: %w", err))
	}
	return fromLib(err)
}

// newRunID is a random run id.
func newRunID() string { return rlverify.NewRunID() }

func ensureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return runErr(fmt.Errorf("--out: %w", err))
	}
	return nil
}
