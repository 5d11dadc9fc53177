// Command rlverify load-tests HTTP rate limiters and proves, with evidence,
// whether they keep their declared policy. See the README for usage.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/rlverify/rlverify/internal/console"
)

func main() {
	// go-redis logs reconnection attempts; the reports say what matters.
	redis.SetLogger(quietLogger{})
	// SIGHUP (the terminal closed) stops a run like Ctrl-C: the history
	// gets its end record and the report is written.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	err := Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			if ee.err != nil {
				fmt.Fprintln(console.Safe(os.Stderr), "rlverify:", ee.err)
			}
			os.Exit(ee.code)
		}
		fmt.Fprintln(console.Safe(os.Stderr), "rlverify:", err)
		os.Exit(ExitUsage)
	}
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...interface{}) {}
