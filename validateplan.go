package rlverify

import (
	"fmt"
	"strings"

	"github.com/rlverify/rlverify/attacks"
)

// ValidatePlan checks one plan file (or built-in name) without running
// it: the plan language, its thresholds, and that the declared policy
// (policyFile, else the plan's policy:, else the built-in one) gives each of
// its keys a tier. It describes a valid plan in a line.
func ValidatePlan(file, policyFile string) (string, error) {
	p, err := attacks.Load(file)
	if err != nil {
		return "", err
	}
	pf := policyFile
	if pf == "" {
		pf = p.Policy
	}
	pol, err := LoadPolicy(pf)
	if err != nil {
		return "", fmt.Errorf("%s: policy: %w", file, err)
	}
	for _, k := range attacks.PlanKeys(p) {
		if _, ok := attacks.PlanTier(pol, k); !ok {
			return "", fmt.Errorf("%s: key %q matches no tier of policy %s and it has no default tier", file, k, pol.Name)
		}
	}
	needs := strings.Join(p.Needs, ",")
	if needs == "" {
		needs = "nothing"
	}
	return fmt.Sprintf("%s: ok — plan %s, %d phase(s), needs %s, policy %s", file, p.Name, len(p.Phases), needs, pol.Source), nil
}
