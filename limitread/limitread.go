// Package limitread reads a whole file only when it is small enough: at most
// limit+1 bytes are read, so a huge file or a device such as /dev/zero is
// refused with a clear error instead of filling memory.
//
// limitread is a leaf: it imports no rlverify package.
package limitread

import (
	"fmt"
	"io"
	"os"
)

// TooLargeError says that File holds more than Limit bytes. Size is the
// file's size when it is a regular file, else 0 (a device or a pipe, which
// was read only up to the limit).
type TooLargeError struct {
	File  string
	Limit int64
	Size  int64
}

func (e *TooLargeError) Error() string {
	if e.Size > 0 {
		return fmt.Sprintf("%s is %d bytes, more than the %d allowed", e.File, e.Size, e.Limit)
	}
	return fmt.Sprintf("%s holds more than the %d bytes allowed (not a regular file: read up to the limit)", e.File, e.Limit)
}

// File returns the contents of file when it holds at most limit bytes,
// else a *TooLargeError. Other errors are those of os.Open and the read.
func File(file string, limit int64) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var size int64
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		size = st.Size()
		if size > limit {
			return nil, &TooLargeError{File: file, Limit: limit, Size: size}
		}
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	if int64(len(data)) > limit {
		// It grew while being read, or it is not a regular file.
		return nil, &TooLargeError{File: file, Limit: limit}
	}
	return data, nil
}
