package checks

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// A declared limit change (policy.Change, applied by a limit-change fault)
// lowers a tier's limits during a run; every key keeps its counters. Each
// request is judged against the limit in force when it was decided:
//
//   - every admission, before and after the change, stays within the
//     declared limits (oversell as ever: a change only lowers them, so they
//     bound what a key may take across it). A limiter that forgets its keys'
//     state at the change admits a fresh burst beside the one it admitted
//     just before: an overrun of the declared envelope;
//   - the admissions decided from the change's propagation tolerance after
//     it was made until it was undone stay within the changed limits, from
//     a full bucket of them (a key's level is at most the new capacity once
//     the change is in force). A limiter that keeps its old limit fails
//     here, named after the change;
//   - refusals, advice, remaining counts and headers of the changed tier
//     after the change was made are not judged (the limit in force is the
//     new one, and what a key held at the change is not known exactly):
//     the checks that need them skip those requests (rec.changed).
//
// In an external run (a hook changed the service's limit) the change counts
// only when an answer advertises the new limit (X-RateLimit-Limit,
// RateLimit-Limit or RateLimit-Policy's q); otherwise nothing is judged
// under it and the summary says why.

// LimitChangeFault is the fault kind of a declared limit change.
const LimitChangeFault = "limit-change"

// changedFrom is, per tier a declared change of p was applied to in h, the
// earliest offset the change may have been made at.
func changedFrom(h *history.History, p *policy.Policy) map[string]int64 {
	var out map[string]int64
	for _, f := range h.Faults {
		if f.Kind != LimitChangeFault {
			continue
		}
		c, ok := p.ChangeNamed(strings.TrimSpace(f.Param))
		if !ok {
			continue
		}
		from, _ := f.Span()
		if out == nil {
			out = map[string]int64{}
		}
		if was, ok := out[c.Tier]; !ok || from < was {
			out[c.Tier] = from
		}
	}
	return out
}

// changed reports whether e, decided no later than hi, may have met a
// changed limit of its tier.
func (ix *index) changed(e *history.Event, hi int64) bool {
	tier := e.Tier
	if tier == "" {
		t, ok := ix.p.TierFor(e.Key)
		if !ok {
			return false
		}
		tier = t.Name
	}
	from, ok := ix.changedFrom[tier]
	return ok && hi >= from
}

// noteChangeAcross says in ev's message that its interval spans a declared
// change of tier's limits: the declared limits bound it all the same.
func (ix *index) noteChangeAcross(ev *Evidence, tier *policy.Tier) {
	if len(ix.changedFrom) == 0 || tier == nil {
		return
	}
	for _, f := range ix.h.Faults {
		c, ok := ix.p.ChangeNamed(strings.TrimSpace(f.Param))
		if f.Kind != LimitChangeFault || !ok || c.Tier != tier.Name {
			continue
		}
		if ev.From <= f.Start+int64(ix.p.Propagation()) && ev.To >= f.Start {
			ev.Message += fmt.Sprintf(" — across the limit change %s made at %s, which only lowers the declared limits: a key keeps its state across a change, and these admissions exceed even the limits before it", c.Name, fmtDur(time.Duration(f.Start)))
			return
		}
	}
}

// judgeChangedLimits adds to col the overruns of the changed limits while
// each declared change was in force and returns notes for oversell's
// summary and the worst overrun's ratio to its bound.
func (ix *index) judgeChangedLimits(col *collector) (notes []string, maxOver float64) {
	prop := ix.p.Propagation()
	for _, f := range ix.h.Faults {
		if f.Kind != LimitChangeFault {
			continue
		}
		name := strings.TrimSpace(f.Param)
		c, ok := ix.p.ChangeNamed(name)
		if !ok {
			notes = append(notes, fmt.Sprintf("the limit change %q at %s is not one the policy declares (changes): nothing was judged under it", name, fmtDur(time.Duration(f.Start))))
			continue
		}
		what := fmt.Sprintf("the limit change %s (tier %s: %s) made at %s", c.Name, c.Tier, describeChange(c.Limits), fmtDur(time.Duration(f.Start)))
		if ok, why := ix.changeTookEffect(f, c); !ok {
			notes = append(notes, fmt.Sprintf("%s was not shown to have taken effect (%s): nothing was judged under it", what, why))
			continue
		}
		from, to := f.Start+int64(prop), f.End
		if to == 0 {
			to = ix.maxRecv
		}
		sub := &history.History{Run: ix.h.Run}
		for i := range ix.h.Events {
			e := &ix.h.Events[i]
			if e.Sent < from || e.Recv > to || e.Variant != "" {
				continue
			}
			if t, ok := ix.p.TierFor(e.Key); !ok || t.Name != c.Tier {
				continue
			}
			sub.Events = append(sub.Events, *e)
		}
		if len(sub.Events) == 0 {
			notes = append(notes, fmt.Sprintf("no request of tier %s was decided while %s was in force (from its propagation tolerance %s after it)", c.Tier, what, fmtDur(prop)))
			continue
		}
		r := checkOversell(newIndex(sub, ix.p.WithChange(c), ix.o))
		for _, e := range r.Evidence {
			if e.Bound > 0 {
				maxOver = max(maxOver, e.Observed/e.Bound)
			}
			e.Message += fmt.Sprintf(" — under %s, in force from %s (propagation tolerance %s)", what, fmtDur(time.Duration(from)), fmtDur(prop))
			col.add(e)
		}
		if len(r.Evidence) == 0 {
			notes = append(notes, fmt.Sprintf("%d request(s) of tier %s judged against %s, within it", len(sub.Events), c.Tier, what))
		}
	}
	return notes, maxOver
}

func describeChange(ls []policy.Limit) string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.Describe()
	}
	return strings.Join(out, ", ")
}

// changeTookEffect: a change rlverify made in its own environment took
// effect; in an external run, an answer of the tier after the change must
// advertise the changed limit's count.
func (ix *index) changeTookEffect(f history.Fault, c *policy.Change) (bool, string) {
	if ix.h.Run.Env != "external" {
		return true, ""
	}
	n := c.Limits[0].Count
	for i := range ix.h.Events {
		e := &ix.h.Events[i]
		if e.Sent < f.Start {
			continue
		}
		if t, ok := ix.p.TierFor(e.Key); !ok || t.Name != c.Tier {
			continue
		}
		if leadingInt(e.XLimit) == n || leadingInt(e.RateLimitLimit) == n || strings.Contains(e.RateLimitPolicy, fmt.Sprintf("q=%d", n)) {
			return true, ""
		}
	}
	how := "the hook ran"
	if len(f.Hooks) == 0 {
		how = "it was injected"
	}
	return false, fmt.Sprintf("%s, but no answer of tier %s advertised the changed limit %d", how, c.Tier, n)
}

// leadingInt is the whole number v starts with (-1 when none).
func leadingInt(v string) int64 {
	v = strings.TrimSpace(v)
	end := 0
	for end < len(v) && v[end] >= '0' && v[end] <= '9' {
		end++
	}
	n, err := strconv.ParseInt(v[:end], 10, 64)
	if err != nil {
		return -1
	}
	return n
}
