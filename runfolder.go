package rlverify

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
)

// Every attack, audit, compare and check that keeps its output writes into
// a folder of its own, BASE/ID/, and points BASE/latest at it, so a rerun
// never leaves one run's report beside another's result. A folder that
// already holds files (the same run id again) is refused unless forced.

// LatestName is BASE/latest: a symlink to the newest run's folder, or where
// symlinks cannot be made a file holding the folder's name.
const LatestName = "latest"

// symlink makes symbolic links (tests replace it to try the fallback).
var symlink = os.Symlink

var safeID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// NewRunID is a random run id: 6 hex digits, as the engine's.
func NewRunID() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// RunFolder creates BASE/ID/ for one run and points BASE/latest at it.
// random says id was drawn here (another is drawn when it is taken);
// otherwise a folder that holds files is refused unless force.
func RunFolder(base, id string, random, force bool) (string, error) {
	if !safeID.MatchString(id) || id == LatestName {
		return "", &OptionError{Field: "RunID", Err: fmt.Errorf("%q cannot name a folder: want letters, digits, '.', '_' or '-' (and not %q)", id, LatestName)}
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", fmt.Errorf("run folder: %w", err)
	}
	dir := filepath.Join(base, id)
	for tries := 0; ; tries++ {
		used, err := holdsFiles(dir)
		if err != nil {
			return "", fmt.Errorf("run folder: %w", err)
		}
		if !used || force {
			break
		}
		if !random || tries > 10 {
			return "", &OptionError{Field: "RunID", Err: fmt.Errorf("%s: %s already holds the files of a run with id %s: give another RunID, another base folder, or ReplaceHistory to replace them", id, dir, id)}
		}
		id = NewRunID()
		dir = filepath.Join(base, id)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("run folder: %w", err)
	}
	if err := markLatest(base, id); err != nil {
		return "", fmt.Errorf("run folder: %s: %w", filepath.Join(base, LatestName), err)
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
	latest := filepath.Join(base, LatestName)
	tmp := filepath.Join(base, "."+LatestName+"-"+id)
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

// UseFolder gives the run its own folder under base, BASE/RUN-ID/ (a
// shard's BASE/RUN-ID-shard-I-of-N/; see RunFolder), drawing the run id
// when none is set, and keeps the history there unless HistoryFile names
// another file. force writes into a folder that holds files.
func (p *Prepared) UseFolder(base string, force bool) (string, error) {
	runID, random := p.RunID, p.RunID == ""
	if random {
		runID = NewRunID()
	}
	name := runID
	if p.o.Shards > 1 {
		name = fmt.Sprintf("%s-shard-%d-of-%d", runID, p.o.Shard+1, p.o.Shards)
	}
	dir, err := RunFolder(base, name, random, force)
	if err != nil {
		return "", err
	}
	if random {
		runID = filepath.Base(dir) // another was drawn if the first was taken
	}
	p.RunID, p.Dir = runID, dir
	if p.HistoryFile == "" {
		p.HistoryFile = filepath.Join(dir, "history.jsonl")
	}
	return dir, nil
}
