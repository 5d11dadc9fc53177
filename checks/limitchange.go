package checks

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// A declared limit change (policy.Change, applied by a limit-change fault)
// lowers or raises a tier's limits during a run; every key keeps its
// counters. It is made at the fault's start and in force everywhere within
// the policy's propagation tolerance after it; a key's level once it is in
// force is at most min(what it held, the new capacity). Each request is
// judged against the limits in force when it was decided:
//
//   - oversell: a lowering's changed tier stays within the declared limits
//     across it (a change only lowers them, so they bound what a key may
//     take), a raise's within the raised limits over the whole run (they
//     bound the tier's own), its requests before the change within the
//     tier's own. A limiter that forgets its keys' state at the change
//     admits a fresh burst beside the one it admitted just before: an
//     overrun of that envelope;
//   - oversell: the admissions decided from the change's propagation
//     tolerance after it was made until it was undone stay within the
//     changed limits, from a full bucket of them. A limiter that keeps its
//     old limit after a lowering fails here, named after the change;
//   - headers: every answer of the changed tier while the change is in
//     force advertises the changed limits (X-RateLimit-Limit, RateLimit,
//     RateLimit-Policy's q), so a limiter that enforces the new limit and
//     advertises the old one is a headers finding; when the limiter is
//     shown to enforce the old one (an overrun or a wrongful refusal under
//     the change) the old figure in its headers is that defect's, not a
//     second one, and the summary says so;
//   - under-admission, token-bounds and retry-after: a key's state is known
//     again once it has had, after the change is in force and after its
//     last request that may have consumed, long enough to refill from empty
//     under the changed limits (their longest W, twice that for a sliding
//     counter, plus the timing tolerance): from that request on its
//     requests are judged as any run's, by the changed limits, from a full
//     bucket. A limiter that keeps its old limit after a raise refuses
//     wrongfully there, named after the change. The changed tier's
//     requests between the change and that point are not judged by these
//     checks (what a key held at the change is not known exactly), and
//     their summaries say so.
//
// In an external run (a hook changed the service's limit) the change counts
// only when an answer advertises the new limit (X-RateLimit-Limit,
// RateLimit-Limit or RateLimit-Policy's q); otherwise nothing is judged
// under it and the summary says why.

// LimitChangeFault is the fault kind of a declared limit change.
const LimitChangeFault = "limit-change"

// changedFrom is, per tier a declared change of p was applied to in h, the
// earliest offset the change may have been made at; raised is set for a
// tier one of them raised.
func changedFrom(h *history.History, p *policy.Policy) (out map[string]int64, raised map[string]bool) {
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
			out, raised = map[string]int64{}, map[string]bool{}
		}
		if was, ok := out[c.Tier]; !ok || from < was {
			out[c.Tier] = from
		}
		if p.ChangeRaises(c) {
			raised[c.Tier] = true
		}
	}
	return out, raised
}

// changed reports whether e, decided no later than hi, may have met a
// changed limit of its tier, and whether a change of that tier raised it.
func (ix *index) changed(e *history.Event, hi int64) (changed, raised bool) {
	tier := e.Tier
	if tier == "" {
		t, ok := ix.p.TierFor(e.Key)
		if !ok {
			return false, false
		}
		tier = t.Name
	}
	from, ok := ix.changedFrom[tier]
	return ok && hi >= from, ix.raised[tier]
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
			if ix.p.ChangeRaises(c) {
				ev.Message += fmt.Sprintf(" — before the limit change %s made at %s, which raises the declared limits: the tier's own bound a key until it is in force", c.Name, fmtDur(time.Duration(f.Start)))
				return
			}
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
		if ix.p.ChangeRaises(c) {
			// The raised limits bound the tier over the whole run: a key
			// keeps what it held (within the tier's own, which they
			// bound) and refills to them no faster than they allow.
			all := ix.tierHistory(c.Tier, func(*history.Event) bool { return true })
			r := checkOversell(newIndex(all, ix.p.WithChange(c), ix.o))
			for _, e := range r.Evidence {
				if e.Bound > 0 {
					maxOver = max(maxOver, e.Observed/e.Bound)
				}
				e.Message += fmt.Sprintf(" — across %s, which raises the declared limits: the raised limits bound a key over the whole run (it keeps its state across a change), and these admissions exceed even them", what)
				col.add(e)
			}
		}
		sub := ix.tierHistory(c.Tier, func(e *history.Event) bool { return e.Sent >= from && e.Recv <= to })
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

// tierHistory is h's non-variant events of tier that keep, with its faults
// other than limit changes (store faults still mark their requests).
func (ix *index) tierHistory(tier string, keep func(*history.Event) bool) *history.History {
	sub := &history.History{Run: ix.h.Run}
	for _, f := range ix.h.Faults {
		if f.Kind != LimitChangeFault {
			sub.Faults = append(sub.Faults, f)
		}
	}
	for i := range ix.h.Events {
		e := &ix.h.Events[i]
		if e.Variant != "" || !keep(e) {
			continue
		}
		if t, ok := ix.p.TierFor(e.Key); !ok || t.Name != tier {
			continue
		}
		sub.Events = append(sub.Events, *e)
	}
	return sub
}

// changeState says from where a check judges a changed tier's requests.
type changeState int

const (
	// fromInForce: every request decided while the change is in force
	// (what is advertised does not depend on a key's state).
	fromInForce changeState = iota
	// fromKnownState: a key's requests from the first one after a refill
	// from empty under the changed limits (its state is then known).
	fromKnownState
)

// appliedChange is a declared change a run applied and showed in force.
type appliedChange struct {
	f        history.Fault
	c        *policy.Change
	from, to int64 // in force from (made + propagation) until undone
	what     string
}

// appliedChanges are the declared changes h applied that took effect,
// and notes on those that did not.
func (ix *index) appliedChanges() (out []appliedChange, notes []string) {
	prop := int64(ix.p.Propagation())
	for _, f := range ix.h.Faults {
		if f.Kind != LimitChangeFault {
			continue
		}
		c, ok := ix.p.ChangeNamed(strings.TrimSpace(f.Param))
		if !ok {
			continue // oversell's summary says so
		}
		what := fmt.Sprintf("the limit change %s (tier %s: %s) made at %s", c.Name, c.Tier, describeChange(c.Limits), fmtDur(time.Duration(f.Start)))
		if ok, why := ix.changeTookEffect(f, c); !ok {
			notes = append(notes, fmt.Sprintf("%s was not shown to have taken effect (%s): nothing was judged under it", what, why))
			continue
		}
		to := f.End
		if to == 0 {
			to = ix.maxRecv
		}
		out = append(out, appliedChange{f: f, c: c, from: f.Start + prop, to: to, what: what})
	}
	return out, notes
}

// refillSpan is how long after a key's last consumption its state is known
// under limits: its longest W (twice a sliding counter's, whose previous
// window still weighs), false for a quota that never refills.
func refillSpan(ls []policy.Limit) (time.Duration, bool) {
	var d time.Duration
	for _, l := range ls {
		if l.NeverRefills() {
			return 0, false
		}
		w := l.W()
		if l.Algorithm == policy.SlidingCounter {
			w *= 2
		}
		d = max(d, w)
	}
	return d, true
}

// knownStateHistory is ac's tier's requests decided while it is in force
// from the first request of each key whose state is known (see
// refillSpan): sent at least that span plus the timing tolerance after
// both the change was in force and the key's last request that may have
// consumed (any but a refusal by the limit) was answered.
func (ix *index) knownStateHistory(ac appliedChange) (*history.History, string) {
	span, ok := refillSpan(ac.c.Limits)
	if !ok {
		return nil, "a limit that never refills leaves a key's state after the change unknown"
	}
	gap := int64(span) + ix.tol + 2*ix.slack
	byKey := map[string][]int{}
	var keys []string
	for i := range ix.h.Events {
		e := &ix.h.Events[i]
		if e.Variant != "" {
			continue
		}
		if t, ok := ix.p.TierFor(e.Key); !ok || t.Name != ac.c.Tier {
			continue
		}
		if _, ok := byKey[e.Key]; !ok {
			keys = append(keys, e.Key)
		}
		byKey[e.Key] = append(byKey[e.Key], i)
	}
	keep := map[*history.Event]bool{}
	for _, k := range keys {
		idx := byKey[k]
		sort.SliceStable(idx, func(a, b int) bool { return ix.h.Events[idx[a]].Sent < ix.h.Events[idx[b]].Sent })
		busy := int64(math.MinInt64)
		known := false
		for _, i := range idx {
			e := &ix.h.Events[i]
			if !known && e.Sent >= ac.from && e.Sent-max(ac.from, busy) >= gap {
				known = true
			}
			if known && e.Sent >= ac.from && e.Recv <= ac.to {
				keep[e] = true
			}
			out := Outcome(ix.p, e)
			if out != history.Rejected || (len(ix.p.Statuses.Rejected) > 0 && !ix.p.Statuses.Rejected.Has(e.Status)) || (len(ix.p.Statuses.Rejected) == 0 && e.Status != 429) {
				busy = max(busy, e.Recv)
			}
		}
	}
	return ix.tierHistory(ac.c.Tier, func(e *history.Event) bool { return keep[e] }), ""
}

// enforcesOldLimit reports whether the limiter is shown to decide by
// other limits than ac's while it is in force: an overrun of them, or a
// wrongful refusal from a known state.
func (ix *index) enforcesOldLimit(ac appliedChange) string {
	pc := ix.p.WithChange(ac.c)
	in := ix.tierHistory(ac.c.Tier, func(e *history.Event) bool { return e.Sent >= ac.from && e.Recv <= ac.to })
	if len(in.Events) > 0 && len(checkOversell(newIndex(in, pc, ix.o)).Evidence) > 0 {
		return "oversell"
	}
	if kn, _ := ix.knownStateHistory(ac); kn != nil && len(kn.Events) > 0 && len(checkUnder(newIndex(kn, pc, ix.o)).Evidence) > 0 {
		return "under-admission"
	}
	return ""
}

// afterChange judges, beside run's judgement of the run, each applied
// change's tier while it is in force by its changed limits (from state,
// see the top of this file), and says in the summary what stays unjudged.
func afterChange(run func(*index) Result, state changeState) func(*index) Result {
	return func(ix *index) Result {
		res := run(ix)
		if len(ix.changedFrom) == 0 {
			return res
		}
		acs, notes := ix.appliedChanges()
		var found []Evidence
		judged, total := false, 0
		for _, ac := range acs {
			var sub *history.History
			var why string
			if state == fromInForce {
				sub = ix.tierHistory(ac.c.Tier, func(e *history.Event) bool { return e.Sent >= ac.from && e.Recv <= ac.to })
			} else {
				sub, why = ix.knownStateHistory(ac)
			}
			if sub == nil || len(sub.Events) == 0 {
				if why == "" {
					why = "no key of the tier had refilled from empty under the changed limits after it was in force"
				}
				notes = append(notes, fmt.Sprintf("tier %s's requests after %s not judged (%s)", ac.c.Tier, ac.what, why))
				continue
			}
			sr := run(newIndex(sub, ix.p.WithChange(ac.c), ix.o))
			scope := fmt.Sprintf("after %s, by its limits from %s", ac.what, fmtDur(time.Duration(ac.from)))
			if state == fromKnownState {
				scope += " (each key from its first request after a refill from empty under them)"
			}
			if len(sr.Evidence) > 0 && state == fromInForce {
				if by := ix.enforcesOldLimit(ac); by != "" {
					notes = append(notes, fmt.Sprintf("%s the answers of tier %s advertise other limits than the changed ones, as the limiter also decides by them (%s under the change): that defect's, not a second one", scope, ac.c.Tier, by))
					continue
				}
			}
			var byOld map[uint64]bool
			if len(sr.Evidence) > 0 && state == fromKnownState {
				// What the tier's own limits would not find: the limiter
				// decides by its old limits there, not for another cause.
				byOld = map[uint64]bool{}
				for _, e := range run(newIndex(sub, ix.p, ix.o)).Evidence {
					for _, id := range e.RequestIDs {
						byOld[id] = true
					}
				}
			}
			for _, e := range sr.Evidence {
				if byOld != nil && len(e.RequestIDs) > 0 && !byOld[e.RequestIDs[0]] {
					e.Message = strings.Replace(e.Message, selfInflictedNote, "", 1)
					if e.Cause == CauseSelfInflicted {
						e.Cause = ""
					}
					e.Message += fmt.Sprintf("; the tier's limits before the change (%s) allow it: the limiter decides by them still", describeChange(ix.tierLimits(ac.c.Tier)))
				}
				e.Message += " — " + scope
				found = append(found, e)
			}
			total += int(sr.Figures["violations"])
			if len(sr.Evidence) == 0 {
				switch sr.Verdict {
				case Pass:
					judged = true
					notes = append(notes, fmt.Sprintf("%s: %s", scope, sr.Summary))
				default:
					notes = append(notes, fmt.Sprintf("%s: nothing judged (%s)", scope, sr.Summary))
				}
			}
			if state == fromKnownState {
				notes = append(notes, fmt.Sprintf("tier %s's requests between %s and each key's refill from empty are not judged (what a key held at the change is not known exactly)", ac.c.Tier, ac.what))
			}
		}
		if len(found) > 0 {
			if res.Figures == nil {
				res.Figures = map[string]float64{}
			}
			total = max(total, len(found))
			res.Figures["violations"] += float64(total)
			room := max(0, ix.o.MaxEvidence-len(res.Evidence))
			res.Evidence = append(res.Evidence, found[:min(room, len(found))]...)
			if res.Verdict != Fail {
				res.Verdict = Fail
				res.Summary = fmt.Sprintf("%s after a declared limit change", plural(total, "violation", "violations"))
			}
		} else if res.Verdict == Skip && judged {
			res.Verdict = Pass
		}
		if len(notes) > 0 {
			res.Summary += "; " + strings.Join(notes, "; ")
		}
		return res
	}
}

// tierLimits are tier's declared limits.
func (ix *index) tierLimits(tier string) []policy.Limit {
	for i := range ix.p.Tiers {
		if ix.p.Tiers[i].Name == tier {
			return ix.p.Tiers[i].Limits
		}
	}
	return nil
}
