package reports

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
)

// Emit is every command's one dispatch of reports. The format Stdout
// picks goes to stdout (when not nil; coloured when
// color); when dir is set, every format is written to dir/base.EXT, and
// the JSON also to dir/saved (when set) for rlverify report to render
// again. render writes the document in a format.
func Emit(formats []string, dir, base, saved string, stdout io.Writer, color bool, render func(f Format, w io.Writer) error) error {
	if stdout != nil {
		f, err := Lookup(Stdout(formats, dir != ""))
		if err != nil {
			return err
		}
		if err := render(f.Colored(color), stdout); err != nil {
			return err
		}
	}
	if dir == "" {
		return nil
	}
	// Each file is written whole or not at all; when some cannot be (a
	// full disk) the others still are, and the error names the missing.
	written := map[string]bool{}
	var failed []string
	write := func(name, file string) error {
		if written[file] {
			return nil
		}
		written[file] = true
		f, err := Lookup(name)
		if err != nil {
			return err
		}
		path := filepath.Join(dir, file)
		if err := WriteFile(path, func(w io.Writer) error { return render(f, w) }); err != nil {
			failed = append(failed, fmt.Sprintf("%s (%v)", path, err))
		}
		return nil
	}
	for _, name := range formats {
		if err := write(name, base+"."+Extension(name)); err != nil {
			return err
		}
	}
	if saved != "" {
		if err := write("json", saved); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("not written, nothing partial left behind: %s", strings.Join(failed, "; "))
	}
	return nil
}
