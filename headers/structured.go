package headers

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/dunglas/httpsfv"
)

// The structured generation (draft-ietf-httpapi-ratelimit-headers-08 and
// later): RateLimit and RateLimit-Policy are Structured Field Lists whose
// items name a policy.

// Item is one member of a structured RateLimit field, e.g. "free";r=0;t=1.
type Item struct {
	// Name is the quota policy the item reports on, matching a
	// RateLimit-Policy item.
	Name string
	// Remaining is r: quota units left (required, ≥ 0).
	Remaining int64
	// Reset is t: seconds until quota is restored; -1 when absent.
	Reset int64
	// PartitionKey is pk (a Byte Sequence); nil when absent.
	PartitionKey []byte
}

// PolicyItem is one quota policy of a RateLimit-Policy field: in the
// structured generation "free";q=10;w=2, in the dictionary and split
// generations 10;w=2 (no name).
type PolicyItem struct {
	// Name is the policy's name ("" in the dictionary and split generations).
	Name string
	// Quota is q (structured) or the item's Integer: quota units per window
	// (required, ≥ 0).
	Quota int64
	// Window is w: the window in seconds (> 0); -1 when absent.
	Window int64
	// QuotaUnit is qu (structured only); "requests" when absent.
	QuotaUnit string
	// PartitionKey is pk (structured only, a Byte Sequence); nil when absent.
	PartitionKey []byte
}

// DefaultQuotaUnit is the quota unit of a policy that names none.
const DefaultQuotaUnit = "requests"

// ParseRateLimit parses a structured RateLimit field value. Each member must
// be an Item naming its policy with a String (or a Display String, as
// Format writes names that are not printable ASCII), with an Integer r ≥ 0,
// an optional Integer t ≥ 0 and an optional Byte Sequence pk; other
// parameters are ignored as the draft requires.
func ParseRateLimit(v string) ([]Item, error) {
	list, err := parseList(v)
	if err != nil {
		return nil, fmt.Errorf("headers: RateLimit %q: %w", v, err)
	}
	out := make([]Item, 0, len(list))
	for i, m := range list {
		it, err := parseItem(m)
		if err != nil {
			return nil, fmt.Errorf("headers: RateLimit %q: member %d: %w", v, i+1, err)
		}
		ri := Item{Remaining: -1, Reset: -1}
		if ri.Name, err = policyName(it.Value); err != nil {
			return nil, fmt.Errorf("headers: RateLimit %q: member %d: %w", v, i+1, err)
		}
		if ri.Remaining, err = intParam(it.Params, "r", false); err != nil {
			return nil, fmt.Errorf("headers: RateLimit %q: member %d: %w", v, i+1, err)
		}
		if ri.Reset, err = intParam(it.Params, "t", true); err != nil {
			return nil, fmt.Errorf("headers: RateLimit %q: member %d: %w", v, i+1, err)
		}
		if ri.PartitionKey, err = bytesParam(it.Params, "pk"); err != nil {
			return nil, fmt.Errorf("headers: RateLimit %q: member %d: %w", v, i+1, err)
		}
		out = append(out, ri)
	}
	return out, nil
}

// ParseRateLimitPolicy parses a structured RateLimit-Policy field value.
// Each member must be an Item naming the policy (as in ParseRateLimit) with
// an Integer q ≥ 0, an optional Integer w > 0, an optional String qu and an
// optional Byte Sequence pk; other parameters are ignored.
func ParseRateLimitPolicy(v string) ([]PolicyItem, error) {
	list, err := parseList(v)
	if err != nil {
		return nil, fmt.Errorf("headers: RateLimit-Policy %q: %w", v, err)
	}
	out := make([]PolicyItem, 0, len(list))
	for i, m := range list {
		pi, err := parsePolicyMember(m, true)
		if err != nil {
			return nil, fmt.Errorf("headers: RateLimit-Policy %q: member %d: %w", v, i+1, err)
		}
		out = append(out, pi)
	}
	return out, nil
}

// parsePolicyMember reads one quota policy: named (structured: "n";q=Q;w=W)
// or not (dictionary and split: Q;w=W).
func parsePolicyMember(m httpsfv.Member, named bool) (PolicyItem, error) {
	it, err := parseItem(m)
	if err != nil {
		return PolicyItem{}, err
	}
	pi := PolicyItem{QuotaUnit: DefaultQuotaUnit}
	if named {
		if pi.Name, err = policyName(it.Value); err != nil {
			return pi, err
		}
		if pi.Quota, err = intParam(it.Params, "q", false); err != nil {
			return pi, err
		}
		if u, ok := it.Params.Get("qu"); ok {
			s, isStr := u.(string)
			if !isStr {
				return pi, fmt.Errorf("qu must be a String, not %s", typeName(u))
			}
			pi.QuotaUnit = s
		}
		if pi.PartitionKey, err = bytesParam(it.Params, "pk"); err != nil {
			return pi, err
		}
	} else if pi.Quota, err = nonNegInt("the quota", it.Value); err != nil {
		return pi, err
	}
	if pi.Window, err = intParam(it.Params, "w", true); err != nil {
		return pi, err
	}
	if pi.Window == 0 {
		return pi, errors.New("w must be positive")
	}
	return pi, nil
}

// FormatRateLimit writes a structured RateLimit field value. Names that are
// printable ASCII are written as Strings, others as Display Strings (RFC
// 9651 §3.3.8, the Structured Field type for Unicode text; invalid UTF-8 is
// replaced by U+FFFD first), so any name reads back unchanged. A negative
// Reset leaves t out; Remaining is clamped to [0, 10^15−1].
func FormatRateLimit(items ...Item) (string, error) {
	list := make(httpsfv.List, 0, len(items))
	for _, ri := range items {
		it := httpsfv.NewItem(nameValue(ri.Name))
		it.Params.Add("r", sfInt(ri.Remaining))
		if ri.Reset >= 0 {
			it.Params.Add("t", sfInt(ri.Reset))
		}
		if ri.PartitionKey != nil {
			it.Params.Add("pk", ri.PartitionKey)
		}
		list = append(list, it)
	}
	return marshal(RateLimit, list)
}

// FormatRateLimitPolicy writes a structured RateLimit-Policy field value
// (names as in FormatRateLimit). A Window ≤ 0 leaves w out, a QuotaUnit of
// "" or "requests" leaves qu out.
func FormatRateLimitPolicy(items ...PolicyItem) (string, error) {
	list := make(httpsfv.List, 0, len(items))
	for _, pi := range items {
		it := httpsfv.NewItem(nameValue(pi.Name))
		it.Params.Add("q", sfInt(pi.Quota))
		if pi.QuotaUnit != "" && pi.QuotaUnit != DefaultQuotaUnit {
			it.Params.Add("qu", pi.QuotaUnit)
		}
		if pi.Window > 0 {
			it.Params.Add("w", sfInt(pi.Window))
		}
		if pi.PartitionKey != nil {
			it.Params.Add("pk", pi.PartitionKey)
		}
		list = append(list, it)
	}
	return marshal(RateLimitPolicy, list)
}

// nameValue is the bare item a policy name is written as.
func nameValue(name string) any {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c > 0x7e {
			return httpsfv.DisplayString(strings.ToValidUTF8(name, string(utf8.RuneError)))
		}
	}
	return name
}

// policyName reads the bare item naming a policy.
func policyName(v any) (string, error) {
	switch s := v.(type) {
	case string:
		return s, nil
	case httpsfv.DisplayString:
		return string(s), nil
	}
	return "", fmt.Errorf("the policy name must be a String, not %s", typeName(v))
}
