package policy

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// FuzzParsePolicy feeds arbitrary bytes to Parse. It must never panic; when
// it accepts a document, the policy it returns validates again unchanged
// (normalisation is idempotent), and writing it back as YAML and parsing
// that gives the same policy.
func FuzzParsePolicy(f *testing.F) {
	f.Add(DefaultYAML())
	f.Add([]byte("name: p\ntiers:\n  - name: a\n    limits: [{limit: 100, window: 1m}]\n"))
	f.Add([]byte("name: p\ntiers:\n  - name: a\n    limits: [{algorithm: sliding-counter, limit: 5, window: 1s, error_bound: 0.5}]\nglobal: {capacity: 3, rate: 1/min}\n"))
	f.Add([]byte("tiers: &t [{name: a, limits: [{capacity: 1, rate: 1}]}]\nfailure: {mode: local, local_share: 0.5}\n"))
	f.Add([]byte("a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n"))
	f.Add([]byte("name: p\ntiers:\n  - name: a\n    limits: [{capacity: 10, rate: 5/s, limit: 3, window: 1s}]\n"))
	f.Add([]byte("\x00\xff{["))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("fuzz.yaml", data)
		if err != nil {
			if p != nil {
				t.Fatalf("error %v with a non-nil policy", err)
			}
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		again := p.Clone()
		if err := again.Validate(); err != nil {
			t.Fatalf("accepted policy does not validate again: %v\n%s", err, data)
		}
		if !reflect.DeepEqual(p, again) {
			t.Fatalf("validating again changed the policy:\n%+v\n%+v", p, again)
		}
		out, err := yaml.Marshal(p)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		back, err := Parse("fuzz.yaml", out)
		if err != nil {
			t.Fatalf("accepted policy written back does not parse: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(p, back) {
			t.Fatalf("YAML round trip changed the policy:\n%+v\n%+v\n%s", p, back, out)
		}
	})
}

// FuzzParseRate: ParseRate never panics and never returns a non-finite
// rate without an error.
func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"5/s", "100/min", "10000/m", "3600/h", "86400/day", "2.5", "10/2s", "1/1ns", "-3/s", "1e308/1ns", "NaN", "5/1d", " 7 / sec "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRate(s)
		if err != nil {
			if r != 0 {
				t.Fatalf("%q: error %v with rate %g", s, err, r)
			}
			return
		}
		if math.IsNaN(r) || math.IsInf(r, 0) {
			t.Fatalf("%q: accepted non-finite rate %g", s, r)
		}
	})
}

// FuzzParseDuration: ParseDuration never panics, rejects what it cannot
// represent, and its results survive the YAML round trip through
// Duration.String.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"1.5s", "100ms", "1m", "1d", "0.5d", "90", "1e9", "-1s", "1h2m3.5s", "NaNd", "infd", "1e300", "0x10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			return
		}
		if strings.HasSuffix(strings.TrimSpace(s), "d") && d < 0 {
			t.Fatalf("%q: a day count gave negative duration %s", s, d)
		}
		if d == time.Duration(math.MinInt64) {
			t.Fatalf("%q: accepted an unrepresentable duration", s)
		}
		back, err := ParseDuration(Duration(d).String())
		if err != nil || back != d {
			t.Fatalf("%q → %s → %s, %v: does not round trip", s, d, back, err)
		}
	})
}
