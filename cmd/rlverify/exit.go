package main

import (
	"errors"

	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"sync"
	"syscall"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/envs"
)

// Exit codes.
const (
	// ExitPass: every check passed.
	ExitPass = 0
	// ExitFail: a check failed (or a verdict chosen by --fail-on).
	ExitFail = 1
	// ExitUsage: bad flags, plan, policy or history.
	ExitUsage = 2
	// ExitRun: the run could not be done (target unreachable, environment
	// failed to start).
	ExitRun = 3
	// ExitInternal: rlverify itself failed (a panic): a bug to report, never
	// to be mistaken for a usage error (Go's own exit code for a panic is 2).
	ExitInternal = 4
	// ExitInterrupted: the run was interrupted (SIGINT, SIGTERM or SIGHUP) and no check
	// failed on what was recorded.
	ExitInterrupted = 130
)

// exitError carries an exit code; err may be nil when the output already
// said everything.
type exitError struct {
	code int
	err  error
	// fails names what failed the run (checks, "evidence") for ExitFail.
	fails []string
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// ExitCode returns the process exit code.
func (e *exitError) ExitCode() int { return e.code }

func usageErr(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...)}
}

func usageWrap(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: ExitUsage, err: err}
}

// fromLib gives an error of the library its exit code: an
// *rlverify.OptionError is a usage error, anything else a run error.
func fromLib(err error) error {
	if err == nil {
		return nil
	}
	var oe *rlverify.OptionError
	var fe *envs.FieldError
	if errors.As(err, &oe) || errors.As(err, &fe) {
		return usageWrap(&flagWorded{msg: flagMessage(err), err: err})
	}
	var ie *rlverify.InterruptedError
	if errors.As(err, &ie) {
		return &exitError{code: ExitInterrupted, err: err}
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	if msg := flagMessage(err); msg != err.Error() {
		err = &flagWorded{msg: msg, err: err}
	}
	return runErr(err)
}

func runErr(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: ExitRun, err: err}
}

// recoverInternal turns a panic of the command into an internal error
// (ExitInternal) with its stack, in place of *err. Deferred by Run; a
// panic on another goroutine still ends the process as Go does.
func recoverInternal(err *error) {
	r := recover()
	if r == nil {
		return
	}
	*err = &exitError{code: ExitInternal, err: fmt.Errorf("internal error: %v\n\n%s\nThis is a bug in rlverify: please report it at https://github.com/rlverify/rlverify/issues with the command line and this message", r, debug.Stack())}
}

var sigpipeOnce sync.Once

// catchSIGPIPE makes a write to a closed pipe on stdout fail with EPIPE
// rather than end the process (Go's default for fds 1 and 2 when SIGPIPE is
// not notified).
func catchSIGPIPE() {
	sigpipeOnce.Do(func() { signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE) })
}
