package rlverify

import (
	"errors"
	"fmt"

	"github.com/rlverify/rlverify/envs"
)

// OptionError is an error in what the caller asked for: a bad plan,
// policy, history, option or combination of options. The command maps it
// to exit code 2; every other error of this package means the run could
// not be done (exit code 3).
//
// Field, when set, names the option at fault as a Go field path of the
// options ("Instances", "Environment.StoreProxies"); the message is then
// Field followed by Err, so a command can name its own flag instead (the
// CLI's table of fields and flags). Messages name fields, never flags.
type OptionError struct {
	Field string
	Err   error
}

func (e *OptionError) Error() string {
	if e.Field == "" {
		return e.Err.Error()
	}
	return e.Field + " " + e.Err.Error()
}

func (e *OptionError) Unwrap() error { return e.Err }

// fieldErr is an OptionError of one field: the message reads "Field
// format…".
func fieldErr(field, format string, args ...any) error {
	return &OptionError{Field: field, Err: fmt.Errorf(format, args...)}
}

// optionErr formats an OptionError.
func optionErr(format string, args ...any) error {
	return &OptionError{Err: fmt.Errorf(format, args...)}
}

// optionWrap wraps err (nil stays nil) as an OptionError; an environment's
// *envs.FieldError keeps its field, under Environment.
func optionWrap(err error) error {
	if err == nil {
		return nil
	}
	var fe *envs.FieldError
	if errors.As(err, &fe) && fe == err {
		return &OptionError{Field: "Environment." + fe.Field, Err: fe.Err}
	}
	return &OptionError{Err: err}
}

// InterruptedError is a run that ctx (a signal) ended before anything
// could be judged (exit code 130).
type InterruptedError struct{ Err error }

func (e *InterruptedError) Error() string { return "run interrupted: " + e.Err.Error() }
func (e *InterruptedError) Unwrap() error { return e.Err }
