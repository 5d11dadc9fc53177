package childproc

import (
	"os/exec"
	"syscall"
)

// SetProcAttr puts the child in its own process group and has the kernel
// kill it if rlverify dies first.
func SetProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
