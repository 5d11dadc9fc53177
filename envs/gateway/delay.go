package gateway

import (
	"fmt"
	"math"
	"time"

	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policy"
)

// honestDelays makes t's honest policy declare what gateway g does with a
// request for which no token is free. nginx without nodelay (mode delay)
// holds it until its excess drains: with a declared delay (max_wait D,
// queue Q) the zone is burst=K−1+Q' delay=K−1 (nginxQueue: Q' = Q, at most
// ⌊D·r⌋), so K are admitted at once and Q' more wait, up to Q'/r; without
// one it is burst=K−1 and every request past the first waits its turn at
// the rate, up to (K−1)/r — a bucket of one with K−1 waiting, which admits
// what the bucket of K does. A tier of several limits waits for the
// slowest and queues the fewest. Every other gateway refuses at once: a
// declared delay is a deviation.
func honestDelays(t *translation, g catalog.Gateway, declared *policy.Policy) {
	h := t.honest
	h.Delay = nil
	delays := g.Kind == catalog.NGINX && g.Mode == "delay"
	paced := false
	for i := range h.Tiers {
		tier := &h.Tiers[i]
		tier.Delay = nil
		if !delays {
			continue
		}
		d := declared.DelayFor(&declared.Tiers[i])
		var wait time.Duration
		queue := int64(-1)
		for li := range tier.Limits {
			l := &tier.Limits[li]
			q := l.Capacity - 1
			if d != nil {
				q = nginxQueue(declared, tierLimit{Tier: tier.Name, Index: li, Limit: *l}, l.R())
			} else if l.Capacity > 1 {
				// Paced: a bucket of one, the rest of the burst waiting.
				setBucket(l, 1, l.R())
				paced = true
			}
			if q < 1 {
				continue
			}
			wait = max(wait, time.Duration(float64(q)/l.R()*float64(time.Second)))
			if queue < 0 || q < queue {
				queue = q
			}
		}
		if wait > 0 && wait <= policy.MaxDelayWait && queue <= policy.MaxDelayQueue {
			tier.Delay = &policy.Delay{MaxWait: policy.Duration(wait), Queue: int(queue)}
		}
	}
	switch {
	case declared.Delays() && !delays:
		t.deviate("a request for which no token is free waits for it (delay)", fmt.Sprintf("%s refuses it at once", g.Kind))
	case delays && !declared.Delays():
		t.deviate("a request for which no token is free is refused at once", "nginx without nodelay holds it until its excess drains (up to (K−1)/r), refusing only past the burst")
		if paced {
			t.deviate("a burst of up to K is admitted at once", "nginx without nodelay and without delay= admits the first request at once and makes every later one of a burst wait its turn at the rate: a bucket of one with K−1 waiting")
		}
	case delays:
		for i := range h.Tiers {
			want, got := declared.DelayFor(&declared.Tiers[i]), h.Tiers[i].Delay
			if !sameDelay(want, got, &h.Tiers[i]) {
				t.deviate(fmt.Sprintf("tier %s delays as declared", h.Tiers[i].Name), "nginx without nodelay holds a request at most Q/r, Q the requests past K that may wait (burst=K−1+Q delay=K−1), a whole number")
				break
			}
		}
	}
}

// sameDelay reports whether got, the delay nginx keeps for tier, is the
// declared want: the same max_wait, and the same queue or, none declared,
// the most that max_wait lets wait anyway.
func sameDelay(want, got *policy.Delay, tier *policy.Tier) bool {
	if want == nil || got == nil {
		return want == got
	}
	if want.MaxWait != got.MaxWait {
		return false
	}
	if want.Queue == 0 {
		for _, l := range tier.Limits {
			if int64(got.Queue) != int64(math.Floor(want.MaxWait.D().Seconds()*l.R()+1e-9)) {
				return false
			}
		}
		return true
	}
	return want.Queue == got.Queue
}

// nginxQueue is Q', how many requests past K of limit tl may wait under
// the declared delay of its tier, nginx refilling at r: the declared queue,
// at most ⌊D·r⌋ (past that a request would wait longer than max_wait D);
// with no queue declared, ⌊D·r⌋. Zero when the tier declares no delay.
func nginxQueue(declared *policy.Policy, tl tierLimit, r float64) int64 {
	var d *policy.Delay
	if tl.Tier == "" {
		d = declared.Delay
	} else if tier, ok := declared.Tier(tl.Tier); ok {
		d = declared.DelayFor(tier)
	}
	if d == nil {
		return 0
	}
	q := int64(math.Floor(d.MaxWait.D().Seconds()*r + 1e-9))
	if d.Queue > 0 {
		q = min(q, int64(d.Queue))
	}
	return max(q, 0)
}
