package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"

	"github.com/spf13/pflag"
)

// Every attack, audit, compare and check --out writes into a folder of its
// own, BASE/ID/, and points BASE/latest at it, so a rerun never leaves one
// run's report beside another's result. A folder that already holds files
// (the same --run-id again) is refused unless --force.

// latestName is BASE/latest: a symlink to the newest run's folder, or where
// symlinks cannot be made a file holding the folder's name.
const latestName = "latest"

// symlink makes symbolic links (tests replace it to try the fallback).
var symlink = os.Symlink

// addForceFlag registers --force.
func addForceFlag(fl *pflag.FlagSet, dst *bool) {
	fl.BoolVar(dst, "force", false, "write into the run's folder under --out even when it already holds another run's files (the same --run-id again), and replace an existing --history FILE")
}

// outHelp is the help of a --out base directory.
func outHelp(what string) string {
	return "base directory: each run writes " + what + " into DIR/RUN-ID/ and points DIR/latest at it"
}

var safeID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// newRunID is a random run id: 6 hex digits, as the engine's.
func newRunID() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// runFolder creates BASE/ID/ for one run and points BASE/latest at it.
// random says id was drawn here (another is drawn when it is taken);
// otherwise a folder that holds files is refused unless force.
func runFolder(base, id string, random, force bool) (string, error) {
	if !safeID.MatchString(id) || id == latestName {
		return "", usageErr("run id %q cannot name a folder: want letters, digits, '.', '_' or '-' (and not %q)", id, latestName)
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", runErr(fmt.Errorf("--out: %w", err))
	}
	dir := filepath.Join(base, id)
	for tries := 0; ; tries++ {
		used, err := holdsFiles(dir)
		if err != nil {
			return "", runErr(fmt.Errorf("--out: %w", err))
		}
		if !used || force {
			break
		}
		if !random || tries > 10 {
			return "", usageErr("%s already holds the files of a run with id %s: give another --run-id, another --out, or --force to replace them", dir, id)
		}
		id = newRunID()
		dir = filepath.Join(base, id)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", runErr(fmt.Errorf("--out: %w", err))
	}
	if err := markLatest(base, id); err != nil {
		return "", runErr(fmt.Errorf("--out: %s: %w", filepath.Join(base, latestName), err))
	}
	return dir, nil
}

// holdsFiles reports whether dir exists and is not empty.
func holdsFiles(dir string) (bool, error) {
	f, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return false, nil
	}
	return err == nil, err
}

// markLatest points BASE/latest at BASE/id: a relative symlink swapped in
// by a rename (readers never see it missing), else a file naming id.
func markLatest(base, id string) error {
	latest := filepath.Join(base, latestName)
	tmp := filepath.Join(base, "."+latestName+"-"+id)
	_ = os.Remove(tmp)
	if err := symlink(id, tmp); err == nil {
		if err := os.Rename(tmp, latest); err != nil {
			_ = os.Remove(tmp)
			return err
		}
		return nil
	}
	if fi, err := os.Lstat(latest); err == nil && fi.IsDir() {
		return fmt.Errorf("is a directory, not rlverify's pointer to the latest run")
	}
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, latest)
}

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
