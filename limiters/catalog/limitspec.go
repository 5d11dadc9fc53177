package catalog

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rlverify/rlverify/policy"
)

// ParseLimit parses NAME:k=v,… (a memory limiter of the catalog and
// its numbers) into the catalog entry and a validated limit.
func ParseLimit(spec string) (string, Entry, policy.Limit, error) {
	name, params, _ := strings.Cut(spec, ":")
	entry, err := Lookup(name, Memory)
	if err != nil {
		return "", Entry{}, policy.Limit{}, fmt.Errorf("%q: %w", spec, err)
	}
	l := policy.Limit{Algorithm: entry.Algorithm}
	rateGiven := false
	for _, kv := range strings.Split(params, ",") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return "", Entry{}, policy.Limit{}, fmt.Errorf("%q: parameter %q is not key=value", spec, kv)
		}
		switch strings.TrimSpace(k) {
		case "capacity", "K":
			l.Capacity, err = strconv.ParseInt(v, 10, 64)
		case "rate", "r":
			var r float64
			r, err = policy.ParseRate(v)
			l.Rate, rateGiven = policy.Rate(r), true
		case "limit", "N":
			l.Count, err = strconv.ParseInt(v, 10, 64)
		case "window", "W":
			var w time.Duration
			w, err = policy.ParseDuration(v)
			l.Window = policy.Duration(w)
		default:
			return "", Entry{}, policy.Limit{}, fmt.Errorf("%q: unknown parameter %q (want capacity, rate, limit, window)", spec, k)
		}
		if err != nil {
			return "", Entry{}, policy.Limit{}, fmt.Errorf("%q: %s: %w", spec, k, err)
		}
	}
	if l.Capacity > 0 && l.Count == 0 && !rateGiven {
		// As in a policy file: rate 0 is a one-off quota, so it must be
		// said, not left out.
		return "", Entry{}, policy.Limit{}, fmt.Errorf("%q: rate missing: a bucket needs its refill rate (rate=0 declares a one-off quota that never refills)", spec)
	}
	p := &policy.Policy{Tiers: []policy.Tier{{Name: "sim", Limits: []policy.Limit{l}}}}
	if err := p.Validate(); err != nil {
		return "", Entry{}, policy.Limit{}, fmt.Errorf("%q: %w", spec, err)
	}
	return name, entry, p.Tiers[0].Limits[0], nil
}
