package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/internal/console"
	"github.com/rlverify/rlverify/internal/suggest"
)

// noColor is --no-color of the invocation Run is executing; a Run inside
// it (selftest runs attacks in process) keeps it. Atomic: tests run Runs
// side by side in one process.
var noColor atomic.Bool

// runDepth counts the Runs executing (nested ones included).
var runDepth atomic.Int32

// colorOn reports whether output to w may carry ANSI colours: w is a
// terminal, NO_COLOR (https://no-color.org) is unset or empty, and
// --no-color was not given.
func colorOn(w io.Writer) bool {
	return !noColor.Load() && os.Getenv("NO_COLOR") == "" && console.IsTerminal(w)
}

// setUpRoot adds what every command shares: --no-color, --version,
// suggestions for mistyped flags and completion of flag values.
func setUpRoot(root *cobra.Command) {
	var own bool
	root.PersistentFlags().BoolVar(&own, "no-color", false, "no colours in the output (also when NO_COLOR is set)")
	if runDepth.Load() <= 1 {
		noColor.Store(false)
	}
	root.PersistentPreRun = func(*cobra.Command, []string) {
		if own {
			noColor.Store(true)
		}
	}
	root.Version = rlverify.Version()
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(suggestFlag)
	registerCompletions(root)
}

// versionCmd prints what --version prints.
func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print rlverify's version and commit (as --version does)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			fmt.Fprintln(c.OutOrStdout(), c.Root().Version)
			return nil
		},
	}
}

// suggestFlag adds the closest flags of c to an unknown flag error and
// makes every flag error a usage error.
func suggestFlag(c *cobra.Command, err error) error {
	msg := err.Error()
	name, ok := strings.CutPrefix(msg, "unknown flag: --")
	if !ok {
		return usageWrap(err)
	}
	name, _, _ = strings.Cut(name, "=")
	var near []string
	visit := func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		if d := suggest.Distance(name, f.Name); d <= 2 || (len(name) >= 3 && strings.HasPrefix(f.Name, name)) {
			near = append(near, "--"+f.Name)
		}
	}
	c.Flags().VisitAll(visit)
	c.InheritedFlags().VisitAll(visit)
	if len(near) == 0 {
		return usageErr("%s (see rlverify %s --help)", msg, c.Name())
	}
	sort.Strings(near)
	return usageErr("%s\n\nDid you mean this?\n\t%s", msg, strings.Join(near, "\n\t"))
}

// redisValue is a --redis flag. It takes redis://HOST:PORT[/DB] (the
// documented form) or HOST:PORT and keeps the URL, or the address alone
// when addrOnly (serve, whose instances take no database or password).
type redisValue struct {
	dst      *string
	addrOnly bool
}

// newRedisFlag registers --redis on fl, stored in dst.
func newRedisFlag(fl *pflag.FlagSet, dst *string, addrOnly bool, usage string) {
	fl.Var(&redisValue{dst: dst, addrOnly: addrOnly}, "redis", usage)
}

func (r *redisValue) String() string { return *r.dst }
func (r *redisValue) Type() string   { return "URL" }

func (r *redisValue) Set(s string) error {
	u, addr, err := envs.ParseRedis(s)
	if err != nil {
		return err
	}
	if r.addrOnly {
		if opt, _ := redis.ParseURL(u); opt.DB != 0 || opt.Password != "" || opt.Username != "" {
			return fmt.Errorf("%q: this command takes redis://HOST:PORT without user, password or database", s)
		}
		*r.dst = addr
		return nil
	}
	*r.dst = u
	return nil
}
