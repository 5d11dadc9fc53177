package gateway

import (
	"fmt"
	"time"

	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policy"
)

// honestDelays makes t's honest policy declare what gateway g does with a
// request for which no token is free. nginx without nodelay (mode delay,
// burst=K−1) holds it until its excess drains, excess/r, and refuses only
// past the burst: a tier of limits (K, r) delays up to the longest
// (K−1)/r, with at most the smallest K−1 of a key waiting (a tier whose
// limits all have K = 1 has no burst and delays nothing). Every other
// gateway refuses at once: a declared delay is a deviation.
func honestDelays(t *translation, g catalog.Gateway, declared *policy.Policy) {
	h := t.honest
	h.Delay = nil
	delays := g.Kind == catalog.NGINX && g.Mode == "delay"
	for i := range h.Tiers {
		tier := &h.Tiers[i]
		tier.Delay = nil
		if !delays {
			continue
		}
		var wait time.Duration
		queue := int64(-1)
		for _, l := range tier.Limits {
			if l.Capacity < 2 {
				continue
			}
			wait = max(wait, time.Duration(float64(l.Capacity-1)/l.R()*float64(time.Second)))
			if queue < 0 || l.Capacity-1 < queue {
				queue = l.Capacity - 1
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
	case delays:
		for i := range h.Tiers {
			want, got := declared.DelayFor(&declared.Tiers[i]), h.Tiers[i].Delay
			if got == nil || want == nil || want.MaxWait != got.MaxWait || want.Queue != got.Queue {
				t.deviate(fmt.Sprintf("tier %s delays as declared", h.Tiers[i].Name), "nginx without nodelay holds a request up to (K−1)/r, at most K−1 of a key waiting")
				break
			}
		}
	}
}
