package service

import (
	"sync/atomic"
	"time"
)

// SkewClock is an instance's clocks: its wall clock (Now), a base clock
// plus the instance's configured skew plus whatever a clock-skew fault
// adds, and its steady clock (Steady), the same base and configured skew
// but never stepped by a fault, as a monotonic clock is not when an
// operator or NTP steps the wall clock. Safe for concurrent use.
type SkewClock struct {
	base   func() time.Time
	skew   time.Duration
	offset atomic.Int64
	// anchor is the real wall clock when the clock was made (base nil):
	// Steady then advances by the monotonic clock from it.
	anchor time.Time
}

// NewSkewClock returns base (time.Now when nil) shifted by skew.
func NewSkewClock(base func() time.Time, skew time.Duration) *SkewClock {
	c := &SkewClock{base: base, skew: skew}
	if base == nil {
		c.base, c.anchor = time.Now, time.Now()
	}
	c.offset.Store(int64(skew))
	return c
}

// Now is the instance's wall clock: what it says the time is (its Date
// header), stepped by a clock-skew fault.
func (c *SkewClock) Now() time.Time { return c.base().Add(time.Duration(c.offset.Load())) }

// Steady is the instance's monotonic clock, what its limiters decide at:
// the configured skew, but no fault's step. On the real clock it advances
// by the monotonic reading from the instance's start, so even a real step
// of the machine's clock does not move it.
func (c *SkewClock) Steady() time.Time {
	if !c.anchor.IsZero() {
		return c.anchor.Add(time.Since(c.anchor) + c.skew)
	}
	return c.base().Add(c.skew)
}

// Shift moves the clock d away from its configured skew (a clock-skew fault).
func (c *SkewClock) Shift(d time.Duration) { c.offset.Store(int64(c.skew + d)) }

// Reset ends a clock-skew fault: the configured skew again.
func (c *SkewClock) Reset() { c.offset.Store(int64(c.skew)) }
