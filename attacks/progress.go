package attacks

import "time"

// Progress is a snapshot for a progress display. The run's counts cover
// every phase so far; the Phase… counts only the current phase, so a
// display can show each phase with its own numbers.
type Progress struct {
	Phase    string
	Sent     int64
	Admitted int64
	Rejected int64
	Errors   int64
	Elapsed  time.Duration
	// Index is the current phase's position in the plan (from 0), Phases
	// the number of phases.
	Index, Phases int
	// PhaseSent … PhaseErrors count the current phase's requests;
	// PhaseElapsed is the time since it began.
	PhaseSent, PhaseAdmitted, PhaseRejected, PhaseErrors int64
	PhaseElapsed                                         time.Duration
	// PlannedRequests and PlannedDuration are this shard's planned size of
	// the phase as far as the plan fixes it in advance (0: not known, e.g.
	// the attempts of retrying clients or an idle until buckets are full).
	PlannedRequests int64
	PlannedDuration time.Duration
	// Done marks the phase's last snapshot: it has ended.
	Done bool
	// Cut marks a phase that ended before its plan did (a signal,
	// --max-duration): a display must not show it as complete.
	Cut bool
}

// phaseProgress is where the current phase began, for its own counts.
type phaseProgress struct {
	name                 string
	index, phases        int
	start                int64
	sent, adm, rej, errs int64
	plannedRequests      int64
	plannedDuration      time.Duration
}

// beginPhase marks phase index of n (ph) as the current one.
func (e *Engine) beginPhase(index, n int, ph *Phase) {
	reqs, d := e.planned(ph)
	e.cur.Store(&phaseProgress{
		name: ph.Name, index: index, phases: n, start: e.off(),
		sent: e.sent.Load(), adm: e.adm.Load(), rej: e.rej.Load(), errs: e.errs.Load(),
		plannedRequests: reqs, plannedDuration: d,
	})
}

// progressEnd reports the current phase's last snapshot; cut says it was
// stopped before its end.
func (e *Engine) progressEnd(cut bool) {
	e.progress(true, cut)
}

// progress reports a snapshot; done says the current phase has ended,
// and a second true that it was cut short.
func (e *Engine) progress(done ...bool) {
	if e.o.Progress == nil {
		return
	}
	now := e.off()
	s := Progress{
		Sent: e.sent.Load(), Admitted: e.adm.Load(), Rejected: e.rej.Load(), Errors: e.errs.Load(),
		Elapsed: time.Duration(now), Done: len(done) > 0 && done[0], Cut: len(done) > 1 && done[1],
	}
	if c := e.cur.Load(); c != nil {
		s.Phase, s.Index, s.Phases = c.name, c.index, c.phases
		s.PhaseSent, s.PhaseAdmitted, s.PhaseRejected, s.PhaseErrors = s.Sent-c.sent, s.Admitted-c.adm, s.Rejected-c.rej, s.Errors-c.errs
		s.PhaseElapsed = time.Duration(now - c.start)
		s.PlannedRequests, s.PlannedDuration = c.plannedRequests, c.plannedDuration
	}
	e.o.Progress(s)
}

// planned is this shard's planned size of ph: its requests and its
// duration, each 0 when the plan does not fix it in advance.
func (e *Engine) planned(ph *Phase) (int64, time.Duration) {
	lim, limErr := e.limitFor(e.Key(ph.Key))
	switch ph.Kind {
	case KindBurst:
		n := ph.Requests
		if n == 0 && limErr == nil {
			n = int(min(2*lim.Count+DefaultBypassExtra, MaxBurstRequests))
		}
		return int64(e.share(n)), 0
	case KindBoundary:
		n := ph.Requests
		if n == 0 && limErr == nil {
			n = int(min(lim.Count, MaxBurstRequests))
		}
		return 2 * int64(e.share(n)), 0
	case KindSpread:
		return int64(e.share(ph.Requests)), 0
	case KindProbe:
		return int64(e.share(1)), 0
	case KindIdle, KindRetry:
		return 0, ph.Duration.D()
	case KindRate, KindTenants:
		return e.plannedRate(ph)
	}
	return 0, 0
}

// plannedRate is the size of a rate or tenants phase: what its pacer
// would send over its duration, at most its requests.
func (e *Engine) plannedRate(ph *Phase) (int64, time.Duration) {
	limit := int64(0)
	if ph.Requests > 0 {
		limit = int64(e.share(ph.Requests))
	}
	d := ph.Duration.D()
	if d == 0 {
		return limit, 0
	}
	rate := float64(ph.Rate)
	if ph.RateX > 0 {
		key := ph.Key
		if ph.Kind == KindTenants && len(ph.Tenants) > 0 {
			key = ph.Tenants[0].Key
		}
		lim, err := e.limitFor(e.Key(key))
		if err != nil {
			return limit, d
		}
		rate = ph.RateX * lim.R()
	}
	// A ramp sends the mean of its two rates.
	if ph.RateTo > 0 {
		rate = (rate + float64(ph.RateTo)) / 2
	}
	n := int64(rate / float64(e.o.Shards) * d.Seconds())
	if limit > 0 {
		n = min(n, limit)
	}
	return n, d
}
