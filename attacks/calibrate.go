package attacks

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// Defaults of a calibrate phase.
const (
	DefaultCalibrateTokens = 3
	DefaultCalibrateMargin = 0.05
	// minCalibrateMargin keeps the probes apart from their due time by more
	// than loopback timing noise.
	minCalibrateMargin = 5 * time.Millisecond
)

// calibrate measures what the limiter really does with a key: it waits
// until the key's quota is whole, sends a burst of one more than the quota
// (the capacity shows in how many are admitted), then probes each of the
// next Tokens due times twice, just before and just after: a token (bucket
// families) or a freed window (window families) that comes early admits
// the early probe, one that comes late refuses the late probe. The checks
// (calibration, oversell, under-admission, retry-after, headers) read the
// measured capacity, rate, advice and remaining counts from the events.
func (e *Engine) calibrate(ctx context.Context, ph *Phase) (*history.Phase, error) {
	if e.share(1) == 0 {
		return &history.Phase{}, nil // one shard calibrates
	}
	key := e.Key(ph.Key)
	lim, err := e.limitFor(key)
	if err != nil {
		return nil, err
	}
	tokens, margin := ph.Tokens, ph.Margin
	if tokens == 0 {
		tokens = DefaultCalibrateTokens
	}
	if margin == 0 {
		margin = DefaultCalibrateMargin
	}
	rec := &history.Phase{Start: e.off()}
	// A whole quota: a refill (W) since this key's last use, if any.
	if _, used := e.keysUsed.Load(key); used {
		e.o.Sleep(ctx, lim.W()+50*time.Millisecond)
	}
	n := int(min(lim.Count+1, MaxBurstRequests))
	burst, err := e.burst(ctx, ph, ph.Key, n, -1)
	if err != nil || ctx.Err() != nil {
		return burst, err
	}
	rec.Requests = burst.Requests
	rec.SpreadP50, rec.SpreadP99, rec.SpreadMax = burst.SpreadP50, burst.SpreadP99, burst.SpreadMax
	t0 := burst.Start
	var dues []time.Duration
	period := tierPeriodOf(lim)
	switch {
	case lim.Algorithm.Bucketed() && period < minCalibratePeriod:
		// A token every few milliseconds is finer than one probe's timing
		// on a loaded machine: probes paced at twice the rate keep the
		// bucket empty for denseSpan instead, and every refusal bounds the
		// refill from above, every admission from below, to within about
		// (1 + r·tolerance) / (r·denseSpan).
		n, note := e.denseProbes(ctx, ph, period, t0)
		rec.Requests += n
		if note != "" {
			rec.Notes = append(rec.Notes, note)
		}
		rec.Target = t0
		return rec, ctx.Err()
	case lim.Algorithm.Bucketed():
		for j := 1; j <= tokens; j++ {
			dues = append(dues, time.Duration(float64(j)/lim.R()*float64(time.Second)))
		}
	case lim.Algorithm == policy.SlidingLog || lim.AnchoredAtFirst():
		dues = append(dues, lim.W())
	case lim.Algorithm == policy.FixedWindow:
		// The next aligned edge after the burst.
		wall := e.wall(t0)
		edge := wall.Truncate(lim.W()).Add(lim.W())
		dues = append(dues, edge.Sub(wall))
	default:
		rec.Notes = append(rec.Notes, fmt.Sprintf("calibrate: a %s's refill is approximate; only its capacity is measured", lim.Algorithm))
	}
	for j, due := range dues {
		m := max(time.Duration(margin*float64(due)), minCalibrateMargin)
		if lim.Algorithm.Bucketed() {
			m = min(m, time.Duration(0.45/lim.R()*float64(time.Second)))
		}
		for _, at := range []time.Duration{due - m, due + m} {
			if ctx.Err() != nil {
				return rec, nil
			}
			if time.Duration(e.off()-t0) > at {
				rec.Notes = append(rec.Notes, fmt.Sprintf("calibrate: probe %d at %s after the burst was already past when it could be sent", j+1, at))
				continue
			}
			r, err := e.burst(ctx, ph, ph.Key, 1, t0+int64(at))
			if err != nil {
				return rec, err
			}
			rec.Requests += r.Requests
		}
	}
	rec.Target = t0
	return rec, nil
}

// denseSpan is how long probes paced at twice a fast tier's rate keep its
// bucket empty after the calibrate burst.
const denseSpan = time.Second

// minProbeGap is the shortest gap between two probes of a fast tier: a
// probe dials, writes and waits for its answer before the next.
const minProbeGap = 2 * time.Millisecond

// denseProbes sends single requests for ph's key every period/2 for
// denseSpan, from the burst at t0 or, when its answers came later (a burst
// of thousands), from the last answer; a probe whose time has passed goes at once (the
// check reads when each was decided, not when it was meant to be). It
// returns how many were sent and, when the rate is too fast to outpace, a
// note saying the refill was not measured.
func (e *Engine) denseProbes(ctx context.Context, ph *Phase, period time.Duration, t0 int64) (int64, string) {
	gap := period / 2
	if gap < minProbeGap {
		return 0, fmt.Sprintf("calibrate: refill not measured: a token every %s is faster than probes can keep the bucket empty (one every %s at most); only the capacity is", period, minProbeGap)
	}
	var sent int64
	from := max(t0, e.off())
	for at := gap; at <= denseSpan; at += gap {
		if ctx.Err() != nil {
			break
		}
		when := from + int64(at)
		if e.off() > when {
			when = -1
		}
		r, err := e.burst(ctx, ph, ph.Key, 1, when)
		if err != nil || r == nil {
			break
		}
		sent += r.Requests
	}
	return sent, ""
}

// expandTiers returns p with each calibrate phase marked tiers: all
// replaced by one calibrate phase per tier of the policy (named
// NAME-TIER), the phase's own key for its own tier and, for each other
// tier, a key of that tier with the same ending (paid-precise beside
// free-precise). A tier no key can be given (a keys file without keys for
// it) is named in the notes, not calibrated. p itself is not changed.
func (e *Engine) expandTiers(p *Plan) (*Plan, []string) {
	if e.o.Policy == nil || !slices.ContainsFunc(p.Phases, func(ph Phase) bool { return ph.Kind == KindCalibrate && ph.Tiers == "all" }) {
		return p, nil
	}
	out := *p
	out.Phases = nil
	var notes []string
	for _, ph := range p.Phases {
		if ph.Kind != KindCalibrate || ph.Tiers != "all" {
			out.Phases = append(out.Phases, ph)
			continue
		}
		own, _ := PlanTier(e.o.Policy, ph.Key)
		_, rest, _ := strings.Cut(ph.Key, "-")
		for i := range e.o.Policy.Tiers {
			t := &e.o.Policy.Tiers[i]
			key := ph.Key
			if own == nil || own.Name != t.Name {
				if d, fast := fastWindow(t); fast {
					// A window that frees that often: a burst of K+1 on a
					// loaded machine can straddle it, leaving the capacity
					// undecided, an unknown on a correct limiter. Fast
					// buckets are calibrated with dense probes.
					notes = append(notes, fmt.Sprintf("%s: tier %s not calibrated: a window every %s is finer than a burst's timing on a loaded machine (at least %s); oversell and under-admission still judge it wherever a plan sends its keys", ph.Name, t.Name, d, minCalibratePeriod))
					continue
				}
				key = t.Name + "-" + rest
				if t.KeyPrefix != "" {
					key = t.KeyPrefix + rest
				}
				if got, ok := PlanTier(e.o.Policy, key); !ok || got.Name != t.Name {
					notes = append(notes, fmt.Sprintf("%s: tier %s not calibrated: no plan key maps to it", ph.Name, t.Name))
					continue
				}
				if _, err := e.keys.key(key); err != nil {
					notes = append(notes, fmt.Sprintf("%s: tier %s not calibrated: %v", ph.Name, t.Name, err))
					continue
				}
			}
			tp := ph
			tp.Tiers, tp.Key, tp.Name = "", key, ph.Name+"-"+t.Name
			out.Phases = append(out.Phases, tp)
		}
	}
	return &out, notes
}

// minCalibratePeriod is the shortest refill period (1/r, or W) a
// calibrate phase probes at its due times; a faster bucket is probed
// densely (denseProbes), a faster window is not calibrated by tiers: all.
const minCalibratePeriod = 50 * time.Millisecond

// fastWindow is the period of a window of tier t that frees a request
// more often than minCalibratePeriod, which tiers: all leaves out.
func fastWindow(t *policy.Tier) (time.Duration, bool) {
	for _, l := range t.Limits {
		if p := tierPeriodOf(l); !l.Algorithm.Bucketed() && p < minCalibratePeriod {
			return p, true
		}
	}
	return 0, false
}

// tierPeriodOf is how often limit l frees one request: 1/r for buckets, W
// for windows.
func tierPeriodOf(l policy.Limit) time.Duration {
	if l.Algorithm.Bucketed() {
		return time.Duration(float64(time.Second) / l.R())
	}
	return l.W()
}
