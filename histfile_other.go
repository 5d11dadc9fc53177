//go:build !unix

package rlverify

import "os"

// lockFile is a no-op where flock(2) does not exist: O_EXCL still keeps
// two runs from sharing a new file.
func lockFile(*os.File) error { return nil }
