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
	p := policy.Default()
	for _, o := range []checks.Options{
		{Only: []string{"oversell", "headers"}},
		{Only: []string{"oversell", "fail-mode"}},
		{Only: []string{"oversell", "fail-mode"}, Off: []string{"fail-mode"}},
	} {
		names, ok, why := checks.StreamChecks(p, o)
		fmt.Printf("%v %v %q\n", names, ok, why)
	}
	// Output:
	// [oversell headers] true ""
	// [] false "fail-mode does not stream (streaming: oversell, under-admission, token-bounds, retry-after, headers, isolation, downstream)"
	// [oversell] true ""
}
