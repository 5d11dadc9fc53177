package checks_test

import (
	"fmt"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/policy"
)

// StreamChecks says whether a selection of checks can be judged as a
// stream, and which checks the Streamer then runs: those turned off are
// skipped, not judged.
func ExampleStreamChecks() {
	// A policy that declares a delay: delay does not stream under it.
	p, err := policy.Parse("p.yaml", []byte("name: p\nversion: v1\ntiers:\n  - name: free\n    key_prefix: free-\n    limits:\n      - {algorithm: token-bucket, capacity: 2, rate: 1/s}\ndefault_tier: free\ndelay: {max_wait: 1s}\n"))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, o := range []checks.Options{
		{Only: []string{"oversell", "headers"}},
		{Only: []string{"oversell", "delay"}},
		{Only: []string{"oversell", "delay"}, Off: []string{"delay"}},
	} {
		names, ok, why := checks.StreamChecks(p, o)
		fmt.Printf("%v %v %q\n", names, ok, why)
	}
	// Output:
	// [oversell headers] true ""
	// [] false "delay streams only when the policy declares no delay (this one does)"
	// [oversell] true ""
}
