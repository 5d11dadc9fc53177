package reports_test

import (
	"fmt"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/reports"
)

// A Tally counts events one at a time (from a history.Stream) into the run
// figures of a document. Its percentiles are rounded down to 11
// significant bits: 3 ms is 2.998272 ms (0.06% below).
func ExampleNewTally() {
	t := reports.NewTally(policy.Default())
	for i, status := range []int{200, 200, 429, 0} {
		sent := int64(i) * 1e6
		t.Add(&history.Event{ID: uint64(i + 1), Key: "free-a", Sent: sent, Recv: sent + 3e6, Status: status})
	}
	stats, elapsed, lat, _ := t.Figures(&history.History{End: &history.End{Elapsed: 7e6}})
	fmt.Printf("%+v\n", stats)
	fmt.Println(elapsed, lat.Decisions, lat.P50, lat.Max)
	// Output:
	// {Requests:4 Admitted:2 Rejected:1 Errors:1}
	// 7000000 3 2998272 3000000
}
