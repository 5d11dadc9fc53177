package reports

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteFile writes file whole or not at all: into a temporary file in
// the same folder, synced, then renamed over file. A failure (a full disk,
// a renderer's error) leaves neither a truncated file nor the temporary
// one, and an earlier file of that name stays as it was.
func WriteFile(file string, write func(io.Writer) error) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 64<<10)
	if err := write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return os.Rename(tmp.Name(), file)
}
