package checks

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rlverify/rlverify/history"
)

// A clock-skew fault steps an instance's wall clock: by its param when it
// is injected, and back when it is cleared. A limiter that decides on a
// monotonic clock (or on its store's clock) does not notice; one that
// trusts the wall clock credits the tokens a forward step seems to have
// accrued (oversell) and, stepped back, refills nothing until the wall
// clock has caught up with its last update (under-admission). The checks
// judge those symptoms as they judge any other; this file names the step
// as their cause when the step is shown to have taken effect, so that the
// two symptoms of one clock step are one defect (CauseClockStep), and says
// so in the summaries when it is not.

// CauseClockStep: a violation right after a step of the deciding
// instance's clock (Evidence.FaultFrom is when that clock-skew fault
// began). The forward step's overrun and the backward step's stall are one
// defect: a limiter that trusts the wall clock.
const CauseClockStep = "clock-step"

// dateResolution is the Date header's: whole seconds.
const dateResolution = time.Second

// httpDate is the form the engine records a Date header in (net/http's
// TimeFormat; checks read no network package).
const httpDate = "Mon, 02 Jan 2006 15:04:05 GMT"

// clockStep is one step of an instance's clock: a clock-skew fault's
// injection (by its param) or its clearing (back by it).
type clockStep struct {
	fault history.Fault
	// inst is the stepped instance (-1: every instance).
	inst int
	at   int64
	by   time.Duration
	// verified says the step took effect, how says why (or why not).
	verified bool
	how      string
}

func (s clockStep) what() string {
	who := "every instance's clock"
	if s.inst >= 0 {
		who = fmt.Sprintf("instance %d's clock", s.inst)
	}
	dir := "forward"
	if s.by < 0 {
		dir = "back"
	}
	return fmt.Sprintf("%s stepped %s by %s at %s", who, dir, fmtDur(absDur(s.by)), fmtDur(time.Duration(s.at)))
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// clockSteps are the steps of h's clock-skew faults, each with whether it
// took effect.
func (ix *index) clockSteps() []clockStep {
	var out []clockStep
	for _, f := range ix.h.Faults {
		if f.Kind != "clock-skew" {
			continue
		}
		param, at, _ := strings.Cut(strings.TrimSpace(f.Param), "@")
		by, err := time.ParseDuration(param)
		if err != nil || by == 0 {
			continue
		}
		inst := -1
		if n, err := strconv.Atoi(strings.TrimPrefix(f.Target, "instance ")); err == nil {
			inst = n
		} else if n, err := strconv.Atoi(at); err == nil {
			inst = n
		}
		ok, how := ix.clockStepTookEffect(f, inst, by)
		out = append(out, clockStep{fault: f, inst: inst, at: f.Start, by: by, verified: ok, how: how})
		if f.End != 0 {
			out = append(out, clockStep{fault: f, inst: inst, at: f.End, by: -by, verified: ok, how: how})
		}
	}
	return out
}

// clockStepTookEffect says whether the stepped instance's clock moved by
// by while the fault held, as its answers' Date headers show against the
// engine's clock (the same span before the fault, or after it), and why.
// A step in an environment rlverify started is its own doing (the
// instance's clock) and took effect; in an external run (a hook stepped
// the service's clock) only the Date headers can show it.
func (ix *index) clockStepTookEffect(f history.Fault, inst int, by time.Duration) (bool, string) {
	end := f.End
	if end == 0 {
		end = ix.maxRecv
	}
	during, before, after := ix.dateOffsets(inst, f.Start, end), ix.dateOffsets(inst, 0, f.Injecting), []int64(nil)
	if f.End != 0 {
		after = ix.dateOffsets(inst, max(f.End, f.Cleared), 1<<62)
	}
	ref, where := before, "before"
	if len(ref) == 0 {
		ref, where = after, "after"
	}
	own := ix.h.Run.Env != "external"
	shown := ""
	if len(during) > 0 && len(ref) > 0 {
		moved := time.Duration(median(during) - median(ref))
		if absDur(by) >= dateResolution && (moved > 0) == (by > 0) && absDur(moved-by) <= dateResolution+100*time.Millisecond && absDur(moved) >= dateResolution/2 {
			return true, fmt.Sprintf("its Date header moved %s against the engine's clock, median during the step against %s it", fmtDur(moved), where)
		}
		shown = fmt.Sprintf("the instance's Date header moved %s against the engine's clock during the step, not %s (median %s it, during the step)", fmtDur(moved), fmtDur(by), where)
	} else if absDur(by) < dateResolution {
		shown = fmt.Sprintf("a step of %s is below the Date header's one-second resolution", fmtDur(absDur(by)))
	} else {
		shown = "no answer carried a Date header both during the step and outside it"
	}
	if own {
		return true, "rlverify stepped the instance's own clock (" + shown + ")"
	}
	if abs := absDur(by); abs >= dateResolution && len(during) > 0 && len(ref) > 0 {
		return false, shown + ": the step may never have happened"
	}
	return false, shown + ": nothing shows that the step happened"
}

// dateOffsets are the Date headers of inst's answers decided within
// [from, to] less the engine's wall clock at their receipt, ns.
func (ix *index) dateOffsets(inst int, from, to int64) []int64 {
	var out []int64
	if to <= from {
		return nil
	}
	for i := range ix.h.Events {
		e := &ix.h.Events[i]
		if e.Date == "" || (inst >= 0 && e.Instance != inst) || e.Sent < from || e.Recv > to {
			continue
		}
		t, err := time.Parse(httpDate, e.Date)
		if err != nil {
			continue
		}
		out = append(out, t.Sub(ix.h.Run.Start.Add(time.Duration(e.Recv))).Nanoseconds())
	}
	return out
}

func median(xs []int64) int64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// attributeClockSteps names a step of the deciding instance's clock as the
// cause of oversell, under-admission and retry-after evidence right after
// it (advice a stalled bucket gave): an overrun within one refill horizon
// of a forward step, a refusal or its advice within the step's size and
// one horizon of a backward step, unless the same check also
// failed on a key no step touched (a violation before its key's first
// step, or of a key all of whose requests came after the last step): the
// limiter then fails without a step, and its other findings keep their
// own cause. It says in their summaries when a step was not shown to have
// taken effect, and when a check passed across steps that did.
func (ix *index) attributeClockSteps(rs []Result) {
	steps := ix.clockSteps()
	if len(steps) == 0 {
		return
	}
	horizon := horizonOf(ix.p)
	var instOf map[uint64]int
	var firstOf, lastOf map[string]int64
	for i := range rs {
		r := &rs[i]
		if r.Name != "oversell" && r.Name != "under-admission" && r.Name != "retry-after" {
			continue
		}
		var notes []string
		if r.Verdict == Fail {
			if firstOf == nil {
				firstOf, lastOf = map[string]int64{}, map[string]int64{}
				for k := range ix.h.Events {
					e := &ix.h.Events[k]
					if f, ok := firstOf[e.Key]; !ok || e.Sent < f {
						firstOf[e.Key] = e.Sent
					}
					lastOf[e.Key] = max(lastOf[e.Key], e.Recv)
				}
			}
			stepless := ""
			for _, e := range r.Evidence {
				to := e.To
				if e.From == 0 && e.To == 0 {
					to = -1 // a key-wide finding: the key's whole life
				}
				for _, k := range append([]string{e.Key}, e.Keys...) {
					if k == "" {
						continue
					}
					kto := to
					if kto < 0 {
						kto = lastOf[k]
					}
					touched := false
					for _, s := range steps {
						if s.verified && firstOf[k] < s.at && s.at <= kto {
							touched = true
							break
						}
					}
					if !touched {
						stepless = k
						break
					}
				}
				if stepless != "" {
					break
				}
			}
			named := 0
			for j := range r.Evidence {
				e := &r.Evidence[j]
				if stepless != "" || (e.Cause != "" && e.Cause != CauseSelfInflicted) {
					continue
				}
				for _, s := range steps {
					from, to := e.From, e.To
					if from == 0 && to == 0 {
						from, to = firstOf[e.Key], lastOf[e.Key]
					}
					// A forward step credits (oversell); a backward one
					// stalls the refill for its size (wrongful refusals,
					// advice that does not come true).
					reach := horizon
					if s.by < 0 {
						reach += int64(-s.by)
					}
					if !s.verified || (s.by > 0) != (r.Name == "oversell") || to < s.at || from > s.at+reach {
						continue
					}
					if s.inst >= 0 {
						if instOf == nil {
							instOf = make(map[uint64]int, len(ix.h.Events))
							for k := range ix.h.Events {
								instOf[ix.h.Events[k].ID] = ix.h.Events[k].Instance
							}
						}
						if !decidedOn(e, s.inst, instOf) {
							continue
						}
					}
					// A refusal the key's own refusals could explain is
					// the step's when no key untouched by a step shows it.
					if e.Cause == CauseSelfInflicted {
						e.Message += "; but no key untouched by a clock step shows it, so the step is the cause"
					}
					e.Cause, e.FaultFrom = CauseClockStep, s.fault.Start
					e.Message += fmt.Sprintf(" — after %s (%s)", s.what(), s.how)
					named++
					break
				}
			}
			switch {
			case stepless != "":
				notes = append(notes, fmt.Sprintf("key %s, which no clock step touched, fails too: not blamed on a clock step", stepless))
			case named > 0:
				notes = append(notes, fmt.Sprintf("%d finding(s) right after a clock step", named))
			}
		}
		for _, s := range steps {
			if !s.verified {
				notes = append(notes, fmt.Sprintf("%s was not shown to have taken effect (%s), so this run does not show how the limiter meets a clock step", s.what(), s.how))
				break
			}
		}
		if r.Verdict == Pass && len(notes) == 0 {
			notes = append(notes, fmt.Sprintf("across %d step(s) of an instance's clock that took effect", len(steps)))
		}
		if len(notes) > 0 {
			r.Summary += "; " + strings.Join(notes, "; ")
		}
	}
}

// decidedOn reports whether some request of e was decided on inst (every
// request of e when e names none); instOf maps request IDs to instances.
func decidedOn(e *Evidence, inst int, instOf map[uint64]int) bool {
	if len(e.RequestIDs) == 0 {
		return true
	}
	for _, id := range e.RequestIDs {
		if in, ok := instOf[id]; !ok || in == inst {
			return true
		}
	}
	return false
}
