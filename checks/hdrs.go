package checks

import (
	"math"

	"github.com/rlverify/rlverify/history"
)

// The shared table of parsed rate-limit headers.
//
// token-bounds, headers and isolation judge every response's rate-limit
// headers in file order. Reading them from the Events streams the whole
// history (256 B an event) through the cache once per check and parses the
// same strings three times, so newIndex parses them once, in its pass over
// the events, into one compact hdr per event (in file order, like the
// Events). Each distinct structured-field string is parsed once (hdrParser
// caches by string; the history decoder interns them, so repeats are cheap).
//
// The table holds only the common forms: a header that is absent, or that
// holds what the checks read from it as a small integer. Anything else (an
// invalid value, a value past int32, a RateLimit list of several items, …)
// is marked hOther, and the checks then read the event and judge it exactly
// as before, so verdicts and evidence do not depend on the table.

// States of one header in hdr.st.
const (
	hAbsent = 0 // the header is empty
	hInt    = 1 // the value is in the hdr
	hOther  = 2 // anything else: read the event
)

// Bit positions of the headers' states in hdr.st (two bits each).
const (
	sXLimit = 2 * iota
	sXRemaining
	sXReset
	sRL  // RateLimit: one item; r in rlR
	sPol // RateLimit-Policy: one item; q in polQ, w in polW
	// sSameName is a bit: RateLimit's item names RateLimit-Policy's item.
	sSameName
)

// Bits of hdr.ev.
const (
	evOutMask  = 3      // history.Outcome
	evJudged   = 1 << 2 // judgedResponse of its record
	evVariant  = 1 << 3
	evFallback = 1 << 4
)

// hdr is the parsed rate-limit headers of one event.
type hdr struct {
	xlim, xrem, xreset int32
	rlR                int32
	polQ, polW         int32
	st                 uint16
	ev                 uint8
}

func (h *hdr) state(at uint) uint8 { return uint8(h.st>>at) & 3 }

func (h *hdr) out() history.Outcome { return history.Outcome(h.ev & evOutMask) }

// hdrParser builds hdrs, caching the structured fields by string.
type hdrParser struct {
	rl  map[string]rlEntry
	pol map[string]polEntry
	// The last strings seen, before the maps.
	lastRL, lastPol string
	lastRLE         rlEntry
	lastPolE        polEntry
	haveRL, havePol bool
}

type rlEntry struct {
	ok   bool
	r    int32
	name string
}

type polEntry struct {
	ok   bool
	q, w int32
	name string
}

func newHdrParser() *hdrParser {
	return &hdrParser{rl: map[string]rlEntry{}, pol: map[string]polEntry{}}
}

func fits32(v int64) bool { return v >= math.MinInt32 && v <= math.MaxInt32 }

// xInt parses an X-RateLimit-* value as parseInt does: state and value.
func xInt(s string) (uint16, int32) {
	if s == "" {
		return hAbsent, 0
	}
	if len(s) <= 9 {
		v := int32(0)
		i := 0
		for ; i < len(s); i++ {
			c := s[i]
			if c < '0' || c > '9' {
				break
			}
			v = v*10 + int32(c-'0')
		}
		if i == len(s) {
			return hInt, v
		}
	}
	v, err := parseInt(s)
	if err != nil || !fits32(v) {
		return hOther, 0
	}
	return hInt, int32(v)
}

func (p *hdrParser) rateLimit(s string) rlEntry {
	if p.haveRL && s == p.lastRL {
		return p.lastRLE
	}
	en, ok := p.rl[s]
	if !ok {
		items, err := ParseRateLimit(s)
		if err == nil && len(items) == 1 && fits32(items[0].Remaining) {
			en = rlEntry{ok: true, r: int32(items[0].Remaining), name: items[0].Policy}
		}
		if len(p.rl) < 1<<16 {
			p.rl[s] = en
		}
	}
	p.lastRL, p.lastRLE, p.haveRL = s, en, true
	return en
}

func (p *hdrParser) policy(s string) polEntry {
	if p.havePol && s == p.lastPol {
		return p.lastPolE
	}
	en, ok := p.pol[s]
	if !ok {
		items, err := ParseRateLimitPolicy(s)
		if err == nil && len(items) == 1 && fits32(items[0].Quota) && fits32(items[0].Window) {
			en = polEntry{ok: true, q: int32(items[0].Quota), w: int32(items[0].Window), name: items[0].Policy}
		}
		if len(p.pol) < 1<<16 {
			p.pol[s] = en
		}
	}
	p.lastPol, p.lastPolE, p.havePol = s, en, true
	return en
}

// parse builds the hdr of e, whose record is r.
func (p *hdrParser) parse(ix *index, e *history.Event, r rec) hdr {
	var h hdr
	h.ev = uint8(r.out)
	if ix.judgedResponse(r) {
		h.ev |= evJudged
	}
	if e.Variant != "" {
		h.ev |= evVariant
	}
	if e.Fallback != "" {
		h.ev |= evFallback
	}
	var st uint16
	st, h.xlim = xInt(e.XLimit)
	h.st = st << sXLimit
	st, h.xrem = xInt(e.XRemaining)
	h.st |= st << sXRemaining
	st, h.xreset = xInt(e.XReset)
	h.st |= st << sXReset
	var rl rlEntry
	if e.RateLimit != "" {
		rl = p.rateLimit(e.RateLimit)
		if rl.ok {
			h.rlR = rl.r
			h.st |= hInt << sRL
		} else {
			h.st |= hOther << sRL
		}
	}
	if e.RateLimitPolicy != "" {
		pol := p.policy(e.RateLimitPolicy)
		if pol.ok {
			h.polQ, h.polW = pol.q, pol.w
			h.st |= hInt << sPol
			if rl.ok && rl.name == pol.name {
				h.st |= 1 << sSameName
			}
		} else {
			h.st |= hOther << sPol
		}
	}
	return h
}
