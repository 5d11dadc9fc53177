package rlverify

import "fmt"

// OptionError is an error in what the caller asked for: a bad plan,
// policy, history, option or combination of options. The command maps it
// to exit code 2; every other error of this package means the run could
// not be done (exit code 3).
type OptionError struct{ Err error }

func (e *OptionError) Error() string { return e.Err.Error() }
func (e *OptionError) Unwrap() error { return e.Err }

// optionErr formats an OptionError.
func optionErr(format string, args ...any) error {
	return &OptionError{Err: fmt.Errorf(format, args...)}
}

// optionWrap wraps err (nil stays nil) as an OptionError.
func optionWrap(err error) error {
	if err == nil {
		return nil
	}
	return &OptionError{Err: err}
}

// InterruptedError is a run that ctx (a signal) ended before anything
// could be judged (exit code 130).
type InterruptedError struct{ Err error }

func (e *InterruptedError) Error() string { return "run interrupted: " + e.Err.Error() }
func (e *InterruptedError) Unwrap() error { return e.Err }
