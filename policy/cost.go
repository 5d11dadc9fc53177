package policy

import (
	"fmt"
	"net/url"
)

// Cost declares weighted requests: each request says how many tokens (or
// window slots) it asks for, in a header or a query parameter the service
// reads, and the limiter takes that many at once. A request of cost n is
// admitted only when every limit of its key has room for n; a request of
// cost 0 (a "status" peek, when Min is 0) consumes nothing and is never
// refused. Requests without the header cost Default.
//
// The zero value is not valid; a policy without weighted requests has a
// nil Cost.
type Cost struct {
	// In is where the weight travels: header (default) or query.
	In string `yaml:"in,omitempty" json:"in,omitempty"`
	// Name is the header or query parameter (default X-Cost for a header,
	// cost for a query).
	Name string `yaml:"name,omitempty" json:"name,omitempty"`
	// Default is the cost of a request that carries no weight (default 1).
	Default int64 `yaml:"default,omitempty" json:"default,omitempty"`
	// Min and Max bound the costs the service accepts (default 1 and
	// MaxCost). Min 0 declares cost-0 peeks: they consume nothing and must
	// never be refused. A plan sends no cost outside [Min, Max].
	Min *int64 `yaml:"min,omitempty" json:"min,omitempty"`
	Max int64  `yaml:"max,omitempty" json:"max,omitempty"`
}

// MaxCost bounds a declared cost: the checks count a weighted admission as
// that many unit admissions.
const MaxCost = 65534

// Where a cost travels (Cost.In).
const (
	CostInHeader = "header"
	CostInQuery  = "query"
)

// DefaultCostHeader and DefaultCostQuery name the weight when Cost.Name is empty.
const (
	DefaultCostHeader = "X-Cost"
	DefaultCostQuery  = "cost"
)

// MinCost is the least cost the service accepts (0 when peeks are declared).
func (c *Cost) MinCost() int64 {
	if c == nil || c.Min == nil {
		return 1
	}
	return *c.Min
}

// Peeks reports whether the policy declares cost-0 requests.
func (c *Cost) Peeks() bool { return c != nil && c.MinCost() == 0 }

// Allows reports whether a request of cost n is within the declared range.
func (c *Cost) Allows(n int64) bool {
	if c == nil {
		return n == 1
	}
	return n >= c.MinCost() && n <= c.Max
}

// Weighted reports whether p declares weighted requests.
func (p *Policy) Weighted() bool { return p.Cost != nil }

func (c *Cost) normalize(errf func(string, string, ...any) error) error {
	switch c.In {
	case "", CostInHeader:
		c.In = CostInHeader
		if c.Name == "" {
			c.Name = DefaultCostHeader
		}
		if !validToken(c.Name) {
			return errf("cost.name", "%q is not a header name", c.Name)
		}
	case CostInQuery:
		if c.Name == "" {
			c.Name = DefaultCostQuery
		}
		if url.QueryEscape(c.Name) != c.Name {
			return errf("cost.name", "%q: a query parameter name of letters, digits, '-', '_' and '.'", c.Name)
		}
	default:
		return errf("cost.in", "%q: want header or query", c.In)
	}
	if c.Min == nil {
		one := int64(1)
		c.Min = &one
	}
	if *c.Min < 0 || *c.Min > MaxCost {
		return errf("cost.min", "%d: want 0 … %d", *c.Min, MaxCost)
	}
	if c.Max == 0 {
		c.Max = MaxCost
	}
	if c.Max < *c.Min || c.Max > MaxCost {
		return errf("cost.max", "%d: want %d … %d (at least cost.min)", c.Max, *c.Min, MaxCost)
	}
	if c.Default == 0 {
		c.Default = 1
	}
	if c.Default < *c.Min || c.Default > c.Max {
		return errf("cost.default", "%d: outside the declared costs %d … %d", c.Default, *c.Min, c.Max)
	}
	return nil
}

// Describe says the declaration for people: "header X-Cost, 0 … 100 (peeks), default 1".
func (c *Cost) Describe() string {
	s := fmt.Sprintf("%s %s, costs %d … %d, default %d", c.In, c.Name, c.MinCost(), c.Max, c.Default)
	if c.Peeks() {
		s += "; cost-0 peeks consume nothing and are never refused"
	}
	return s
}
