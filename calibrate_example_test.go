package rlverify_test

import (
	"fmt"
	"strings"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/calibrate"
	"github.com/rlverify/rlverify/policy"
)

// ExampleCalibrate reads an nginx access log whose last field is the API
// key: one key loads a page of 7 requests every minute. The candidate
// policy's bucket of 5 refuses 2 of each page; the smallest capacity that
// refuses none is 7, and no rate helps a bucket of 5 against 7 requests
// logged in the same second.
func ExampleCalibrate() {
	var log strings.Builder
	for m := 0; m < 30; m++ {
		for i := 0; i < 7; i++ {
			fmt.Fprintf(&log, `203.0.113.9 - - [01/Dec/2026:10:%02d:15 +0000] "GET /v1/page/%d HTTP/1.1" 200 512 "-" "Mozilla/5.0" "free-shop"`+"\n", m, i)
		}
	}
	p, err := policy.Parse("candidate.yaml", []byte(`
name: candidate
version: v1
tiers:
  - name: free
    key_prefix: "free-"
    limits:
      - {algorithm: token-bucket, capacity: 5, rate: 10/min}
`))
	if err != nil {
		panic(err)
	}
	r, err := rlverify.Calibrate(rlverify.CalibrateOptions{
		Inputs:    []calibrate.Input{{Name: "access.log", R: strings.NewReader(log.String())}},
		Read:      calibrate.ReadOptions{Format: calibrate.Combined, KeyField: "extra1"},
		Calibrate: calibrate.Options{Policy: p, MaxRefused: 0.001},
	})
	if err != nil {
		panic(err)
	}
	free := r.Tiers[0]
	fmt.Printf("refused: %d of %d\n", free.Refused.Legit, free.Requests)
	for _, rec := range free.Recommended {
		switch {
		case rec.Algorithm != policy.TokenBucket:
		case rec.Found:
			fmt.Printf("%s: %s → %s\n", rec.Param, rec.Declared, rec.Value)
		default:
			fmt.Printf("%s: %s → none: %s\n", rec.Param, rec.Declared, rec.Why)
		}
	}
	// Output:
	// refused: 60 of 210
	// capacity: 5 → 7
	// rate: 10/min → none: no rate meets the target at capacity 5: the capacity itself is too small
}
