//go:build unix

package rlverify

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive advisory lock on f without waiting; it is
// released when f is closed.
func lockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}
