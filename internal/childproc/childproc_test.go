package childproc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

// A command whose context ends is killed with its whole group: the shell's
// own child does not outlive it (issue 26 item 14: `sleep 600` did).
func TestCommandContextKillsTheGroupWhenTheContextEnds(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	cmd := CommandContext(ctx, 200*time.Millisecond, "sh", "-c", "sleep 600 & echo $! > "+pidFile+"; wait")
	start := time.Now()
	_, err := Run(cmd)
	require.Error(t, err)
	require.Less(t, time.Since(start), 5*time.Second)
	b, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return syscall.Kill(pid, 0) != nil }, 5*time.Second, 20*time.Millisecond, "the grandchild sleep is gone")
	require.False(t, GroupAlive(cmd.Process.Pid))
}

// A command that succeeds while a process it started in the background
// still holds its output is a success, returned within the wait delay (it
// was "exec: WaitDelay expired before I/O complete"); the background
// process is the command's to start and keeps running.
func TestRunReturnsWhenABackgroundProcessHoldsTheOutput(t *testing.T) {
	out := &Output{Max: 100}
	cmd := CommandContext(context.Background(), 200*time.Millisecond, "sh", "-c", "echo started; sleep 30 &")
	cmd.Stdout, cmd.Stderr = out, out
	start := time.Now()
	left, err := Run(cmd)
	require.NoError(t, err)
	require.True(t, left)
	require.Less(t, time.Since(start), 5*time.Second)
	require.Equal(t, "started\n", out.String())
	require.True(t, GroupAlive(cmd.Process.Pid), "the background sleep still runs")
	KillGroup(cmd)

	failing := CommandContext(context.Background(), 200*time.Millisecond, "sh", "-c", "sleep 30 & exit 3")
	failing.Stdout = &Output{Max: 10}
	left, err = Run(failing)
	require.Error(t, err, "a failure is not hidden by what it left behind")
	require.False(t, left)
	KillGroup(failing)
}

// Output keeps Max bytes whatever is written, and says how much it dropped.
func TestOutputIsCappedWhileWritten(t *testing.T) {
	o := &Output{Max: 10}
	for range 1000 {
		n, err := o.Write([]byte("0123456789abcdef"))
		require.NoError(t, err)
		require.Equal(t, 16, n)
	}
	require.Equal(t, int64(16000-10), o.Dropped())
	require.Equal(t, "0123456789…[output truncated: 15990 more bytes not kept]", o.String())
	small := &Output{Max: 10}
	_, _ = small.Write([]byte("ok"))
	require.Equal(t, "ok", small.String())
}
