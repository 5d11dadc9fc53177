package main

import (
	"context"
	"errors"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rlverify/rlverify/internal/console"
)

// Run executes the command line args, writing to stdout and stderr. It is
// main without the process: tests call it in process. A panic of the
// command is returned as an internal error (exit 4).
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	defer recoverInternal(&err)
	stderr = console.Safe(stderr)
	runDepth.Add(1)
	defer runDepth.Add(-1)
	root := &cobra.Command{
		Use:   "rlverify",
		Short: "Load-test HTTP rate limiters and prove they keep their promise",
		Long: `rlverify fires attack plans at rate limiters, records every request in a
history, and runs checkers that prove or refute the limiter's declared policy.

Exit codes: 0 every check passed, 1 a check failed, 2 usage/plan/policy error,
3 the run could not be done, 4 internal error (a bug: please report it),
130 interrupted with no failure found.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetContext(ctx)
	root.AddCommand(
		attackCmd(),
		checkCmd(),
		plansCmd(),
		limitersCmd(),
		serveCmd(),
		sinkCmd(),
		simulateCmd(),
		calibrateCmd(),
		reportCmd(),
		selftestCmd(),
		compareCmd(),
		auditCmd(),
		importCmd(),
		versionCmd(),
		discoverCmd(),
	)
	setUpRoot(root)
	if testRoot != nil {
		testRoot(root)
	}
	err = root.ExecuteContext(ctx)
	if err == nil {
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && flagMessage(ee.err) != ee.err.Error() {
			ee.err = &flagWorded{msg: flagMessage(ee.err), err: ee.err}
		}
		return err
	}
	// Cobra's own errors (unknown flag, bad value) are usage errors.
	msg := err.Error()
	if strings.HasPrefix(msg, "unknown") || strings.Contains(msg, "flag") || strings.Contains(msg, "argument") {
		return &exitError{code: ExitUsage, err: err}
	}
	return &exitError{code: ExitUsage, err: err}
}

// testRoot, when set by a test, sees the command tree before it runs.
var testRoot func(*cobra.Command)
