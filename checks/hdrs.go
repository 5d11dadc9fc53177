package checks

import (
	"math"

	"github.com/rlverify/rlverify/headers"
	"github.com/rlverify/rlverify/history"
)

// The shared table of parsed rate-limit headers.
//
// token-bounds, headers and isolation judge every response's rate-limit
// headers in file order. Reading them from the Events streams the whole
// history (256 B an event) through the cache once per check and parses the
// same strings three times, so newIndex parses them once, in its pass over
// the events, into one compact hdr per event (in file order, like the
// Events). Each distinct Structured Field string is parsed once (the caches
// below key by string; the history decoder interns them, so repeats are
// cheap).
//
// The table holds only the common forms: a header that is absent, or that
// holds what the checks read from it as a small integer. Anything else (an
// invalid value, a value past int32, a RateLimit list of several items, a
// draft-07 RateLimit without remaining, …) is marked hOther, and the checks
// then read the event with headers.Read and judge it exactly as the table
// would, so verdicts and evidence do not depend on the table.
//
// The RateLimit fields are those of the generation the policy declares
// (ix.gen); undeclared fields are not read.

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
	// sRL: the counters of the declared generation (RateLimit, or
	// RateLimit-Limit/-Remaining/-Reset): r in rlR, t in rlT (-1 absent).
	sRL
	// sPol: RateLimit-Policy of one item; q in polQ, w in polW (-1 absent).
	sPol
	// sLim is a bit: rlLim holds the limit headers.Read gives (Observed.Limit).
	sLim
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
	rlLim, rlR, rlT    int32
	polQ, polW         int32
	st                 uint16
	ev                 uint8
}

func (h *hdr) state(at uint) uint8 { return uint8(h.st>>at) & 3 }

func (h *hdr) out() history.Outcome { return history.Outcome(h.ev & evOutMask) }

// hasLim reports whether rlLim holds the response's limit.
func (h *hdr) hasLim() bool { return h.st&(1<<sLim) != 0 }

// obsCache memoises headers.Read of the declared generation for the
// events the table leaves to the checks (a run repeats few distinct
// values). Each check keeps its own: checks run concurrently.
type obsCache struct {
	gen headers.Generation
	m   map[headers.Fields]headers.Observed
}

func (ix *index) newObsCache() *obsCache {
	return &obsCache{gen: ix.gen, m: map[headers.Fields]headers.Observed{}}
}

// read returns what e's RateLimit fields state.
func (c *obsCache) read(e *history.Event) headers.Observed {
	f := e.Fields.RateLimitOnly()
	if o, ok := c.m[f]; ok {
		return o
	}
	o := headers.Read(c.gen, f)
	if len(c.m) < 1<<16 {
		c.m[f] = o
	}
	return o
}

// memo memoises a parse by its input: the last input, then a map.
type memo[K comparable, E any] struct {
	m     map[K]E
	last  K
	lastE E
	have  bool
	parse func(K) E
}

func newMemo[K comparable, E any](parse func(K) E) *memo[K, E] {
	return &memo[K, E]{m: map[K]E{}, parse: parse}
}

// get returns the entry of k; it stays valid until the next get.
func (c *memo[K, E]) get(k K) *E {
	if c.have && k == c.last {
		return &c.lastE
	}
	en, ok := c.m[k]
	if !ok {
		en = c.parse(k)
		if len(c.m) < 1<<16 {
			c.m[k] = en
		}
	}
	c.last, c.lastE, c.have = k, en, true
	return &c.lastE
}

// rlEntry is a RateLimit field (structured or dictionary) in the common
// form: one item, or the three counters, every number within int32.
type rlEntry struct {
	ok        bool
	lim, r, t int32 // lim: dictionary only; t -1 when absent
	name      string
}

// polEntry is a RateLimit-Policy of one item within int32.
type polEntry struct {
	ok   bool
	q, w int32
	name string
}

// intEntry is one split-generation counter within int32.
type intEntry struct {
	ok bool
	v  int32
}

// hdrParser builds hdrs for the declared generation.
type hdrParser struct {
	gen            headers.Generation
	rl             *memo[string, rlEntry]
	pol            *memo[string, polEntry]
	lim, rem, rset *memo[string, intEntry]
}

func intOf(n int64, err error) intEntry {
	return intEntry{ok: err == nil && fits32(n), v: int32(n)}
}

func fits32(v int64) bool { return v >= math.MinInt32 && v <= math.MaxInt32 }

func newHdrParser(gen headers.Generation) *hdrParser {
	p := &hdrParser{gen: gen}
	switch gen {
	case headers.Structured:
		p.rl = newMemo(func(s string) rlEntry {
			items, err := headers.ParseRateLimit(s)
			if err != nil || len(items) != 1 || !fits32(items[0].Remaining) || !fits32(items[0].Reset) {
				return rlEntry{}
			}
			return rlEntry{ok: true, r: int32(items[0].Remaining), t: int32(items[0].Reset), name: items[0].Name}
		})
		p.pol = newMemo(func(s string) polEntry { return onePolicy(headers.ParseRateLimitPolicy(s)) })
	case headers.Dictionary:
		p.rl = newMemo(func(s string) rlEntry {
			c, err := headers.ParseRateLimitDictionary(s)
			if err != nil || c.Remaining < 0 || !fits32(c.Limit) || !fits32(c.Remaining) || !fits32(c.Reset) {
				return rlEntry{}
			}
			return rlEntry{ok: true, lim: int32(c.Limit), r: int32(c.Remaining), t: int32(c.Reset)}
		})
		p.pol = newMemo(func(s string) polEntry { return onePolicy(headers.ParseQuotaPolicies(s)) })
	case headers.Split:
		p.lim = newMemo(func(s string) intEntry {
			n, pol, err := headers.ParseRateLimitLimit(s)
			return intEntry{ok: err == nil && len(pol) == 0 && fits32(n), v: int32(n)}
		})
		p.rem = newMemo(func(s string) intEntry { return intOf(headers.ParseRateLimitRemaining(s)) })
		p.rset = newMemo(func(s string) intEntry { return intOf(headers.ParseRateLimitReset(s)) })
		p.pol = newMemo(func(s string) polEntry { return onePolicy(headers.ParseQuotaPolicies(s)) })
	}
	return p
}

func onePolicy(items []headers.PolicyItem, err error) polEntry {
	if err != nil || len(items) != 1 || !fits32(items[0].Quota) || !fits32(items[0].Window) {
		return polEntry{}
	}
	return polEntry{ok: true, q: int32(items[0].Quota), w: int32(items[0].Window), name: items[0].Name}
}

// xInt parses an X-RateLimit-* value as headers.ParseXInt does: state and
// value.
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
	v, err := headers.ParseXInt(s)
	if err != nil || !fits32(v) {
		return hOther, 0
	}
	return hInt, int32(v)
}

// parse fills h, the zero hdr of e, whose record is r.
func (p *hdrParser) parse(ix *index, e *history.Event, r rec, h *hdr) {
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
	if p.gen == headers.None {
		return
	}
	var pol *polEntry
	if e.RateLimitPolicy != "" {
		if pol = p.pol.get(e.RateLimitPolicy); pol.ok {
			h.polQ, h.polW = pol.q, pol.w
			h.st |= hInt << sPol
		} else {
			h.st |= hOther << sPol
			pol = nil
		}
	}
	switch {
	case p.gen == headers.Split:
		p.parseSplit(e, h)
	case e.RateLimit == "":
		// A structured RateLimit-Policy alone: its only item is the limit.
		if p.gen == headers.Structured && pol != nil {
			h.rlLim = pol.q
			h.st |= 1 << sLim
		}
	default:
		rl := p.rl.get(e.RateLimit)
		if !rl.ok {
			h.st |= hOther << sRL
			return
		}
		h.rlR, h.rlT = rl.r, rl.t
		h.st |= hInt << sRL
		switch {
		case p.gen == headers.Dictionary:
			h.rlLim = rl.lim
			h.st |= 1 << sLim
		case pol != nil && pol.name == rl.name:
			h.rlLim = pol.q
			h.st |= 1 << sLim
		}
	}
}

// parseSplit fills the counters of RateLimit-Limit/-Remaining/-Reset.
func (p *hdrParser) parseSplit(e *history.Event, h *hdr) {
	if e.RateLimitLimit == "" && e.RateLimitRemaining == "" && e.RateLimitReset == "" {
		return
	}
	if e.RateLimitLimit == "" || e.RateLimitRemaining == "" || e.RateLimitReset == "" {
		h.st |= hOther << sRL
		return
	}
	l, r, t := p.lim.get(e.RateLimitLimit), p.rem.get(e.RateLimitRemaining), p.rset.get(e.RateLimitReset)
	if !l.ok || !r.ok || !t.ok {
		h.st |= hOther << sRL
		return
	}
	h.rlLim, h.rlR, h.rlT = l.v, r.v, t.v
	h.st |= hInt<<sRL | 1<<sLim
}
