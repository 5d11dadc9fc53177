package checks

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// EvidenceCheck names the run-level gate that comes before every check: no
// verdict without evidence.
const EvidenceCheck = "evidence"

// DefaultMaxErrorRate is the share of requests that may end in an error (no
// response, or a status the policy declares neither admitted nor rejected)
// before a run is judged to have given no evidence.
const DefaultMaxErrorRate = 0.01

// StatusCount is how many requests got one status (0: no response).
type StatusCount struct {
	Status int   `json:"status"`
	Count  int64 `json:"count"`
	// URL is where the first of them was sent.
	URL string `json:"url,omitempty"`
	// Err is the first error message when Status is 0.
	Err string `json:"err,omitempty"`
	// Body is a sample of what the target answered with this status (the
	// first kept one: history.Event.Body).
	Body string `json:"body,omitempty"`
}

// Errors counts h's requests that ended in an error under p's contract, by
// status, most frequent first. Bypass variants refused with a 4xx are not
// errors: refusing them is what a limiter may well do; nor are answers with
// a status the policy declares refunded (refund_on).
func Errors(h *history.History, p *policy.Policy) (total int64, by []StatusCount) {
	idx := map[int]int{}
	for i := range h.Events {
		e := &h.Events[i]
		if Outcome(p, e) != history.Unknown {
			continue
		}
		if e.Variant != "" && e.Status >= 400 && e.Status < 500 {
			continue
		}
		if e.Err == history.ErrCancelled {
			continue // cut off by the run's stop, not the target's failure
		}
		if e.Status != 0 && p.RefundOn.Has(e.Status) {
			continue // a declared refund (a downstream failure the plan asked for)
		}
		total++
		j, ok := idx[e.Status]
		if !ok {
			j = len(by)
			idx[e.Status] = j
			by = append(by, StatusCount{Status: e.Status, URL: eventURL(h, e), Err: e.Err})
		}
		by[j].Count++
		if by[j].Body == "" {
			by[j].Body = e.Body
		}
	}
	sort.SliceStable(by, func(a, b int) bool { return by[a].Count > by[b].Count })
	return total, by
}

var (
	quotedText = regexp.MustCompile(`"[^"]*"`)
	digitRun   = regexp.MustCompile(`[0-9]+`)
)

// ErrorKind is an error message with what differs from request to request
// collapsed, for grouping: quoted text (Go quotes the URL, with its key) is
// "…" and every run of digits N, so `read tcp 127.0.0.1:54321->…: connection
// reset by peer` and the same from port 54322 are one kind. Show a real
// message of the kind, not this.
func ErrorKind(msg string) string {
	return digitRun.ReplaceAllString(quotedText.ReplaceAllString(msg, `"…"`), "N")
}

// eventURL is the URL e was sent to, as far as the history knows it.
func eventURL(h *history.History, e *history.Event) string {
	base := ""
	if e.Instance >= 0 && e.Instance < len(h.Run.Instances) {
		base = h.Run.Instances[e.Instance]
	}
	if e.Path == "" {
		return base
	}
	if u, _, ok := strings.Cut(base, "://"); ok {
		rest := strings.TrimPrefix(base, u+"://")
		host, _, _ := strings.Cut(rest, "/")
		return u + "://" + host + e.Path
	}
	return base + e.Path
}

// Gate judges whether the run gave evidence at all: rs are the checks'
// results. It is pure, like every check.
func Gate(h *history.History, p *policy.Policy, rs []Result, maxErrorRate float64) Result {
	if maxErrorRate <= 0 {
		maxErrorRate = DefaultMaxErrorRate
	}
	st := h.StatsBy(func(e *history.Event) history.Outcome { return Outcome(p, e) })
	errs, by := Errors(h, p)
	return gate(st, errs, by, p, rs, maxErrorRate)
}

// gate is Gate on the run's counts and its errors by status.
func gate(st history.Stats, errs int64, by []StatusCount, p *policy.Policy, rs []Result, maxErrorRate float64) Result {
	if maxErrorRate <= 0 {
		maxErrorRate = DefaultMaxErrorRate
	}
	figs := map[string]float64{"requests": float64(st.Requests), "errors": float64(errs), "max_error_rate": maxErrorRate}
	res := Result{Name: EvidenceCheck, Figures: figs}
	if st.Requests == 0 {
		res.Verdict, res.Summary = Unknown, "the run sent no requests: nothing was judged"
		return res
	}
	rate := float64(errs) / float64(st.Requests)
	figs["error_rate"] = rate
	judged := 0
	for _, r := range rs {
		if r.Verdict != Skip {
			judged++
		}
	}
	figs["checks_judged"] = float64(judged)
	if rate > maxErrorRate {
		res.Verdict = Unknown
		res.Summary = fmt.Sprintf("%s; declared %s — %.1f%% errors exceed Checks.MaxErrorRate %g%%, so no verdict is evidence",
			describeErrors(errs, st.Requests, by), p.Statuses.Describe(), rate*100, maxErrorRate*100)
		for i, b := range by {
			if i == MaxEvidenceDefault {
				break
			}
			res.Evidence = append(res.Evidence, Evidence{Observed: float64(b.Count), Message: describeStatus(b)})
		}
		return res
	}
	if judged == 0 {
		res.Verdict = Unknown
		var why []string
		for _, r := range rs {
			why = append(why, r.Name+": "+r.Summary)
		}
		res.Summary = "no check could judge this run (" + strings.Join(why, "; ") + ")"
		return res
	}
	res.Verdict = Pass
	res.Summary = fmt.Sprintf("%s judged by %s", plural(int(st.Requests), "request", "requests"), plural(judged, "check", "checks"))
	if errs > 0 {
		res.Summary += fmt.Sprintf("; %s within Checks.MaxErrorRate %g%%", describeErrors(errs, st.Requests, by), maxErrorRate*100)
	}
	return res
}

// MaxEvidenceDefault caps the statuses listed by the evidence gate.
const MaxEvidenceDefault = 5

// describeErrors says "100 of 100 requests got 404 from URL".
func describeErrors(errs, total int64, by []StatusCount) string {
	if len(by) == 0 {
		return "no errors"
	}
	if len(by) == 1 {
		return fmt.Sprintf("%d of %d requests %s", errs, total, strings.TrimPrefix(describeStatus(by[0]), fmt.Sprintf("%d ", by[0].Count)))
	}
	parts := make([]string, 0, len(by))
	for i, b := range by {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("%d more statuses", len(by)-3))
			break
		}
		parts = append(parts, describeStatus(b))
	}
	return fmt.Sprintf("%d of %d requests ended in an error: %s", errs, total, strings.Join(parts, ", "))
}

func describeStatus(b StatusCount) string {
	where := ""
	if b.URL != "" {
		where = " from " + b.URL
	}
	if b.Status == 0 {
		msg := b.Err
		if len(msg) > 120 {
			msg = msg[:120] + "…"
		}
		return fmt.Sprintf("%d got no response%s (%s)", b.Count, where, msg)
	}
	return fmt.Sprintf("%d got %d%s", b.Count, b.Status, where)
}
