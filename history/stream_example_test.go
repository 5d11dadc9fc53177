package history_test

import (
	"fmt"
	"strings"

	"github.com/rlverify/rlverify/headers"
	"github.com/rlverify/rlverify/history"
)

// A history written in completion order (request 2, sent later, answered
// first) comes out of a Stream in send order.
func ExampleNewStream() {
	file := `{"t":"run","version":1,"id":"r","start":"2026-01-01T00:00:00Z"}
{"t":"e","id":2,"key":"k","inst":0,"phase":"p","intended":20,"sent":20,"recv":30,"status":200}
{"t":"e","id":1,"key":"k","inst":0,"phase":"p","intended":10,"sent":10,"recv":90,"status":429,"retry_after":"1"}
{"t":"end","elapsed":100,"requests":2}
`
	st := history.NewStream("h.jsonl", strings.NewReader(file), history.StreamOptions{})
	for st.Next() {
		e := st.Event()
		fmt.Println(e.ID, e.Sent, e.Status)
	}
	if err := st.Err(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("elapsed", st.History().End.Elapsed)
	// Output:
	// 1 10 429
	// 2 20 200
	// elapsed 100
}

// ScanRecords reads a history's records without decoding its events (it
// counts them) and without hashing the file: what decides how to judge it
// before a Stream reads the events (whose History says the integrity).
func ExampleScanRecords() {
	file := `{"t":"run","version":1,"id":"r","start":"2026-01-01T00:00:00Z"}
{"t":"e","id":1,"key":"k","inst":0,"phase":"p","intended":10,"sent":10,"recv":90,"status":429,"retry_after":"1"}
{"t":"fault","kind":"store-down","start":20,"end":60}
{"t":"e","id":2,"key":"k","inst":0,"phase":"p","intended":20,"sent":20,"recv":30,"status":200}
{"t":"end","elapsed":100,"requests":2}
`
	h, n, err := history.ScanRecords("h.jsonl", strings.NewReader(file))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(n, h.Run.ID, h.Faults[0].Kind, h.End.Elapsed, h.Integrity == "")
	// Output:
	// 2 r store-down 100 true
}

// An EventEncoder keeps a stream's events in the binary form, each record
// relative to the one before; an EventDecoder reads them back in the same
// order, with their file positions (what a second pass over a streamed
// history reads instead of the JSON lines).
func ExampleEventEncoder() {
	evs := []history.Event{
		{T: history.TypeEvent, ID: 1, Key: "free-a", Sent: 1_000_000, Recv: 3_000_000, Status: 200},
		{T: history.TypeEvent, ID: 2, Key: "free-a", Sent: 1_500_000, Recv: 2_000_000, Status: 429, Fields: headers.Fields{RetryAfter: "1"}},
	}
	var enc history.EventEncoder
	var recs [][]byte
	for i := range evs {
		recs = append(recs, enc.AppendEvent(nil, &evs[i], uint64(i)))
	}
	fmt.Println("bytes:", len(recs[0]), len(recs[1]))
	dec := history.NewEventDecoder()
	for _, rec := range recs {
		var e history.Event
		seq, err := dec.DecodeEvent(rec, &e)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%d %d %s %d %d %d %q\n", seq, e.ID, e.Key, e.Sent, e.Recv, e.Status, e.RetryAfter)
	}
	// Output:
	// bytes: 26 19
	// 0 1 free-a 1000000 3000000 200 ""
	// 1 2 free-a 1500000 2000000 429 "1"
}
