package policy

import (
	"fmt"
	"time"
)

// Delay declares a limiter that holds a request instead of refusing it at
// once (a bounded queue as the limiter's promise, as nginx's limit_req
// without nodelay, or golang.org/x/time/rate's Reserve and Wait): a request
// for which no token is free waits until its token is due, at most MaxWait,
// with at most Queue requests of a key waiting; only a request whose wait
// would exceed MaxWait, or that finds the queue full, is refused.
//
// A delayed request is admitted when it is released, somewhere between its
// send and its answer; the checks take its answer (Recv) as the latest
// instant of its admission, so its decision interval is the same
// [Sent, Recv] as any other request's and the envelope (oversell) judges
// the release times, never the arrival times.
//
// The zero value is not useful; a policy's delay is nil when it declares
// none.
type Delay struct {
	// MaxWait is D: the longest a request may be held before it is
	// admitted; one whose wait would be longer is refused.
	MaxWait Duration `yaml:"max_wait" json:"max_wait"`
	// Queue is Q: at most this many requests of one key wait at a time;
	// 0 means no bound besides MaxWait.
	Queue int `yaml:"queue,omitempty" json:"queue,omitempty"`
	// Tolerance is how much longer than MaxWait an admitted request may
	// take (the network and the service's own time), and how far inside
	// MaxWait a wait must lie before a refusal of it counts as wrong.
	// Zero means the default (the delay check says which it used): the
	// larger of 50ms, a tenth of MaxWait and twice the p99 latency of the
	// run's refusals.
	Tolerance Duration `yaml:"tolerance,omitempty" json:"tolerance,omitempty"`
}

// Bounds of a declared delay.
const (
	MaxDelayWait  = time.Minute
	MaxDelayQueue = 1_000_000
)

// DelayFor returns the delay that applies to tier t: the tier's own, else
// the policy's; nil when neither declares one (the limiter refuses at once).
func (p *Policy) DelayFor(t *Tier) *Delay {
	if t != nil && t.Delay != nil {
		return t.Delay
	}
	return p.Delay
}

// Delays reports whether any tier is declared to delay.
func (p *Policy) Delays() bool {
	for i := range p.Tiers {
		if p.DelayFor(&p.Tiers[i]) != nil {
			return true
		}
	}
	return false
}

func (d *Delay) normalize(path string, errf func(string, string, ...any) error) error {
	if d.MaxWait <= 0 || d.MaxWait.D() > MaxDelayWait {
		return errf(path+".max_wait", "%s: want a duration in (0, %s] (how long a request may be held before it is admitted)", d.MaxWait, MaxDelayWait)
	}
	if d.Queue < 0 || d.Queue > MaxDelayQueue {
		return errf(path+".queue", "%d: want 0 (no bound besides max_wait) … %d", d.Queue, MaxDelayQueue)
	}
	if d.Tolerance < 0 || d.Tolerance.D() > MaxDelayWait {
		return errf(path+".tolerance", "%s: want a duration in [0, %s]", d.Tolerance, MaxDelayWait)
	}
	return nil
}

// normalizeDelays checks the policy's and every tier's delay: a delay
// holds a request until its next token is due, so every limit of a tier
// that delays must be a bucket (token-bucket or gcra).
func (p *Policy) normalizeDelays(errf func(string, string, ...any) error) error {
	if p.Delay != nil {
		if err := p.Delay.normalize("delay", errf); err != nil {
			return err
		}
	}
	for i := range p.Tiers {
		t := &p.Tiers[i]
		path := fmt.Sprintf("tiers.%d.delay", i)
		if t.Delay != nil {
			if err := t.Delay.normalize(path, errf); err != nil {
				return err
			}
		}
		if p.DelayFor(t) == nil {
			continue
		}
		for j, l := range t.Limits {
			if !l.Algorithm.Bucketed() {
				if t.Delay == nil {
					path = "delay"
				}
				return errf(path, "tier %q: limit %d is %s; a delay holds a request until its next token is due, so it applies to token-bucket and gcra limits only", t.Name, j, l.Algorithm)
			}
		}
	}
	return nil
}

// cloneDelays gives c copies of p's delays.
func (c *Policy) cloneDelays() {
	if c.Delay != nil {
		d := *c.Delay
		c.Delay = &d
	}
	for i := range c.Tiers {
		if c.Tiers[i].Delay != nil {
			d := *c.Tiers[i].Delay
			c.Tiers[i].Delay = &d
		}
	}
}
