package checks_test

import (
	"fmt"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/policy"
)

// StreamChecks says whether a selection of checks can be judged as a
// stream, and which checks the Streamer then runs: those turned off are
// skipped, not judged. Delay streams only under a policy that declares
// no delay.
func ExampleStreamChecks() {
	p, err := policy.Parse("delaying.yaml", []byte("name: delaying\ntiers:\n  - name: free\n    key_prefix: \"\"\n    limits:\n      - {algorithm: token-bucket, capacity: 5, rate: 5/s}\ndelay:\n  max_wait: 600ms\n"))
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
	// [] false "delay does not stream (streaming: oversell, under-admission, token-bounds, retry-after, headers, isolation, fail-mode, downstream, bypass, calibration, regions, delay); delay streams only when the policy declares no delay (this one does)"
	// [oversell] true ""
}
