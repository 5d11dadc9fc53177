package checks

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/rlverify/rlverify/history"
)

// A fault rlverify injects in an environment it started (its own store
// proxy, its own Redis) takes effect. A fault injected in someone else's
// service (--env external: a hook command, a store proxy on an address the
// service may not use) may not: a hook that does nothing and exits 0, a
// proxy no traffic goes through. Judging the declared failure mode on such
// a window blames a correct service (fail-open "must admit" while its store
// never went down). So in an external run a store fault counts only when
// the service's behaviour observably changed during it, against the same
// span before the fault (after it, when nothing came before): the shares
// of admitted, rejected and failed requests or of a status (a fail-closed
// service answers 503 where it answered 429), or the decision latency.

// Thresholds of an observable change.
const (
	// effectShare is the change in the share of admitted, rejected or
	// failed requests that counts (absolute: 0.2 = 20 points).
	effectShare = 0.2
	// effectLatency: the median decision latency doubled and grew by at
	// least this much.
	effectLatency = 2 * time.Millisecond
)

// spanStats are the outcomes of the requests decided within a span.
type spanStats struct {
	n, adm, rej, errs int
	// status counts the requests by HTTP status (0: no response): a
	// fail-closed service answers 503 where it answered 429.
	status map[int]int
	lats   []int64
}

func (ix *index) spanStats(from, to int64) spanStats {
	s := spanStats{status: map[int]int{}}
	if to <= from {
		return s
	}
	for gi := range ix.groups {
		for _, r := range ix.groups[gi].recs {
			e := ix.ev(r)
			if e.Sent < from || e.Recv > to {
				continue
			}
			s.n++
			s.status[e.Status]++
			switch r.out {
			case history.Admitted:
				s.adm++
			case history.Rejected:
				s.rej++
			default:
				s.errs++
			}
			s.lats = append(s.lats, e.Recv-e.Sent)
		}
	}
	return s
}

func (s *spanStats) median() int64 {
	if len(s.lats) == 0 {
		return 0
	}
	slices.Sort(s.lats)
	return s.lats[len(s.lats)/2]
}

// faultTookEffect says whether the fault window [from, to] shows a change
// of behaviour, and why (or why not), for an external run; in any other
// run it is true.
func (ix *index) faultTookEffect(fault history.Fault, from, to int64) (bool, string) {
	if ix.h.Run.Env != "external" {
		return true, ""
	}
	how := "the fault's injection"
	if len(fault.Hooks) > 0 {
		how = "the fault hook ran"
	}
	during := ix.spanStats(from, to)
	if during.n == 0 {
		return false, fmt.Sprintf("%s but no request was decided during the fault", how)
	}
	span := to - from
	ref, where := ix.spanStats(max(0, from-span), from), "before"
	if ref.n == 0 {
		after := max(fault.End, fault.Cleared) + recoveryOf(ix.p)
		ref, where = ix.spanStats(after, after+span), "after"
	}
	if ref.n == 0 {
		return false, fmt.Sprintf("%s but no request outside the fault shows how the service behaves without it", how)
	}
	share := func(k, n int) float64 { return float64(k) / float64(n) }
	for _, c := range []struct {
		what   string
		dk, rk int
	}{{"admitted", during.adm, ref.adm}, {"rejected", during.rej, ref.rej}, {"failed", during.errs, ref.errs}} {
		if d, r := share(c.dk, during.n), share(c.rk, ref.n); math.Abs(d-r) >= effectShare {
			return true, fmt.Sprintf("%.0f%% %s during the fault, %.0f%% %s it", d*100, c.what, r*100, where)
		}
	}
	codes := make([]int, 0, len(during.status)+len(ref.status))
	for c := range during.status {
		codes = append(codes, c)
	}
	for c := range ref.status {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	for _, c := range slices.Compact(codes) {
		if d, r := share(during.status[c], during.n), share(ref.status[c], ref.n); math.Abs(d-r) >= effectShare {
			return true, fmt.Sprintf("%.0f%% status %d during the fault, %.0f%% %s it", d*100, c, r*100, where)
		}
	}
	if md, mr := during.median(), ref.median(); md >= 2*mr && time.Duration(md-mr) >= effectLatency {
		return true, fmt.Sprintf("median decision latency %s during the fault, %s %s it", fmtDur(time.Duration(md)), fmtDur(time.Duration(mr)), where)
	}
	return false, fmt.Sprintf("%s but no behaviour changed (admitted %.0f%%, rejected %.0f%%, failed %.0f%%, median latency %s during the fault; %.0f%%, %.0f%%, %.0f%%, %s %s it) and no connection was seen cut: the fault may never have happened",
		how, share(during.adm, during.n)*100, share(during.rej, during.n)*100, share(during.errs, during.n)*100, fmtDur(time.Duration(during.median())),
		share(ref.adm, ref.n)*100, share(ref.rej, ref.n)*100, share(ref.errs, ref.n)*100, fmtDur(time.Duration(ref.median())), where)
}
