package service

import (
	"sync/atomic"
	"time"
)

// SkewClock is an instance clock: a base clock plus the instance's
// configured skew plus whatever a clock-skew fault adds. Safe for concurrent
// use.
type SkewClock struct {
	base   func() time.Time
	skew   time.Duration
	offset atomic.Int64
}

// NewSkewClock returns base (time.Now when nil) shifted by skew.
func NewSkewClock(base func() time.Time, skew time.Duration) *SkewClock {
	if base == nil {
		base = time.Now
	}
	c := &SkewClock{base: base, skew: skew}
	c.offset.Store(int64(skew))
	return c
}

// Now is the instance's time.
func (c *SkewClock) Now() time.Time { return c.base().Add(time.Duration(c.offset.Load())) }

// Shift moves the clock d away from its configured skew (a clock-skew fault).
func (c *SkewClock) Shift(d time.Duration) { c.offset.Store(int64(c.skew + d)) }

// Reset ends a clock-skew fault: the configured skew again.
func (c *SkewClock) Reset() { c.offset.Store(int64(c.skew)) }
