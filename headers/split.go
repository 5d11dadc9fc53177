package headers

import (
	"fmt"

	"github.com/dunglas/httpsfv"
)

// The split generation (draft-ietf-httpapi-ratelimit-headers-00 to -06):
// RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset, each an
// Integer; drafts 00–02 let RateLimit-Limit carry the quota policies after
// the expiring limit ("10, 10;w=1, 50;w=60"), later ones moved them to
// RateLimit-Policy.

// ParseRateLimitLimit parses a RateLimit-Limit field value: a List whose
// first member is the expiring limit (a non-negative Integer; parameters
// ignored) and whose other members are quota policies as in
// ParseQuotaPolicies.
func ParseRateLimitLimit(v string) (limit int64, policies []PolicyItem, err error) {
	list, err := parseList(v)
	if err != nil {
		return 0, nil, fmt.Errorf("headers: RateLimit-Limit %q: %w", v, err)
	}
	it, err := parseItem(list[0])
	if err == nil {
		limit, err = nonNegInt("the limit", it.Value)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("headers: RateLimit-Limit %q: member 1: %w", v, err)
	}
	if len(list) > 1 {
		if policies, err = quotaPolicies(list[1:], 1); err != nil {
			return 0, nil, fmt.Errorf("headers: RateLimit-Limit %q: %w", v, err)
		}
	}
	return limit, policies, nil
}

// ParseRateLimitRemaining parses a RateLimit-Remaining field value: a
// non-negative Integer (parameters ignored).
func ParseRateLimitRemaining(v string) (int64, error) {
	return itemInt(RateLimitRemaining, "remaining", v)
}

// ParseRateLimitReset parses a RateLimit-Reset field value: delay seconds,
// a non-negative Integer (parameters ignored).
func ParseRateLimitReset(v string) (int64, error) {
	return itemInt(RateLimitReset, "reset", v)
}

func itemInt(field, what, v string) (int64, error) {
	it, err := httpsfv.UnmarshalItem([]string{v})
	if err == nil {
		var n int64
		if n, err = nonNegInt(what, it.Value); err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("headers: %s %q: %w", field, v, err)
}

// FormatSplit writes the split generation's three field values; a negative
// Remaining is written as "" (leave the field out). Values are clamped to
// [0, 10^15−1].
func FormatSplit(c Counters) (limit, remaining, reset string, err error) {
	if limit, err = marshal(RateLimitLimit, httpsfv.NewItem(sfInt(c.Limit))); err != nil {
		return "", "", "", err
	}
	if c.Remaining >= 0 {
		if remaining, err = marshal(RateLimitRemaining, httpsfv.NewItem(sfInt(c.Remaining))); err != nil {
			return "", "", "", err
		}
	}
	if reset, err = marshal(RateLimitReset, httpsfv.NewItem(sfInt(c.Reset))); err != nil {
		return "", "", "", err
	}
	return limit, remaining, reset, nil
}
