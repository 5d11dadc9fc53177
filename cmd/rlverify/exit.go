package main

import "fmt"

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

func runErr(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: ExitRun, err: err}
}
