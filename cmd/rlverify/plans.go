package main

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/attacks"
)

func plansCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "plans",
		Short: "List the built-in attack plans",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PLAN\tNEEDS\tDESCRIPTION")
			for _, p := range attacks.Builtins() {
				needs := strings.Join(p.Needs, ",")
				if needs == "" {
					needs = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Name, needs, p.Description)
			}
			return tw.Flush()
		},
	}
	c.AddCommand(&cobra.Command{
		Use:   "show NAME|FILE",
		Short: "Print a plan's YAML (a built-in's, to copy and edit, or a file's once it validates)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if b, ok := attacks.BuiltinYAML(args[0]); ok {
				_, err := c.OutOrStdout().Write(b)
				return err
			}
			if _, err := attacks.Load(args[0]); err != nil {
				return usageWrap(err)
			}
			b, err := os.ReadFile(args[0])
			if err != nil {
				return usageWrap(err)
			}
			_, err = c.OutOrStdout().Write(b)
			return err
		},
	}, plansValidateCmd())
	return c
}

func plansValidateCmd() *cobra.Command {
	var policyFile string
	c := &cobra.Command{
		Use:   "validate FILE [FILE …]",
		Short: "Check plan files without running them: every error names file:line and field",
		Long: `Check plan files (or built-in names) without sending anything: the plan
language (every error names the file, the line and the field), its
thresholds, and that the declared policy (the plan's policy:, else --policy,
else the built-in one) gives each of its keys a tier. Prints one line per
valid plan; exits 2 if any is invalid.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			bad := 0
			for _, file := range args {
				line, err := rlverify.ValidatePlan(file, policyFile)
				if err != nil {
					fmt.Fprintln(c.ErrOrStderr(), err)
					bad++
					continue
				}
				fmt.Fprintln(c.OutOrStdout(), line)
			}
			if bad > 0 {
				return &exitError{code: ExitUsage, err: fmt.Errorf("%d of %d plan(s) invalid", bad, len(args))}
			}
			return nil
		},
	}
	c.Flags().StringVar(&policyFile, "policy", "", "declared policy to check the plans' keys against (default: each plan's policy:, else the built-in one)")
	return c
}
