package headers

import (
	"fmt"

	"github.com/dunglas/httpsfv"
)

// The dictionary generation (draft-ietf-httpapi-ratelimit-headers-07):
// RateLimit is a Structured Field Dictionary limit=N, remaining=R, reset=T,
// and RateLimit-Policy a List of quota policies N;w=W.

// Counters is what the dictionary and split generations report about the
// expiring limit: its quota units, the units left and the seconds until it
// resets. Remaining is -1 when the response leaves it out (the drafts make
// it optional).
type Counters struct {
	Limit, Remaining, Reset int64
}

// ParseRateLimitDictionary parses a draft-07 RateLimit field value: a
// Dictionary whose limit (required), remaining (optional) and reset
// (required) members are non-negative Integers. Parameters and other keys
// are ignored, as the draft requires.
func ParseRateLimitDictionary(v string) (Counters, error) {
	d, err := httpsfv.UnmarshalDictionary([]string{v})
	if err != nil {
		return Counters{}, fmt.Errorf("headers: RateLimit %q: %w", v, err)
	}
	c := Counters{}
	for _, k := range []struct {
		key      string
		to       *int64
		optional bool
	}{{"limit", &c.Limit, false}, {"remaining", &c.Remaining, true}, {"reset", &c.Reset, false}} {
		n, err := dictInt(d, k.key, k.optional)
		if err != nil {
			return Counters{}, fmt.Errorf("headers: RateLimit %q: %w", v, err)
		}
		*k.to = n
	}
	return c, nil
}

// dictInt reads the non-negative Integer member key of d: -1 when it is
// absent and optional.
func dictInt(d *httpsfv.Dictionary, key string, optional bool) (int64, error) {
	m, ok := d.Get(key)
	if !ok {
		if optional {
			return -1, nil
		}
		return 0, fmt.Errorf("no %s key", key)
	}
	it, err := parseItem(m)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", key, err)
	}
	return nonNegInt(key, it.Value)
}

// isDictionary reports whether v parses as a Dictionary with a limit,
// remaining or reset member (a draft-07 RateLimit, not a structured list).
func isDictionary(v string) bool {
	d, err := httpsfv.UnmarshalDictionary([]string{v})
	if err != nil {
		return false
	}
	for _, k := range []string{"limit", "remaining", "reset"} {
		if _, ok := d.Get(k); ok {
			return true
		}
	}
	return false
}

// FormatRateLimitDictionary writes a draft-07 RateLimit field value. A
// negative Remaining leaves it out; values are clamped to [0, 10^15−1].
func FormatRateLimitDictionary(c Counters) (string, error) {
	d := httpsfv.NewDictionary()
	d.Add("limit", httpsfv.NewItem(sfInt(c.Limit)))
	if c.Remaining >= 0 {
		d.Add("remaining", httpsfv.NewItem(sfInt(c.Remaining)))
	}
	d.Add("reset", httpsfv.NewItem(sfInt(c.Reset)))
	return marshal(RateLimit, d)
}

// ParseQuotaPolicies parses the RateLimit-Policy of the dictionary and
// split generations: a List of quota policies, each an Integer (the quota)
// with a required Integer w > 0; other parameters are comments. Two
// policies must not share a quota (draft 07 §3.5).
func ParseQuotaPolicies(v string) ([]PolicyItem, error) {
	list, err := parseList(v)
	if err != nil {
		return nil, fmt.Errorf("headers: RateLimit-Policy %q: %w", v, err)
	}
	out, err := quotaPolicies(list, 0)
	if err != nil {
		return nil, fmt.Errorf("headers: RateLimit-Policy %q: %w", v, err)
	}
	return out, nil
}

// quotaPolicies reads unnamed quota policies; members are numbered from
// first+1 in messages.
func quotaPolicies(list httpsfv.List, first int) ([]PolicyItem, error) {
	out := make([]PolicyItem, 0, len(list))
	for i, m := range list {
		pi, err := parsePolicyMember(m, false)
		if err == nil && pi.Window < 0 {
			err = fmt.Errorf("no w (window) parameter")
		}
		if err != nil {
			return nil, fmt.Errorf("member %d: %w", first+i+1, err)
		}
		for _, o := range out {
			if o.Quota == pi.Quota {
				return nil, fmt.Errorf("member %d: two quota policies of quota %d", first+i+1, pi.Quota)
			}
		}
		out = append(out, pi)
	}
	return out, nil
}

// FormatQuotaPolicies writes the RateLimit-Policy of the dictionary and
// split generations: Quota;w=Window for each item. Names are not part of
// these generations; w is required, so a Window ≤ 0 is an error.
func FormatQuotaPolicies(items ...PolicyItem) (string, error) {
	list := make(httpsfv.List, 0, len(items))
	for _, pi := range items {
		if pi.Window <= 0 {
			return "", fmt.Errorf("headers: writing RateLimit-Policy: quota %d has no window (w is required)", pi.Quota)
		}
		it := httpsfv.NewItem(sfInt(pi.Quota))
		it.Params.Add("w", sfInt(pi.Window))
		list = append(list, it)
	}
	return marshal(RateLimitPolicy, list)
}
