package main

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/rlverify/rlverify/envs/gateway"
	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policies"
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
					if err := gateway.Available(e.Gateway.Kind); err != nil {
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

// loadPolicy reads the policy in file, or the shipped policy of that name
// (see policies/), or the built-in default when file is empty or "default".
func loadPolicy(file string) (*policy.Policy, error) {
	if file == "" || file == "default" {
		return policy.Default(), nil
	}
	if !strings.ContainsAny(file, `/\`) && !strings.HasSuffix(file, ".yaml") && !strings.HasSuffix(file, ".yml") {
		if b, ok := policies.Get(file); ok {
			p, err := policy.Parse("builtin:"+file, b)
			if err != nil {
				return nil, usageWrap(err)
			}
			return p, nil
		}
		if _, err := os.Stat(file); err != nil {
			return nil, usageErr("no policy file %q and no shipped policy of that name (shipped: %s)", file, strings.Join(policies.Names(), ", "))
		}
	}
	p, err := policy.Load(file)
	if err != nil {
		return nil, usageWrap(err)
	}
	return p, nil
}
