package policy_test

import (
	"fmt"

	"github.com/rlverify/rlverify/policy"
)

// A policy declares a limit change an operator may make mid-run; a plan's
// limit-change fault applies it by name, and the checks judge what was
// decided after it against the changed policy.
func ExamplePolicy_WithChange() {
	p, err := policy.Parse("p.yaml", []byte(`name: p
tiers:
  - name: free
    key_prefix: "free-"
    limits:
      - capacity: 10
        rate: 5/s
default_tier: free
changes:
  - name: halve
    tier: free
    limits:
      - capacity: 5
        rate: 2/s
tolerance:
  propagation: 500ms
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	c, _ := p.ChangeNamed("halve")
	fmt.Println(p.Tiers[0].Limits[0].Describe())
	fmt.Println(p.WithChange(c).Tiers[0].Limits[0].Describe())
	fmt.Println(p.Propagation())
	// Output:
	// token-bucket K=10 r=5/s (≡ 10 per 2s)
	// token-bucket K=5 r=2/s (≡ 5 per 2.5s)
	// 500ms
}
