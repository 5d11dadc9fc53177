package rlverify

import (
	"errors"
	"fmt"
	"os"
)

// checkHistoryFile refuses, before anything starts, a history file that
// would replace an existing file (a policy, an earlier run's history)
// unless replace, and one that is neither a regular file nor a stream (a
// device or a named pipe: writing to one replaces nothing).
func checkHistoryFile(file string, replace bool) error {
	st, err := os.Stat(file)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("history file: %w", err)
	case isStream(st):
		return nil
	case !st.Mode().IsRegular():
		return optionErr("history file %s exists and is not a regular file", file)
	case !replace:
		return fieldErr("HistoryFile", "%s already exists: give another file, or ReplaceHistory to replace it", file)
	}
	return nil
}

// createHistory opens file for a run's history. An existing file is
// refused unless replace (O_EXCL: two runs given the same new file cannot
// both have it); a file another run is writing is refused even then (an
// advisory lock), so two runs never interleave their records in one file.
func createHistory(file string, replace bool) (*os.File, error) {
	if st, err := os.Stat(file); err == nil && isStream(st) {
		f, err := os.OpenFile(file, os.O_WRONLY, 0)
		if err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
		return f, nil
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if replace {
		flags = os.O_WRONLY | os.O_CREATE
	}
	f, err := os.OpenFile(file, flags, 0o644)
	if errors.Is(err, os.ErrExist) {
		return nil, fieldErr("HistoryFile", "%s already exists: give another file, or ReplaceHistory to replace it", file)
	}
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, optionErr("history file %s is being written by another run (%v): give each run its own file", file, err)
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, fmt.Errorf("history: %w", err)
	}
	return f, nil
}

// isStream: a device or a named pipe (/dev/stdout, a FIFO a reader waits
// on) takes the records as they come; nothing in it is overwritten.
func isStream(st os.FileInfo) bool {
	return st.Mode()&(os.ModeCharDevice|os.ModeDevice|os.ModeNamedPipe) != 0
}
