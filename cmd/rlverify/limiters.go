package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/envs/gateway"
	"github.com/rlverify/rlverify/limiters/catalog"
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
			free := p.Tiers[0].Limits[0]
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "LIMITER\tALGORITHM\tSTORE\tPARAMETERS (tier %s)\tNOTES\n", p.Tiers[0].Name)
			for _, e := range catalog.All() {
				l := free
				l.Algorithm = e.Algorithm
				note := e.Description
				if e.Faulty {
					note = "FAULTY — breaks " + e.Breaks
				}
				if e.Gateway != nil {
					switch err := gateway.Available(e.Gateway.Kind); {
					case err != nil && e.Gateway.Program == "":
						note += " — NOT IN THIS BUILD: go build -tags gubernator ./cmd/rlverify"
					case err != nil:
						note += " — NOT INSTALLED: apt-get install nginx haproxy"
					}
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Name, e.Algorithm, e.Store, mapping(l), note)
			}
			return tw.Flush()
		},
	}
	c.Flags().StringVar(&policyFile, "policy", "", "policy whose first tier's parameters are shown (default: built-in)")
	return c
}

func mapping(l policy.Limit) string {
	if l.Algorithm.Bucketed() {
		return fmt.Sprintf("K=%d r=%s", l.Capacity, policy.FormatRate(l.R()))
	}
	return fmt.Sprintf("N=%d W=%s", l.Count, l.Window)
}

// loadPolicy reads a policy file or shipped policy (rlverify.LoadPolicy).
func loadPolicy(file string) (*policy.Policy, error) {
	p, err := rlverify.LoadPolicy(file)
	return p, fromLib(err)
}
