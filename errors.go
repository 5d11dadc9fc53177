package rlverify

import (
	"errors"
	"fmt"
	"strings"

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

// MissingPolicyError is an attack or audit on a service rlverify did not
// start (Targets, Handler, EnvExternal) with no declared policy. rlverify's
// own policy describes its reference service: a verdict against it would
// judge someone else's service against a promise it never made. It comes
// wrapped in an OptionError (a usage error, exit code 2).
type MissingPolicyError struct {
	// Target names the service (its URLs, or "an http.Handler").
	Target string
	// Plan is the plan that would have lent its own policy ("" for none).
	Plan string
}

func (e *MissingPolicyError) Error() string {
	if e.Plan != "" {
		return fmt.Sprintf("is required: no declared policy for %s, and plan %s judges against its own policy, which describes rlverify's reference service: plan %s's own policy says nothing of yours; declare your service's policy, or measure one with rlverify discover", e.Target, e.Plan, e.Plan)
	}
	return fmt.Sprintf("is required: no declared policy for %s, and rlverify's reference policy describes its own service, not yours; declare your service's policy, or measure one with rlverify discover", e.Target)
}

// missingPolicy refuses a run against a service rlverify did not
// start when no policy is declared (see MissingPolicyError). It is the one
// home of the "never a borrowed policy" rule for Prepare and Audit.
func missingPolicy(o AttackOptions) error {
	external := o.Env == EnvExternal || len(o.Targets) > 0 || o.Handler != nil
	if !external || o.Policy != nil || o.JudgedPolicy != nil {
		return nil
	}
	target := "an http.Handler"
	if len(o.Targets) > 0 {
		target = strings.Join(o.Targets, " ")
	}
	e := &MissingPolicyError{Target: target}
	if o.Plan != nil && o.Plan.Policy != "" {
		e.Plan = o.Plan.Name
	}
	return &OptionError{Field: "Policy", Err: e}
}

// CheckDeclaredPolicy is the rule Prepare applies, for callers that want to
// refuse early (before reading keys files or starting anything): nil unless o
// targets a service rlverify did not start without declaring its policy.
func CheckDeclaredPolicy(o AttackOptions) error { return missingPolicy(o) }
