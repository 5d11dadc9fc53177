package checks

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// The rest of Judge for a streaming judgement: which checks a Streamer
// must run (StreamChecks), the errors by status (ErrorTally) and the
// gate and diagnosis over the Streamer's results (JudgeStreamed).

// StreamChecks says whether Judge(h, p, o) can be judged by a Streamer:
// when every check it would judge — o.Only, or every check, less those
// turned off by p's checks_off and o.Off (Judge skips them) — streams
// (Streamable). names are then the checks to give NewStreamer; otherwise
// why says which do not stream.
func StreamChecks(p *policy.Policy, o Options) (names []string, ok bool, why string) {
	sel := o.Only
	if len(sel) == 0 {
		sel = Names()
	}
	if err := Validate(sel); err != nil {
		return nil, false, err.Error()
	}
	var not []string
	for _, n := range Names() {
		if !slices.Contains(sel, n) || slices.Contains(p.ChecksOff, n) || slices.Contains(o.Off, n) {
			continue
		}
		if ok, _ := streamsUnder(p, n); ok {
			names = append(names, n)
		} else {
			not = append(not, n)
		}
	}
	if len(not) > 0 {
		why := fmt.Sprintf("%s %s not stream (streaming: %s)", strings.Join(not, ", "), map[bool]string{true: "does", false: "do"}[len(not) == 1], strings.Join(Streamable(), ", "))
		if slices.Contains(not, DelayCheck) && p.Delays() {
			_, w := streamsUnder(p, DelayCheck)
			why += "; delay " + w
		}
		return nil, false, why
	}
	return names, true, ""
}

// ErrorTally counts, event by event, what Errors counts on a whole
// history: the requests that ended in an error, by status, each status
// with the URL and error of its first request in file order and the first
// body kept. Its state is one entry per status. The zero value is not
// usable: see NewErrorTally. Not safe for concurrent use.
type ErrorTally struct {
	h     *history.History
	p     *policy.Policy
	total int64
	by    map[int]*statusTally
}

type statusTally struct {
	StatusCount
	first, body uint64 // the file positions of the first and of the body kept
	hasBody     bool
}

// NewErrorTally counts the errors of the events of the history whose
// records are rec (its instances name the URLs), judged under p.
func NewErrorTally(rec *history.History, p *policy.Policy) *ErrorTally {
	return &ErrorTally{h: rec, p: p, by: map[int]*statusTally{}}
}

// Add counts e, the event at file position seq (history.Stream.Seq);
// events may come in any order.
func (t *ErrorTally) Add(e *history.Event, seq uint64) {
	if Outcome(t.p, e) != history.Unknown || e.Variant != "" && e.Status >= 400 && e.Status < 500 ||
		e.Err == history.ErrCancelled || e.Status != 0 && t.p.RefundOn.Has(e.Status) {
		return // as Errors
	}
	t.total++
	s := t.by[e.Status]
	if s == nil {
		s = &statusTally{StatusCount: StatusCount{Status: e.Status, URL: eventURL(t.h, e), Err: e.Err}, first: seq}
		t.by[e.Status] = s
	} else if seq < s.first {
		s.first, s.URL, s.Err = seq, eventURL(t.h, e), e.Err
	}
	s.Count++
	if e.Body != "" && (!s.hasBody || seq < s.body) {
		s.Body, s.body, s.hasBody = e.Body, seq, true
	}
}

// Result is Errors' answer for the events added.
func (t *ErrorTally) Result() (total int64, by []StatusCount) {
	all := make([]*statusTally, 0, len(t.by))
	for _, s := range t.by {
		all = append(all, s)
	}
	slices.SortFunc(all, func(a, b *statusTally) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.first, b.first)
	})
	for _, s := range all {
		by = append(by, s.StatusCount)
	}
	return t.total, by
}

// JudgeStreamed is Judge for a Streamer's results: streamed are the
// results of the checks StreamChecks named, st the run's counts under p
// (history.Stats, as reports.Tally counts them) and errs, by the
// ErrorTally's. The checks o selects that are turned off are skipped as
// Judge skips them, and the list is in the order of All.
func JudgeStreamed(streamed []Result, st history.Stats, errs int64, by []StatusCount, p *policy.Policy, o Options) []Result {
	sel := o.Only
	if len(sel) == 0 {
		sel = Names()
	}
	var rs []Result
	for _, n := range Names() {
		if !slices.Contains(sel, n) {
			continue
		}
		if i := slices.IndexFunc(streamed, func(r Result) bool { return r.Name == n }); i >= 0 {
			rs = append(rs, streamed[i])
		} else {
			rs = append(rs, Result{Name: n})
		}
	}
	rs = skipOff(rs, p, o)
	return append([]Result{gate(st, errs, by, p, rs, o.MaxErrorRate)}, Diagnose(rs, horizonOf(p))...)
}

// StreamRecords says whether a Streamer judges the history whose records
// are rec as Run does: not yet when the run changed a declared limit
// (limit-change faults: Run judges the changed limits) or stepped an
// instance's clock (clock-skew faults: Run attributes violations to the
// steps); why says which.
func StreamRecords(rec *history.History) (ok bool, why string) {
	for _, f := range rec.Faults {
		switch f.Kind {
		case LimitChangeFault:
			return false, "the run changed a declared limit, which only the in-memory checks judge"
		case "clock-skew":
			return false, "the run stepped an instance's clock, which only the in-memory checks attribute"
		}
	}
	return true, ""
}
