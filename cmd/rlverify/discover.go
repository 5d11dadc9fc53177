package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/discover"
	"github.com/rlverify/rlverify/reports"
)

type discoverFlags struct {
	targets     []string
	allowRemote bool
	budget      time.Duration
	timeout     time.Duration
	output      string
	force       bool
	quiet       bool
	shape       shapeFlags
}

func discoverCmd() *cobra.Command {
	var f discoverFlags
	c := &cobra.Command{
		Use:   "discover --target URL … [--budget DURATION] [-o policy.yaml]",
		Short: "Measure a limiter's policy from outside and write it as a policy file",
		Long: `Probe your service with the request shape you give and write what its
limiter does as a policy in rlverify's format: per tier the algorithm family,
capacity K or limit N, rate r or window W, the window's anchoring, whether
refused requests cost, the scope across the instances given, the statuses and
the headers and what they mean. Every number is commented with its evidence
and range; what the budget could not pin down is said. It says how long it
will take before it starts (a 5-per-2s bucket: 10–15s).

Generated keys are fresh for every probe; with --keys each tier of the file
is measured on its own keys, reused only after they refilled.

  rlverify discover --target http://127.0.0.1:8080/v1/orders --identity bearer \
      --keys keys.yaml --method POST --body '{"sku":"a"}' -o policy.yaml
  rlverify audit --target http://127.0.0.1:8080/v1/orders --policy policy.yaml …`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runDiscover(c.Context(), &f, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	fl := c.Flags()
	fl.StringArrayVar(&f.targets, "target", nil, "base URL of one of your instances, with the path to probe (repeat for several: the scope is measured)")
	fl.BoolVar(&f.allowRemote, "allow-remote", false, "allow targets outside loopback (only probe services you own)")
	fl.DurationVar(&f.budget, "budget", discover.DefaultBudget, "the longest the discovery may take; probes adapt and say what it left open")
	fl.DurationVar(&f.timeout, "timeout", attacks.DefaultTimeout, "per-request timeout")
	fl.StringVarP(&f.output, "output", "o", "", "write the policy to FILE (default: stdout)")
	fl.BoolVar(&f.force, "force", false, "overwrite an existing --output file")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress output")
	addShapeFlags(fl, &f.shape)
	return c
}

func runDiscover(ctx context.Context, f *discoverFlags, stdout, stderr io.Writer) error {
	if f.output != "" && !f.force {
		if _, err := os.Stat(f.output); err == nil {
			return usageErr("discover: --output %s exists; pass --force to overwrite it", f.output)
		}
	}
	o, err := f.options(stderr)
	if err != nil {
		return err
	}
	d, err := rlverify.Discover(ctx, o)
	if errors.Is(err, discover.ErrNothingAdmitted) {
		return usageWrap(err)
	}
	if err != nil {
		return fromLib(err)
	}
	d.YAML = commentWords(d.YAML) // its notes name fields
	if !f.quiet {
		fmt.Fprintln(stderr, summary(d.Result))
	}
	if f.output == "" {
		_, err := stdout.Write(d.YAML)
		return runErr(err)
	}
	if err := reports.WriteFile(f.output, func(w io.Writer) error { _, err := w.Write(d.YAML); return err }); err != nil {
		return runErr(err)
	}
	if !f.quiet {
		fmt.Fprintf(stderr, "wrote %s: review it, then declare it: rlverify audit --policy %s …\n", f.output, f.output)
	}
	return nil
}

// options are the discovery's options from the flags.
func (f *discoverFlags) options(stderr io.Writer) (rlverify.DiscoverOptions, error) {
	req, err := f.shape.request()
	o := rlverify.DiscoverOptions{AllowRemote: f.allowRemote, Overrides: f.shape.overrides(), KeysFile: f.shape.keysFile,
		Options: discover.Options{Targets: f.targets, Request: req, Budget: f.budget, Timeout: f.timeout}}
	if !f.quiet {
		o.Log = func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }
	}
	return o, usageWrap(err)
}

// summary is one line per tier.
func summary(r *discover.Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "discovered in %s with %d requests:", r.Elapsed.Round(100*time.Millisecond), r.Requests)
	for _, t := range r.Tiers {
		fmt.Fprintf(&b, "\n  %s: %s", t.Name, discover.Describe(t))
	}
	return flagWords(b.String())
}
