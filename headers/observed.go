package headers

import "fmt"

// State says whether a field, or a number in one, was there and usable.
type State uint8

// States of a Status.
const (
	// Absent: the response did not send it.
	Absent State = iota
	// Valid: sent and well-formed.
	Valid
	// Invalid: sent but malformed; Status.Err says why.
	Invalid
)

// Status is the State of a field or number, with the reason when Invalid.
type Status struct {
	State State
	Err   error
}

// Valid reports whether the value was sent and well-formed.
func (s Status) Valid() bool { return s.State == Valid }

// Value is one number a response states (N when Valid).
type Value struct {
	N int64
	Status
}

func valid(n int64) Value            { return Value{N: n, Status: Status{State: Valid}} }
func invalid(err error) Value        { return Value{Status: invalidStatus(err)} }
func invalidStatus(err error) Status { return Status{State: Invalid, Err: err} }

// optional is n as a Value, Absent when the parser marked it absent (-1).
func optional(n int64) Value {
	if n < 0 {
		return Value{}
	}
	return valid(n)
}

// Observed is what the RateLimit fields of one generation in a response
// state, normalised so that a checker judges every generation alike.
type Observed struct {
	Generation Generation
	// Name is the policy the counters belong to: the name of the first
	// RateLimit item (structured only).
	Name string
	// Limit is the quota N of the limit the counters belong to: q of the
	// RateLimit-Policy item Name names (structured; without a valid
	// RateLimit, the only item's q), limit (dictionary) or RateLimit-Limit
	// (split).
	Limit Value
	// Remaining is the quota units left: r of the first RateLimit item,
	// remaining, or RateLimit-Remaining.
	Remaining Value
	// Reset is the seconds until the quota resets: t, reset or
	// RateLimit-Reset.
	Reset Value
	// Window is w, in seconds, of the quota policy of Limit (the item Name
	// names, or in the unnamed generations the one whose quota is Limit).
	Window Value
	// Items are all items of a structured RateLimit.
	Items []Item
	// Policies are all quota policies the response declares: the
	// RateLimit-Policy items, and in the split generation also those that
	// RateLimit-Limit carries after the limit.
	Policies []PolicyItem
	// Policy is the state of the RateLimit-Policy field.
	Policy Status
}

// Read parses the fields of generation g in f. Every field is parsed with
// the parser of its generation; a malformed one makes its values Invalid
// with the parser's error, an absent one leaves them Absent. Read(None, f)
// is the zero Observed.
func Read(g Generation, f Fields) Observed {
	o := Observed{Generation: g}
	switch g {
	case Structured:
		o.readStructured(f)
	case Dictionary:
		o.readDictionary(f)
		o.readQuotaPolicies(f)
	case Split:
		o.readSplit(f)
		o.readQuotaPolicies(f)
	}
	return o
}

// readQuotaPolicies reads the unnamed RateLimit-Policy of the dictionary
// and split generations, and the window of the policy whose quota is the
// limit.
func (o *Observed) readQuotaPolicies(f Fields) {
	if f.RateLimitPolicy != "" {
		pol, err := ParseQuotaPolicies(f.RateLimitPolicy)
		if err != nil {
			o.Policy = invalidStatus(err)
		} else {
			o.Policy.State = Valid
			o.Policies = append(o.Policies, pol...)
		}
	}
	if o.Limit.Valid() {
		for _, p := range o.Policies {
			if p.Quota == o.Limit.N {
				o.Window = valid(p.Window)
				return
			}
		}
	}
}

func (o *Observed) readStructured(f Fields) {
	named := false
	if f.RateLimit != "" {
		items, err := ParseRateLimit(f.RateLimit)
		if err != nil {
			o.Remaining, o.Reset = invalid(err), invalid(err)
		} else {
			o.Items, o.Name, named = items, items[0].Name, true
			o.Remaining, o.Reset = valid(items[0].Remaining), optional(items[0].Reset)
		}
	}
	if f.RateLimitPolicy == "" {
		return
	}
	pol, err := ParseRateLimitPolicy(f.RateLimitPolicy)
	if err != nil {
		o.Policy, o.Limit, o.Window = invalidStatus(err), invalid(err), invalid(err)
		return
	}
	o.Policy.State, o.Policies = Valid, pol
	switch {
	case named:
		for _, p := range pol {
			if p.Name == o.Name {
				o.Limit, o.Window = valid(p.Quota), optional(p.Window)
				return
			}
		}
		err := fmt.Errorf("headers: RateLimit names policy %q, which RateLimit-Policy %q does not declare", o.Name, f.RateLimitPolicy)
		o.Limit, o.Window = invalid(err), invalid(err)
	case len(pol) == 1:
		o.Limit, o.Window = valid(pol[0].Quota), optional(pol[0].Window)
	}
}

func (o *Observed) readDictionary(f Fields) {
	if f.RateLimit == "" {
		return
	}
	c, err := ParseRateLimitDictionary(f.RateLimit)
	if err != nil {
		o.Limit, o.Remaining, o.Reset = invalid(err), invalid(err), invalid(err)
		return
	}
	o.Limit, o.Remaining, o.Reset = valid(c.Limit), optional(c.Remaining), valid(c.Reset)
}

func (o *Observed) readSplit(f Fields) {
	if f.RateLimitLimit != "" {
		n, pol, err := ParseRateLimitLimit(f.RateLimitLimit)
		if err != nil {
			o.Limit = invalid(err)
		} else {
			o.Limit, o.Policies = valid(n), pol
		}
	}
	if f.RateLimitRemaining != "" {
		n, err := ParseRateLimitRemaining(f.RateLimitRemaining)
		o.Remaining = valueOf(n, err)
	}
	if f.RateLimitReset != "" {
		n, err := ParseRateLimitReset(f.RateLimitReset)
		o.Reset = valueOf(n, err)
	}
}

func valueOf(n int64, err error) Value {
	if err != nil {
		return invalid(err)
	}
	return valid(n)
}
