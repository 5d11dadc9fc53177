package history

import (
	"fmt"
	"math"
	"strconv"
)

// Cost is what a request asked the limiter for, in tokens (or window
// slots), when the policy declares weighted requests. The zero value is an
// unweighted request: it costs one and its line has no "cost" field, so
// histories from before costs read as they always did. Build any other
// with CostOf: a line records it as "cost":N, cost 0 (a "status" peek that
// consumes nothing) included.
//
// In memory a peek is held as −1, so the zero value can mean "one"; use
// Tokens, never the number itself.
type Cost int32

// CostPeek is the in-memory form of cost 0.
const CostPeek Cost = -1

// MaxEventCost bounds a recorded cost.
const MaxEventCost = math.MaxInt32

// CostOf is the Cost of a request that asked for n tokens (0 … MaxEventCost;
// out-of-range values are clamped).
func CostOf(n int64) Cost {
	switch {
	case n <= 0:
		return CostPeek
	case n > MaxEventCost:
		return MaxEventCost
	}
	return Cost(n)
}

// Tokens is how many tokens the request asked for: 1 when unweighted.
func (c Cost) Tokens() int64 {
	switch {
	case c == 0:
		return 1
	case c < 0:
		return 0
	}
	return int64(c)
}

// Weighted reports whether the request said its cost.
func (c Cost) Weighted() bool { return c != 0 }

// MarshalJSON writes the cost in tokens.
func (c Cost) MarshalJSON() ([]byte, error) { return strconv.AppendInt(nil, c.Tokens(), 10), nil }

// UnmarshalJSON reads a cost in tokens: a whole number 0 … MaxEventCost.
func (c *Cost) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || n < 0 || n > MaxEventCost {
		return fmt.Errorf("cost %s: want a whole number of tokens 0 … %d", clip(b, 24), int64(MaxEventCost))
	}
	*c = CostOf(n)
	return nil
}

// String is the cost in tokens.
func (c Cost) String() string { return strconv.FormatInt(c.Tokens(), 10) }
