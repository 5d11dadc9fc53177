package checks_test

import (
	"fmt"
	"strings"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// Judging a history as a stream: the records first (history.ReadRecords),
// then every event in send order. The second response reports more
// remaining than the bucket can have refilled since the first, and the
// first less than a whole quota less the one request sent.
func ExampleNewStreamer() {
	file := `{"t":"run","version":1,"id":"r","start":"2026-01-01T00:00:00Z"}
{"t":"e","id":1,"key":"free-a","inst":0,"phase":"p","intended":0,"sent":0,"recv":1000,"status":200,"x_limit":"10","x_remaining":"2","x_reset":"2"}
{"t":"e","id":2,"key":"free-a","inst":0,"phase":"p","intended":2000,"sent":2000,"recv":3000,"status":200,"x_limit":"10","x_remaining":"8","x_reset":"1"}
{"t":"end","elapsed":3000,"requests":2}
`
	pol, err := policy.Parse("p.yaml", []byte(`name: p
version: v1
action: api
tiers:
  - name: free
    key_prefix: "free-"
    limits:
      - {algorithm: token-bucket, capacity: 10, rate: 5/s}
default_tier: free
headers: {retry_after: true, ratelimit: false, x_ratelimit: true, x_ratelimit_reset: relative}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	rec, _, err := history.ReadRecords("h.jsonl", strings.NewReader(file))
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := checks.NewStreamer(rec, pol, checks.Options{Only: []string{"token-bounds"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	st := history.NewStream("h.jsonl", strings.NewReader(file), history.StreamOptions{})
	for st.Next() {
		s.Add(st.Event(), st.Seq())
	}
	if err := st.Err(); err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range s.Results() {
		fmt.Println(r.Name, r.Verdict, r.Summary)
		for _, e := range r.Evidence {
			fmt.Println(e.Message)
		}
	}
	// Output:
	// token-bounds fail 2 responses reported impossible remaining counts
	// request 2 of key free-a reported 8 remaining, but request 1 (surely decided earlier) reported 2 and the bucket can refill only 0 tokens in between
	// request 1 of key free-a reported 2 remaining, but at most 1 of the key's requests could have consumed by its decision from a whole quota of 10, so at least 9 remained
}

// Oversell streams in two passes: the first keeps nothing of what it can
// clear, and Again asks for the events a second time when a key's
// admissions could not be cleared. Here a bucket of 2 admits 3 requests
// sent at once.
func ExampleStreamer_Again() {
	file := `{"t":"run","version":1,"id":"r","start":"2026-01-01T00:00:00Z"}
{"t":"e","id":1,"key":"free-a","inst":0,"phase":"p","intended":0,"sent":0,"recv":1000,"status":200}
{"t":"e","id":2,"key":"free-a","inst":0,"phase":"p","intended":0,"sent":0,"recv":2000,"status":200}
{"t":"e","id":3,"key":"free-a","inst":0,"phase":"p","intended":0,"sent":0,"recv":3000,"status":200}
{"t":"end","elapsed":3000,"requests":3}
`
	pol, err := policy.Parse("p.yaml", []byte(`name: p
version: v1
tiers:
  - name: free
    key_prefix: "free-"
    limits:
      - {algorithm: token-bucket, capacity: 2, rate: 1/s}
default_tier: free
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	rec, _, err := history.ReadRecords("h.jsonl", strings.NewReader(file))
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := checks.NewStreamer(rec, pol, checks.Options{Only: []string{"oversell"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	pass := func(add func(*history.Event, uint64)) error {
		st := history.NewStream("h.jsonl", strings.NewReader(file), history.StreamOptions{})
		for st.Next() {
			add(st.Event(), st.Seq())
		}
		return st.Err()
	}
	if err := pass(s.Add); err != nil {
		fmt.Println(err)
		return
	}
	if s.Again() {
		fmt.Println("second pass")
		if err := pass(s.AddAgain); err != nil {
			fmt.Println(err)
			return
		}
	}
	for _, r := range s.Results() {
		fmt.Println(r.Name, r.Verdict, r.Summary)
		for _, e := range r.Evidence {
			fmt.Println(e.Message, e.RequestIDs)
		}
	}
	// Output:
	// second pass
	// oversell fail 1 proven interval over the limit (worst 1.50× the envelope)
	// 3 requests admitted in 3µs; a bucket of K=2 refilling at 1/s allows at most 2 [1 2 3]
}
