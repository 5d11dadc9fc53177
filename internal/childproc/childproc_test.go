package childproc

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A child and its own children die together.
func TestKillGroupKillsTheWholeGroup(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 30 & sleep 30")
	SetProcAttr(cmd)
	require.NoError(t, cmd.Start())
	pgid := cmd.Process.Pid
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	KillGroup(cmd)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the child outlived KillGroup")
	}
	require.Eventually(t, func() bool { return syscall.Kill(-pgid, 0) != nil }, 5*time.Second, 20*time.Millisecond, "the group's other members are gone")
	KillGroup(exec.Command("true")) // never started: nothing to kill
}
