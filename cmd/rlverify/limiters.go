package main

import (
	"github.com/spf13/cobra"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/policy"
)

func limitersCmd() *cobra.Command {
	var policyFile string
	c := &cobra.Command{
		Use:   "limiters",
		Short: "List the limiters rlverify can run, with their algorithm, store and parameter mapping",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			p, err := loadPolicy(policyFile)
			if err != nil {
				return err
			}
			return rlverify.WriteLimiters(c.OutOrStdout(), p)
		},
	}
	c.Flags().StringVar(&policyFile, "policy", "", "policy whose first tier's parameters are shown (default: built-in)")
	return c
}

// loadPolicy reads a policy file or shipped policy (rlverify.LoadPolicy).
func loadPolicy(file string) (*policy.Policy, error) {
	p, err := rlverify.LoadPolicy(file)
	return p, fromLib(err)
}
