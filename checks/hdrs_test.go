package checks

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// allOther marks every header of a hdr as hOther: the checks then read
// every event, as they did before the table.
const allOther = hOther<<sXLimit | hOther<<sXRemaining | hOther<<sXReset | hOther<<sRL | hOther<<sPol

// TestHeaderTableMatchesEvents: every check gives exactly the same result
// (verdicts, figures, evidence) from the header table as from the events,
// on a history mixing well-formed headers with every form the table leaves
// to the events.
func TestHeaderTableMatchesEvents(t *testing.T) {
	hc := *benchHistory(20_000, 50)
	h := &hc
	h.Events = append([]history.Event(nil), h.Events...)
	for i := range h.Events {
		e := &h.Events[i]
		if i%3 == 0 {
			e.Key = "paid-" + e.Key[len("free-"):]
		}
		switch i % 29 {
		case 1:
			e.XLimit = "abc"
		case 2:
			e.XLimit = " 10"
		case 3:
			e.XLimit = "-3"
		case 4:
			e.XLimit = "99999999999"
		case 5:
			e.XRemaining = "-1"
		case 6:
			e.XRemaining = "11"
		case 7:
			e.XRemaining = ""
		case 8:
			e.XReset = "500"
		case 9:
			e.XReset = "x"
		case 10:
			e.XLimit = "100"
		case 11:
			e.XLimit = ""
		case 12:
			e.RateLimit = `"a";r=1;t=1, "b";r=2;t=1`
		case 13:
			e.RateLimit = `"x";r=3;t=1`
		case 14:
			e.RateLimitPolicy = `"k";q=100;w=20`
		case 15:
			e.RateLimitPolicy = `"k";q=10;w=2, "j";q=100;w=2`
		case 16:
			e.RateLimit = `"k";r=99;t=1`
		case 17:
			e.RateLimit = `garbage`
		case 18:
			e.RateLimitPolicy = ""
		case 19:
			e.XLimit, e.RateLimitPolicy = "", `"k";q=100;w=2`
		case 20:
			e.Variant = "K"
		case 21:
			e.Fallback = "open"
		case 22:
			e.RateLimit = ""
		case 23:
			e.XRemaining = "3000000000"
		}
		if e.RateLimit == "" && i%29 != 22 {
			e.RateLimit = fmt.Sprintf(`"k";r=%s;t=1`, e.XRemaining)
			if e.XRemaining == "" || e.XRemaining[0] == '-' {
				e.RateLimit = `"k";r=2;t=1`
			}
		}
		if e.RateLimitPolicy == "" && i%29 != 18 {
			e.RateLimitPolicy = `"k";q=10;w=2`
		}
	}
	for _, tc := range []struct {
		name  string
		setup func(p *policy.Policy)
	}{
		{"both headers", func(p *policy.Policy) { p.Headers.RateLimit, p.Headers.XRateLimit = policy.RateLimitStructured, true }},
		{"x only", func(p *policy.Policy) { p.Headers.RateLimit = policy.RateLimitNone }},
		{"ratelimit only", func(p *policy.Policy) { p.Headers.XRateLimit = false }},
		{"epoch", func(p *policy.Policy) { p.Headers.RateLimit, p.Headers.XReset = policy.RateLimitStructured, "epoch" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := policy.Default()
			tc.setup(p)
			o := Options{Slack: time.Millisecond, MaxEvidence: 50}
			ixf := newIndex(h, p, o)
			plain := 0
			for i := range ixf.hdrs {
				if ixf.hdrs[i].st&0x3ff == hInt<<sXLimit|hInt<<sXRemaining|hInt<<sXReset|hInt<<sRL|hInt<<sPol {
					plain++
				}
			}
			if plain < len(h.Events)/2 {
				t.Fatalf("only %d of %d events have every header in the table", plain, len(h.Events))
			}
			fast := runEvery(ixf)
			ix := newIndex(h, p, o)
			for i := range ix.hdrs {
				ix.hdrs[i].st = allOther
			}
			slow := runEvery(ix)
			if !reflect.DeepEqual(fast, slow) {
				for i := range fast {
					if !reflect.DeepEqual(fast[i], slow[i]) {
						t.Errorf("%s differs:\ntable  %+v\nevents %+v", fast[i].Name, fast[i], slow[i])
					}
				}
			}
			for _, r := range fast {
				if r.Name == "token-bounds" || r.Name == "headers" || r.Name == "isolation" {
					if r.Verdict != Fail {
						t.Errorf("%s: the mix should fail it: %+v", r.Name, r)
					}
				}
			}
		})
	}
}

func runEvery(ix *index) []Result {
	var out []Result
	for _, c := range registry {
		r := c.run(ix)
		r.Name = c.name
		out = append(out, r)
	}
	return out
}

// TestIndexPartsAgree: the index built in parallel parts is the one built
// in a single pass, and every check says the same on both.
func TestIndexPartsAgree(t *testing.T) {
	hc := *benchHistory(20_000, 300)
	h := &hc
	h.Events = append([]history.Event(nil), h.Events...)
	for i := range h.Events {
		e := &h.Events[i]
		if i%5 == 0 {
			e.Key = "paid-" + e.Key[len("free-"):]
		}
		if i%7 == 0 {
			e.Tier = "free"
		}
		if i%11 == 0 {
			e.Tier = "paid"
		}
		e.Instance = i % 3
		if i > 15_000 {
			e.Phase = "region-b"
		}
	}
	p := policy.Default()
	o := Options{Slack: time.Millisecond}
	defer func(f func() int, m int) { indexParts, minIndexPart = f, m }(indexParts, minIndexPart)
	minIndexPart = 1
	indexParts = func() int { return 1 }
	one := newIndex(h, p, o)
	want := runEvery(one)
	for _, parts := range []int{2, 3, 7} {
		indexParts = func() int { return parts }
		ix := newIndex(h, p, o)
		if !reflect.DeepEqual(one.groups, ix.groups) || !reflect.DeepEqual(one.recs, ix.recs) || !reflect.DeepEqual(one.gid, ix.gid) ||
			!reflect.DeepEqual(one.pos, ix.pos) || !reflect.DeepEqual(one.hdrs, ix.hdrs) ||
			one.insts != ix.insts || one.maxLat != ix.maxLat || one.maxRecv != ix.maxRecv || one.regionPhase != ix.regionPhase || one.untiered != ix.untiered {
			t.Fatalf("%d parts: the index differs", parts)
		}
		if got := runEvery(ix); !reflect.DeepEqual(want, got) {
			t.Fatalf("%d parts: results differ", parts)
		}
	}
	if !one.regionPhase || one.insts != 3 {
		t.Fatalf("regionPhase %v, insts %d", one.regionPhase, one.insts)
	}
}
