package reports_test

import (
	"fmt"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/reports"
)

// A DocStream builds a document from events handed to it twice, as a
// history.Stream hands them out (send order, with each event's file
// position); its percentiles are exact, as Build's (3 ms, where the
// Tally alone says 2.998272 ms).
func ExampleNewDocStream() {
	rec := &history.History{End: &history.End{Elapsed: 7e6}}
	events := make([]history.Event, 0, 4)
	for i, status := range []int{200, 200, 429, 0} {
		sent := int64(i) * 1e6
		events = append(events, history.Event{ID: uint64(i + 1), Key: "free-a", Sent: sent, Recv: sent + 3e6, Status: status, Err: map[bool]string{true: "reset"}[status == 0]})
	}
	d := reports.NewDocStream(rec, policy.Default())
	for i := range events {
		d.Add(&events[i], uint64(i))
	}
	if d.Again() {
		for i := range events {
			d.AddAgain(&events[i], uint64(i))
		}
	}
	doc := d.Document(rec, []checks.Result{{Name: "oversell", Verdict: checks.Pass}})
	fmt.Printf("%+v\n", doc.Stats)
	fmt.Println(doc.Latency.P50, doc.Errors[0].Status, doc.Errors[0].Err, doc.Keys[0].Key, doc.Timeline.Keys[0].Requests)
	// Output:
	// {Requests:4 Admitted:2 Rejected:1 Errors:1}
	// 3000000 0 reset free-a 4
}

// The second pass can read each event's Compact form, made in the first
// pass right after Add (a caller keeps them in a few bytes each instead of
// reading the history again), when the run is too long for its requests
// to be drawn one by one (Lanes): the same document as AddAgain's.
func ExampleDocStream_AddCompact() {
	rec := &history.History{End: &history.End{Elapsed: 4e9}}
	d := reports.NewDocStream(rec, policy.Default())
	var kept []reports.Compact
	for i := range reports.MaxLaneOps + 1 {
		sent := int64(i) * 1e6
		e := history.Event{ID: uint64(i + 1), Key: []string{"free-a", "free-b"}[i%2], Sent: sent, Recv: sent + 2e6, Status: 200}
		d.Add(&e, uint64(i))
		kept = append(kept, d.Compact(&e))
	}
	if d.Again() && !d.Lanes() {
		for _, c := range kept {
			d.AddCompact(c)
		}
	}
	doc := d.Document(rec, []checks.Result{{Name: "oversell", Verdict: checks.Pass}})
	fmt.Println(kept[1].Key, doc.Latency.P99, len(doc.Timeline.Keys), doc.Timeline.Keys[0].Requests)
	// Output:
	// 1 2000000 2 1251
}
