package history

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/headers"
)

func TestScrubber(t *testing.T) {
	var s Scrubber
	require.Equal(t, "a secret-key b", s.String("a secret-key b"), "the zero value scrubs nothing")
	s.Add("secret-key", "S1")
	s.Add("secret-key-long", "S2")
	s.Add("ab", "S3")
	for in, want := range map[string]string{
		"x secret-key y":      "x S1 y",
		"secret-key-long":     "S2",
		"SECRET-KEY;q=1":      "S1;q=1",
		"api_key=secret-key&": "api_key=S1&",
		"ab":                  "S3",
		"abc 10 ab":           "abc 10 ab", // shorter than MinScrubbed: only a whole value
	} {
		require.Equal(t, want, s.String(in), in)
	}
	e := Event{Key: "secret-key", Fields: headers.Fields{XLimit: "secret-key", RateLimitPolicy: `"secret-key";q=3`}, Err: "Get http://h/?k=secret-key: refused", Path: "/x?k=secret-key"}
	s.Event(&e)
	require.Equal(t, Event{Key: "S1", Fields: headers.Fields{XLimit: "S1", RateLimitPolicy: `"S1";q=3`}, Err: "Get http://h/?k=S1: refused", Path: "/x?k=S1"}, e)
}

// The engine records events from many goroutines while keys are handed out.
func TestScrubberIsSafeForConcurrentUse(t *testing.T) {
	var s Scrubber
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				key := fmt.Sprintf("key-%d-%d", g, i)
				s.Add(key, "S")
				require.Equal(t, "x S", s.String("x "+key))
			}
		}()
	}
	wg.Wait()
}
