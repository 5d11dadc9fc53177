// Package childproc starts helper programs (redis-server, nginx, HAProxy)
// as children that never outlive rlverify: each in its own process group,
// killed as a group.
package childproc

import (
	"os/exec"
	"syscall"
)

// KillGroup kills cmd's whole process group (nginx workers included) and
// cmd itself.
func KillGroup(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Process.Kill()
}
