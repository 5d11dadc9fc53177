//go:build !linux

package childproc

import (
	"os/exec"
	"syscall"
)

// SetProcAttr puts the child in its own process group (only Linux can have
// the kernel kill it when rlverify dies).
func SetProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
