package checks

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/rlverify/rlverify/headers"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// allOther marks every header of a hdr as hOther: the checks then read
// every event, as they would without the table.
const allOther = hOther<<sXLimit | hOther<<sXRemaining | hOther<<sXReset | hOther<<sRL | hOther<<sPol

// headerMix is a history mixing well-formed rate-limit headers of
// generation g with every form the table leaves to the events.
func headerMix(g headers.Generation) *history.History {
	n := 20_000
	if raceEnabled {
		n = 4_000 // still every one of the 29 header variants, 100 times over
	}
	hc := *benchHistory(n, 50)
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
		case 20:
			e.Variant = "K"
		case 21:
			e.Fallback = "open"
		case 23:
			e.XRemaining = "3000000000"
		}
		rem := e.XRemaining
		if rem == "" || rem[0] == '-' || len(rem) > 2 {
			rem = "2"
		}
		pol := map[headers.Generation]string{headers.Structured: `"k";q=10;w=2`, headers.Dictionary: "10;w=2", headers.Split: "10;w=2"}[g]
		switch g {
		case headers.Structured:
			e.RateLimit = fmt.Sprintf(`"k";r=%s;t=1`, rem)
		case headers.Dictionary:
			e.RateLimit = fmt.Sprintf(`limit=10, remaining=%s, reset=1`, rem)
		case headers.Split:
			e.RateLimitLimit, e.RateLimitRemaining, e.RateLimitReset = "10", rem, "1"
		}
		if i%2 == 0 || g == headers.Structured {
			e.RateLimitPolicy = pol
		}
		// The generation's own odd and wrong forms.
		switch j := i % 31; g {
		case headers.Structured:
			e.RateLimit, e.RateLimitPolicy = pick(j, e.RateLimit, e.RateLimitPolicy, []string{
				`"a";r=1;t=1, "b";r=2;t=1`, "", `"x";r=3;t=1`, "", "", `"k";q=100;w=20`, "", `"k";q=10;w=2, "j";q=100;w=2`,
				`"k";r=99;t=1`, "", `garbage`, "", "-", "", "", "-", `"k";r=1;t=500`, "", `"k";r=1`, `"k";q=10`,
				`"k";r=3000000000;t=1`, "", "", `"k";q=10;w=2`})
		case headers.Dictionary:
			e.RateLimit, e.RateLimitPolicy = pick(j, e.RateLimit, e.RateLimitPolicy, []string{
				`limit=10, remaining=3, reset=1, limit=20`, "", `limit=10, reset=1`, "", `remaining=2, reset=1`, "",
				`limit=100, remaining=99, reset=1`, "", `limit=10, remaining=11, reset=1`, "", `limit=10, remaining=1, reset=500`, "",
				`garbage`, "", "", `10;w=2, 100;w=2`, "", `10;w=20`, "", `10`, `limit=3000000000, remaining=1, reset=1`, "",
				"-", "", `limit=10, remaining=1, reset=1;x=2`, `10;w=2;comment="x"`})
		case headers.Split:
			switch j {
			case 1:
				e.RateLimitLimit = "10, 10;w=2"
			case 2:
				e.RateLimitLimit = ""
			case 3:
				e.RateLimitRemaining = "x"
			case 4:
				e.RateLimitReset = "500"
			case 5:
				e.RateLimitLimit = "100"
			case 6:
				e.RateLimitRemaining = "11"
			case 7:
				e.RateLimitReset = "-1"
			case 8:
				e.RateLimitLimit = "3000000000"
			case 9:
				e.RateLimitPolicy = "10;w=2, 100;w=2"
			case 10:
				e.RateLimitPolicy = "10;w=20"
			case 11:
				e.RateLimitLimit, e.RateLimitRemaining, e.RateLimitReset = "", "", ""
			case 12:
				e.RateLimitRemaining = ""
			case 13:
				e.RateLimitLimit = "10, 100;w=2"
			}
		}
	}
	return h
}

// pick replaces rl and pol by the pair at j of alts ("" keeps, "-" clears).
func pick(j int, rl, pol string, alts []string) (string, string) {
	if 2*j+1 >= len(alts) {
		return rl, pol
	}
	set := func(cur, v string) string {
		switch v {
		case "":
			return cur
		case "-":
			return ""
		}
		return v
	}
	return set(rl, alts[2*j]), set(pol, alts[2*j+1])
}

// TestHeaderTableMatchesEvents: every check gives exactly the same result
// (verdicts, figures, evidence) from the header table as from the events,
// on histories of every generation mixing well-formed headers with every
// form the table leaves to the events.
func TestHeaderTableMatchesEvents(t *testing.T) {
	for _, g := range []headers.Generation{headers.Structured, headers.Dictionary, headers.Split} {
		h := headerMix(g)
		for _, tc := range []struct {
			name  string
			setup func(p *policy.Policy)
		}{
			{"both headers", func(p *policy.Policy) { p.Headers.XRateLimit = true }},
			{"x only", func(p *policy.Policy) { p.Headers.RateLimit = policy.RateLimitNone }},
			{"ratelimit only", func(p *policy.Policy) { p.Headers.XRateLimit = false }},
			{"epoch", func(p *policy.Policy) { p.Headers.XReset = "epoch" }},
		} {
			t.Run(string(g)+"/"+tc.name, func(t *testing.T) {
				p := policy.Default()
				p.Headers.RateLimit = policy.RateLimitHeaders(g)
				tc.setup(p)
				o := Options{Slack: time.Millisecond, MaxEvidence: 50}
				ixf := newIndex(h, p, o)
				want := uint16(hInt<<sXLimit | hInt<<sXRemaining | hInt<<sXReset)
				if p.Headers.RateLimit.Declared() {
					want |= hInt<<sRL | 1<<sLim
				}
				plain := 0
				for i := range ixf.hdrs {
					if ixf.hdrs[i].st&^(3<<sPol) == want {
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
	hc := *benchHistory(6_000, 100)
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
		if i > 4_500 {
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

// TestGenerationNamesAgree: the headers package spells the RateLimit
// generations and the X-RateLimit-Reset forms as the policy does, so the
// checks convert one into the other.
func TestGenerationNamesAgree(t *testing.T) {
	for _, g := range []policy.RateLimitHeaders{policy.RateLimitNone, policy.RateLimitStructured, policy.RateLimitDictionary, policy.RateLimitSplit} {
		var back policy.RateLimitHeaders
		if err := back.UnmarshalJSON([]byte(`"` + string(headers.Generation(g)) + `"`)); err != nil || back != g {
			t.Errorf("generation %q: %v", g, err)
		}
	}
	for _, f := range []headers.ResetForm{headers.ResetRelative, headers.ResetEpoch, headers.ResetDate} {
		p := policy.Default()
		p.Headers.XReset = string(f)
		if err := p.Validate(); err != nil {
			t.Errorf("reset form %q: %v", f, err)
		}
	}
}
