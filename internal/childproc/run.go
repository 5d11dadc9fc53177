package childproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// CommandContext is exec.CommandContext for a short-lived child that must
// not outlive its context: it runs in its own process group (with the
// kernel's parent-death signal on Linux), and when ctx ends the whole
// group is killed, not only the child (a shell's `sleep 600` survived its
// `sh`). Once the child has exited or been killed, Wait waits at most
// waitDelay for grandchildren still holding its output (see Run).
func CommandContext(ctx context.Context, waitDelay time.Duration, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	SetProcAttr(cmd)
	cmd.Cancel = func() error {
		KillGroup(cmd)
		return nil
	}
	cmd.WaitDelay = waitDelay
	return cmd
}

// Run runs cmd (from CommandContext) to its end. A child that exits with
// success while a process it started in the background still holds its
// output is a success: that process is the child's to start (a hook that
// restarts a store with `redis-server &`), so left is true and nothing
// after the child's exit is captured. Any other failure is returned as is.
func Run(cmd *exec.Cmd) (left bool, err error) {
	err = cmd.Run()
	if errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState != nil && cmd.ProcessState.Success() {
		return true, nil
	}
	return false, err
}

// GroupAlive reports whether any process of the group pgid is still there.
func GroupAlive(pgid int) bool { return syscall.Kill(-pgid, 0) == nil }

// Output keeps the first Max bytes written to it and counts the rest, so a
// child printing 800 MB costs Max bytes of memory, not 800 MB. It is safe
// for concurrent writes (stdout and stderr of one child). The zero value
// keeps nothing; Max must be set before the first write.
type Output struct {
	Max int

	mu      sync.Mutex
	buf     bytes.Buffer
	dropped int64
}

// Write implements io.Writer: it never fails, so the child is never
// stopped by a full pipe.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	keep := min(len(p), max(o.Max-o.buf.Len(), 0))
	o.buf.Write(p[:keep])
	o.dropped += int64(len(p) - keep)
	return len(p), nil
}

// Dropped is the number of bytes written past Max.
func (o *Output) Dropped() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.dropped
}

// String is what was kept, followed by "…[output truncated: N more bytes
// not kept]" when something was dropped.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.dropped == 0 {
		return o.buf.String()
	}
	return o.buf.String() + fmt.Sprintf("…[output truncated: %d more bytes not kept]", o.dropped)
}
