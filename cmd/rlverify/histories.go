package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/importers"
	"github.com/rlverify/rlverify/policy"
)

// stdinName is the --history value that means standard input (check) or
// standard output (attack).
const stdinName = "-"

// readHistories reads the histories to judge ("-" is stdin), gives an
// imported one without an end record the end it implies (an import is not
// a run cut off), and merges them.
func readHistories(files []string, stdin io.Reader) (*history.History, error) {
	if n := countOf(files, stdinName); n > 1 {
		return nil, usageErr("--history - (standard input) can be given once, not %d times", n)
	}
	var hs []*history.History
	for _, file := range files {
		var h *history.History
		var err error
		if file == stdinName {
			h, err = history.Read("stdin", stdin)
		} else {
			h, err = history.ReadFile(file)
		}
		if err != nil {
			return nil, usageWrap(err)
		}
		importers.Complete(h)
		hs = append(hs, h)
	}
	h, err := history.Merge(hs...)
	if err != nil {
		return nil, usageWrap(err)
	}
	return h, nil
}

func countOf(l []string, s string) int {
	n := 0
	for _, x := range l {
		if x == s {
			n++
		}
	}
	return n
}

// historyPolicy is the policy h declares: the one recorded in its header
// ("declared"), else the shipped policy or the file its "policy" names.
func historyPolicy(h *history.History) (*policy.Policy, error) {
	if len(h.Run.Declared) > 0 {
		var p policy.Policy
		if err := json.Unmarshal(h.Run.Declared, &p); err != nil {
			return nil, usageWrap(fmt.Errorf("the history's declared policy: %w", err))
		}
		if err := p.Validate(); err != nil {
			return nil, usageWrap(fmt.Errorf("the history's declared policy: %w", err))
		}
		return &p, nil
	}
	name := h.Run.Policy
	if name == "" {
		return nil, usageErr("the history does not carry its policy: give --policy FILE")
	}
	p, err := loadPolicy(strings.TrimPrefix(name, "builtin:"))
	if err != nil {
		return nil, usageErr("the history's run header names policy %q: %v; give --policy FILE", name, err)
	}
	return p, nil
}

// judgeable is pol as it can be judged on h (an import from a format
// without response headers cannot show them), with the reason noted once.
func judgeable(h *history.History, pol *policy.Policy) *policy.Policy {
	pol, notes := importers.Judgeable(pol, h.Run)
	for _, n := range notes {
		if !slices.Contains(h.Run.Notes, n) {
			h.Run.Notes = append(h.Run.Notes, n)
		}
	}
	return pol
}

// runHistory is where an attack records its history.
type runHistory struct {
	// file is read back to judge the run.
	file string
	w    *history.Writer
	// report receives the first report format: stdout, unless stdout
	// carries the history.
	report io.Writer
}

// createRunHistory opens the history of an attack: DIR/history.jsonl, or
// the file given with --history. With --history - the history also streams
// to stdout as it is recorded (so `attack --history - | check --history -`
// works) and stdout carries nothing else: the reports go to DIR only.
func createRunHistory(dir, flag string, stdout io.Writer) (*runHistory, error) {
	rh := &runHistory{file: filepath.Join(dir, "history.jsonl"), report: stdout}
	if flag != "" && flag != stdinName {
		rh.file = flag
	}
	f, err := os.Create(rh.file)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	if flag == stdinName {
		rh.w, rh.report = history.NewWriter(&teeFile{File: f, copy: stdout}), io.Discard
	} else {
		rh.w = history.NewWriter(f)
	}
	return rh, nil
}

// teeFile writes to its file and copies what it wrote to another writer;
// a failing copy (a reader that went away) does not fail the file.
type teeFile struct {
	*os.File
	copy    io.Writer
	copyErr error
}

func (t *teeFile) Write(p []byte) (int, error) {
	n, err := t.File.Write(p)
	if t.copyErr == nil && n > 0 {
		_, t.copyErr = t.copy.Write(p[:n])
	}
	return n, err
}
