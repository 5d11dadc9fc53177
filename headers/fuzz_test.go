package headers

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// The parsers never panic and never accept a negative count, quota,
// window or delay. Seed corpora live in testdata/fuzz.

func FuzzParseRateLimit(f *testing.F) {
	for _, s := range []string{`"free";r=0;t=1`, `"a";r=5, "b";r=50;t=30;pk=:Y2xpZW50:`, `("a" 1);r=1`, `"x";r=?1;d=@123;s=%"caf%c3%a9"`, `"f";r=1.25`, `%"caf%c3%a9";r=1`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		items, err := ParseRateLimit(s)
		if err == nil {
			for _, it := range items {
				if it.Remaining < 0 || it.Reset < -1 {
					t.Fatalf("%q: negative value accepted: %+v", s, it)
				}
			}
		}
	})
}

func FuzzParseRateLimitPolicy(f *testing.F) {
	for _, s := range []string{`"free";q=10;w=2`, `"day";q=1000;qu="requests";w=86400, "m";q=1`, `"p";q=1;pk=:AA==:`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		items, err := ParseRateLimitPolicy(s)
		if err == nil {
			for _, it := range items {
				if it.Quota < 0 || it.Window == 0 || it.Window < -1 {
					t.Fatalf("%q: invalid item accepted: %+v", s, it)
				}
			}
		}
	})
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"0", "120", "Wed, 01 Jan 2025 00:00:30 GMT", "Wednesday, 01-Jan-25 00:01:00 GMT", "Wed Jan  1 00:00:05 2025", "-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseRetryAfter(s, now)
		if d < 0 || (err != nil && d != 0) {
			t.Fatalf("%q: delay %s, error %v", s, d, err)
		}
	})
}

// FuzzRead: Read of every generation over arbitrary fields never panics;
// a Valid number is never negative and an Invalid one says why.
func FuzzRead(f *testing.F) {
	f.Add(`limit=10, remaining=1, reset=2`, `10;w=2`, "10, 10;w=1", "1", "2")
	f.Add(`"free";r=1;t=2`, `"free";q=10;w=2`, "", "", "")
	f.Add(`"a";r=1, "b";r=2`, `"b";q=3, "a";q=4;w=0`, "x", "-1", "1.5")
	f.Fuzz(func(t *testing.T, rl, pol, lim, rem, reset string) {
		fs := Fields{RateLimit: rl, RateLimitPolicy: pol, RateLimitLimit: lim, RateLimitRemaining: rem, RateLimitReset: reset}
		for _, g := range []Generation{Detect(fs), Structured, Dictionary, Split} {
			o := Read(g, fs)
			for _, v := range []Value{o.Limit, o.Remaining, o.Reset, o.Window} {
				if v.N < 0 || (v.State == Invalid) != (v.Err != nil) {
					t.Fatalf("%s %+v: %+v", g, fs, v)
				}
			}
		}
	})
}

// FuzzNameRoundTrip: any policy name the structured writer sends reads
// back unchanged (invalid UTF-8 becomes U+FFFD).
func FuzzNameRoundTrip(f *testing.F) {
	for _, n := range names {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, name string) {
		h := http.Header{}
		if err := (Writer{Generation: Structured}).Write(h, Quota{Policy: name, Limit: 1, Window: time.Second}, now); err != nil {
			t.Fatal(err)
		}
		o := Read(Structured, FromHTTP(h))
		if want := strings.ToValidUTF8(name, "\uFFFD"); o.Name != want || !o.Limit.Valid() {
			t.Fatalf("%q came back as %q (%+v)", name, o.Name, o)
		}
	})
}
