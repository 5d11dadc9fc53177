package rlverify

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/importers"
	"github.com/rlverify/rlverify/policy"
)

// ImportOptions say which results of another load tool to convert into a
// history, and where to write it.
type ImportOptions struct {
	// From is the format (importers.Formats).
	From string
	// In is the file to read ("-": Stdin); Out the history to write ("-":
	// Stdout). Out is written whole or not at all, and replaces an
	// existing file only with Force (never In itself).
	In, Out string
	Force   bool
	Stdin   io.Reader
	Stdout  io.Writer
	// InstanceMap are HOST=N: requests to HOST went to instance N.
	InstanceMap []string
	// Importer are the importers' options (Policy, Key, KeyTag,
	// PlainKeys); its Instances and Name are set from the above (InstanceMap, In).
	Importer importers.Options
}

// Import converts o.In into a history at o.Out. Errors in the options or
// the input are *OptionError (a file that cannot be read is one too).
func Import(o ImportOptions) (*importers.Summary, error) {
	if err := importers.Known(o.From); err != nil {
		return nil, fieldErr("From", "%q: want %s", o.From, strings.Join(importers.Formats(), ", "))
	}
	if o.Out == "" {
		return nil, fieldErr("Out", "FILE is required (- for stdout)")
	}
	for _, s := range o.InstanceMap {
		host, n, ok := strings.Cut(s, "=")
		i, err := strconv.Atoi(n)
		if !ok || host == "" || err != nil || i < 0 || i >= envs.MaxInstances {
			return nil, fieldErr("InstanceMap", "%q: want HOST=N with host[:port] as in the URLs and 0 ≤ N < %d, e.g. 127.0.0.1:8080=0", s, envs.MaxInstances)
		}
		o.Importer.Instances = append(o.Importer.Instances, importers.Instance{Host: host, Index: i})
	}
	if o.Importer.Policy == nil {
		o.Importer.Policy = policy.Default()
	}
	if err := importers.Validate(o.From, o.Importer); err != nil {
		return nil, &OptionError{Err: err}
	}
	if err := checkImportOut(o.In, o.Out, o.Force); err != nil {
		return nil, err
	}
	in := o.Stdin
	o.Importer.Name = "stdin"
	if o.In != "-" {
		f, err := os.Open(o.In)
		if err != nil {
			return nil, optionErr("import: %w", err)
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil && st.IsDir() {
			return nil, optionErr("import: %s is a directory, not a results file", o.In)
		}
		in, o.Importer.Name = f, o.In
	}
	var w *history.Writer
	var tmp *os.File
	if o.Out == "-" {
		w = history.NewWriter(noClose{o.Stdout})
	} else {
		var err error
		if tmp, err = os.CreateTemp(filepath.Dir(o.Out), ".import-*.jsonl"); err != nil {
			return nil, fmt.Errorf("import: %w", err)
		}
		defer os.Remove(tmp.Name())
		w = history.NewWriter(tmp)
	}
	sum, err := importers.Import(o.From, in, w, o.Importer)
	if err != nil {
		w.Close()
		var ie *importers.InputError
		if errors.As(err, &ie) {
			return nil, &OptionError{Err: err}
		}
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	if tmp != nil {
		if err := os.Rename(tmp.Name(), o.Out); err != nil {
			return nil, fmt.Errorf("import: %w", err)
		}
	}
	return sum, nil
}

// checkImportOut refuses an out that would replace its own input (whatever
// force says) or an existing file without force.
func checkImportOut(in, out string, force bool) error {
	if out == "-" {
		return nil
	}
	ost, err := os.Stat(out)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("import: %s: %w", out, err)
	}
	if in != "-" {
		if ist, err := os.Stat(in); err == nil && os.SameFile(ist, ost) {
			return fieldErr("Out", "%s is the file being imported: give another Out", out)
		}
	}
	if !ost.Mode().IsRegular() {
		return fieldErr("Out", "%s exists and is not a regular file", out)
	}
	if !force {
		return fieldErr("Out", "%s already exists: give another Out, or Force to replace it", out)
	}
	return nil
}

// noClose hides a Close method, so history.Writer.Close leaves stdout open.
type noClose struct{ io.Writer }
