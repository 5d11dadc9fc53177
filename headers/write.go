package headers

import (
	"net/http"
	"strconv"
	"time"
)

// Quota is what a response tells a client about the limit that decided it.
type Quota struct {
	// Policy names the quota policy (the tier); only the structured
	// generation sends it, and any string reads back unchanged.
	Policy string
	// Limit is the quota N per Window.
	Limit  int64
	Window time.Duration
	// Remaining is the quota units left (a negative value is sent as 0).
	Remaining int64
	// Reset is the time until the quota is restored.
	Reset time.Duration
}

// Writer writes the rate-limit fields a policy declares. The zero value
// writes none.
type Writer struct {
	// Generation of the RateLimit fields (None: none).
	Generation Generation
	// XRateLimit adds X-RateLimit-Limit, -Remaining and -Reset, the reset
	// in the form XReset (relative when empty).
	XRateLimit bool
	XReset     ResetForm
}

// Write sets the fields w declares for q on h. Durations are rounded up to
// whole seconds (Seconds); an absolute X-RateLimit-Reset is taken from now.
// Without a Window (≤ 0) the structured RateLimit-Policy leaves w out and
// the dictionary and split generations, where the policy field is optional
// but w is not, leave RateLimit-Policy out. It fails only for an unknown
// XReset form.
func (w Writer) Write(h http.Header, q Quota, now time.Time) error {
	rem := max(q.Remaining, 0)
	reset, window := Seconds(q.Reset), Seconds(q.Window)
	var err error
	set := func(name, v string, e error) {
		if e != nil && err == nil {
			err = e
		}
		if e == nil && v != "" {
			h.Set(name, v)
		}
	}
	switch w.Generation {
	case Structured:
		v, e := FormatRateLimitPolicy(PolicyItem{Name: q.Policy, Quota: q.Limit, Window: window})
		set(RateLimitPolicy, v, e)
		v, e = FormatRateLimit(Item{Name: q.Policy, Remaining: rem, Reset: reset})
		set(RateLimit, v, e)
	case Dictionary:
		v, e := FormatRateLimitDictionary(Counters{Limit: q.Limit, Remaining: rem, Reset: reset})
		set(RateLimit, v, e)
	case Split:
		l, r, t, e := FormatSplit(Counters{Limit: q.Limit, Remaining: rem, Reset: reset})
		set(RateLimitLimit, l, e)
		set(RateLimitRemaining, r, e)
		set(RateLimitReset, t, e)
	}
	if (w.Generation == Dictionary || w.Generation == Split) && window > 0 {
		v, e := FormatQuotaPolicies(PolicyItem{Quota: q.Limit, Window: window})
		set(RateLimitPolicy, v, e)
	}
	if w.XRateLimit {
		form := w.XReset
		if form == ResetGuess {
			form = ResetRelative
		}
		h.Set(XRateLimitLimit, strconv.FormatInt(q.Limit, 10))
		h.Set(XRateLimitRemaining, strconv.FormatInt(rem, 10))
		v, e := FormatXReset(q.Reset, form, now)
		set(XRateLimitReset, v, e)
	}
	return err
}
