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

// A change either lowers or raises every limit it gives: a raise is judged
// by the tier's own limits before it and by the raised ones across it; a
// change that raises one part and lowers another is refused.
func ExamplePolicy_ChangeRaises() {
	const base = `name: p
tiers:
  - name: free
    key_prefix: "free-"
    limits:
      - capacity: 10
        rate: 5/s
default_tier: free
changes:
  - name: c
    tier: free
    limits:
`
	for _, l := range []string{"capacity: 5, rate: 2/s", "capacity: 20, rate: 20/s", "capacity: 20, rate: 2/s"} {
		p, err := policy.Parse("p.yaml", []byte(base+"      - {"+l+"}\n"))
		if err != nil {
			fmt.Println("refused:", err != nil)
			continue
		}
		fmt.Println(l, "raises:", p.ChangeRaises(&p.Changes[0]))
	}
	// Output:
	// capacity: 5, rate: 2/s raises: false
	// capacity: 20, rate: 20/s raises: true
	// refused: true
}
