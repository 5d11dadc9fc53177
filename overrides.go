package rlverify

import (
	"fmt"
	"strings"

	"github.com/rlverify/rlverify/policy"
)

// PolicyOverrides change what the declared policy says about reaching and
// reading a service (where the key goes, which statuses mean admitted and
// rejected) without another policy file. The zero value changes nothing.
type PolicyOverrides struct {
	// Identity is header:NAME, bearer, query:NAME or cookie:NAME.
	Identity string
	// Admitted and Rejected are status sets (2xx,304; 429).
	Admitted, Rejected []string
}

// IsZero reports whether v changes nothing.
func (v PolicyOverrides) IsZero() bool {
	return v.Identity == "" && len(v.Admitted) == 0 && len(v.Rejected) == 0
}

// Apply is p changed as v says and validated again; p itself is not
// changed. Errors are *OptionError naming the field under Overrides.
func (v PolicyOverrides) Apply(p *policy.Policy) (*policy.Policy, error) {
	if v.IsZero() {
		return p, nil
	}
	p = p.Clone()
	if v.Identity != "" {
		in, name, _ := strings.Cut(v.Identity, ":")
		switch in {
		case policy.InHeader, policy.InQuery, policy.InCookie:
			if name == "" {
				return nil, fieldErr("Overrides.Identity", "%q: give the name, e.g. %s:api_key", v.Identity, in)
			}
		case policy.InBearer:
		default:
			return nil, fieldErr("Overrides.Identity", "%q: want header:NAME, bearer, query:NAME or cookie:NAME", v.Identity)
		}
		p.Identity.In, p.Identity.Name, p.Identity.Header = in, name, ""
	}
	for _, s := range []struct {
		field string
		specs []string
		dst   *policy.StatusSet
	}{{"Overrides.Admitted", v.Admitted, &p.Statuses.Admitted}, {"Overrides.Rejected", v.Rejected, &p.Statuses.Rejected}} {
		if len(s.specs) == 0 {
			continue
		}
		set, err := policy.ParseStatusSet(s.specs...)
		if err != nil {
			return nil, &OptionError{Field: s.field, Err: err}
		}
		*s.dst = set
	}
	if err := p.Validate(); err != nil {
		return nil, &OptionError{Err: fmt.Errorf("policy %s with the overrides: %w", p.Source, err)}
	}
	return p, nil
}
