package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

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
		Use:   "show NAME",
		Short: "Print a built-in plan's YAML, to copy and edit",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			b, ok := attacks.BuiltinYAML(args[0])
			if !ok {
				return usageErr("no built-in plan %q (see rlverify plans)", args[0])
			}
			_, err := c.OutOrStdout().Write(b)
			return err
		},
	})
	return c
}
