package importers

import (
	"fmt"
	"net/url"

	"github.com/rlverify/rlverify/policy"
)

// Where a request's key came from.
const (
	keyFromIdentity = iota
	keyFromTag
	keyFromOption
)

// key returns the key of r as the declared identity reads it, with the
// variant the bypass check judges ("repeat" for a key given twice when the
// policy refuses that or declares the limiter counts another occurrence
// than the tenant's, whose key is then the one returned; "long" for a key beyond max_length the policy
// refuses), and where the key came from. A record that does not carry the
// identity takes Options.KeyTag's label, then Options.Key.
func (c *converter) key(r *record, u *url.URL) (key, variant string, from int, err error) {
	id := &c.o.Policy.Identity
	vals, missing := identityValues(id, r, u, c.f.title)
	if len(vals) == 0 {
		switch {
		case c.o.KeyTag != "" && r.label != "":
			return r.label, "", keyFromTag, nil
		case c.o.Key != "":
			return c.o.Key, "", keyFromOption, nil
		}
		hint := ""
		if c.f.keyTags == nil || len(c.f.keyTags) > 0 {
			hint = ", or " + c.f.keyTagHint
		}
		if c.o.KeyTag != "" {
			hint = fmt.Sprintf(" (%s is missing or empty)", c.tagName())
		}
		return "", "", 0, inputErr("%s: no key for this request: %s; give Importer.Key%s", r.where, missing, hint)
	}
	v, repeated, tooLong := id.Key(vals)
	switch {
	case repeated:
		variant = "repeat"
	case len(vals) > 1 && id.Mismatched():
		// Served as the tenant, counted as another key: the bypass check
		// judges it as the plan's repeat variant.
		v, variant = id.TenantKey(vals), "repeat"
	case tooLong:
		variant = "long"
	}
	return v, variant, keyFromIdentity, nil
}

// identityValues returns the values of the declared identity in r, in the
// order sent, or why there are none.
func identityValues(id *policy.Identity, r *record, u *url.URL, title string) (vals []string, missing string) {
	switch id.In {
	case policy.InQuery:
		if vals = u.Query()[id.Name]; len(vals) == 0 {
			return nil, fmt.Sprintf("the URL has no %s", id.Describe())
		}
		return vals, ""
	case policy.InCookie:
		if r.cookies == nil {
			return nil, fmt.Sprintf("request cookies are not kept in %s, so the declared identity (%s) is unknown", title, id.Describe())
		}
		if vals = r.cookies[id.Name]; len(vals) == 0 {
			return nil, fmt.Sprintf("the request has no %s", id.Describe())
		}
		return vals, ""
	}
	if r.reqHeader == nil {
		return nil, fmt.Sprintf("request headers are not kept in %s, so the declared identity (%s) is unknown", title, id.Describe())
	}
	for _, v := range r.reqHeader.Values(id.Name) {
		if id.In == policy.InBearer {
			tok, ok := policy.BearerToken(v)
			if !ok {
				continue
			}
			v = tok
		}
		vals = append(vals, v)
	}
	if len(vals) == 0 {
		return nil, fmt.Sprintf("the request has no %s", id.Describe())
	}
	return vals, ""
}
