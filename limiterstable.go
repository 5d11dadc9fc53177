package rlverify

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/rlverify/rlverify/envs/gateway"
	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policy"
)

// WriteLimiters lists the limiters rlverify can run, with their algorithm,
// store and the parameters of p's first tier in each family; a gateway
// this build or this machine cannot start says so and how to get it.
func WriteLimiters(w io.Writer, p *policy.Policy) error {
	free := p.Tiers[0].Limits[0]
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
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
				note += " — NOT INSTALLED: " + gateway.Install(e.Gateway.Kind)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Name, e.Algorithm, e.Store, mapping(l), note)
	}
	return tw.Flush()
}

func mapping(l policy.Limit) string {
	if l.Algorithm.Bucketed() {
		return fmt.Sprintf("K=%d r=%s", l.Capacity, policy.FormatRate(l.R()))
	}
	return fmt.Sprintf("N=%d W=%s", l.Count, l.Window)
}
