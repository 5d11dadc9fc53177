package headers_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/rlverify/rlverify/headers"
)

// A service writes the fields its policy declares; a client reads them back
// in the same generation.
func ExampleWriter() {
	h := http.Header{}
	w := headers.Writer{Generation: headers.Structured, XRateLimit: true, XReset: headers.ResetRelative}
	q := headers.Quota{Policy: "café", Limit: 10, Window: 2 * time.Second, Remaining: 3, Reset: 1200 * time.Millisecond}
	if err := w.Write(h, q, time.Now()); err != nil {
		panic(err)
	}
	fmt.Println(h.Get(headers.RateLimitPolicy))
	fmt.Println(h.Get(headers.RateLimit))
	fmt.Println(h.Get(headers.XRateLimitReset))
	o := headers.Read(headers.Structured, headers.FromHTTP(h))
	fmt.Println(o.Name, o.Limit.N, o.Remaining.N, o.Reset.N, o.Window.N)
	// Output:
	// %"caf%c3%a9";q=10;w=2
	// %"caf%c3%a9";r=3;t=2
	// 2
	// café 10 3 2 2
}

// Read normalises every generation; a malformed field says why.
func ExampleRead() {
	for _, c := range []struct {
		g headers.Generation
		f headers.Fields
	}{
		{headers.Dictionary, headers.Fields{RateLimit: "limit=10, remaining=4, reset=1", RateLimitPolicy: "10;w=2"}},
		{headers.Split, headers.Fields{RateLimitLimit: "10", RateLimitRemaining: "4", RateLimitReset: "1"}},
		{headers.Split, headers.Fields{RateLimitLimit: "10", RateLimitRemaining: "-4", RateLimitReset: "1"}},
	} {
		o := headers.Read(c.g, c.f)
		if !o.Remaining.Valid() {
			fmt.Println(c.g, o.Remaining.Err)
			continue
		}
		fmt.Println(c.g, o.Limit.N, o.Remaining.N, o.Reset.N)
	}
	// Output:
	// dictionary 10 4 1
	// split 10 4 1
	// split headers: RateLimit-Remaining "-4": remaining must not be negative (-4)
}

// A Retry-After date in the past advises nothing.
func ExampleParseRetryAfter() {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, v := range []string{"3", "Wed, 01 Jan 2025 00:00:30 GMT", "Tue, 31 Dec 2024 23:00:00 GMT"} {
		d, err := headers.ParseRetryAfter(v, now)
		fmt.Println(d, err)
	}
	// Output:
	// 3s <nil>
	// 30s <nil>
	// 0s headers: Retry-After "Tue, 31 Dec 2024 23:00:00 GMT": the HTTP-date is in the past (received Wed, 01 Jan 2025 00:00:00 GMT)
}
