package discover

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/headers"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

func fieldsOf(e history.Event) headers.Fields {
	f := e.Fields
	f.Fallback, f.Scope = "", "" // rlverify's own statements, not the limit's headers
	return f
}

func anyRateLimit(f headers.Fields) bool {
	return headers.Detect(f) != headers.None || f.XLimit != "" || f.XRemaining != "" || f.XReset != ""
}

// readHeaders says which rate-limit headers the service sends, what their
// values mean, and whether they agree with the behaviour measured.
func readHeaders(all []obs, res *Result) Headers {
	var h Headers
	adm := func(s int) bool { return slices.Contains(res.Admitted, s) }
	ref := func(s int) bool { return slices.Contains(res.Refused, s) }
	gens := map[headers.Generation]int{}
	admWith, refWith, refN, raN := 0, 0, 0, 0
	forms := map[string]int{}
	for _, o := range all {
		f := fieldsOf(o.ev)
		switch {
		case adm(o.status):
			if anyRateLimit(f) {
				admWith++
			}
			gens[headers.Detect(f)]++
		case ref(o.status):
			refN++
			if anyRateLimit(f) {
				refWith++
			}
			if f.RetryAfter != "" {
				raN++
				if _, err := strconv.ParseInt(strings.TrimSpace(f.RetryAfter), 10, 64); err == nil {
					forms["delay-seconds"]++
				} else if _, err := http.ParseTime(f.RetryAfter); err == nil {
					forms["http-date"]++
				} else {
					forms["malformed"]++
				}
			}
		}
		if f.XLimit != "" || f.XRemaining != "" || f.XReset != "" {
			h.XRateLimit = true
		}
	}
	best, bn := headers.None, 0
	for g, n := range gens {
		if g != headers.None && n > bn {
			best, bn = g, n
		}
	}
	h.RateLimit = policy.RateLimitHeaders(best)
	h.XReset = xResetForm(all)
	h.AdmittedOnly = admWith > 0 && refN > 0 && refWith == 0
	h.RetryAfter = refN > 0 && raN == refN
	for _, f := range []string{"delay-seconds", "http-date", "malformed"} {
		if forms[f] > 0 {
			h.RetryForm = f
			break
		}
	}
	if refN > 0 && raN > 0 && raN < refN {
		h.Disagree = append(h.Disagree, fmt.Sprintf("Retry-After on %d of %d refusals only", raN, refN))
	}
	if forms["malformed"] > 0 {
		h.Disagree = append(h.Disagree, fmt.Sprintf("%d Retry-After values are neither delay-seconds nor an HTTP-date", forms["malformed"]))
	}
	h.RetryRounding = retryRounding(all, adm, ref, &h)
	limitsAgree(all, adm, res, best, &h)
	return h
}

// xResetForm is the form of X-RateLimit-Reset: epoch (Unix seconds),
// relative (delta seconds) or date.
func xResetForm(all []obs) string {
	for _, o := range all {
		v := strings.TrimSpace(o.ev.XReset)
		if v == "" {
			continue
		}
		if n, err := strconv.ParseFloat(v, 64); err == nil {
			if n >= 1e9 {
				return string(headers.ResetEpoch)
			}
			return string(headers.ResetRelative)
		}
		if _, err := http.ParseTime(v); err == nil {
			return string(headers.ResetDate)
		}
	}
	return ""
}

// retryRounding compares each Retry-After with when the same key was next
// admitted (probes on one key, one instance, in send order).
func retryRounding(all []obs, adm, ref func(int) bool, h *Headers) string {
	byKey := map[string][]obs{}
	for _, o := range all {
		k := fmt.Sprintf("%s/%d", o.key, o.inst)
		byKey[k] = append(byKey[k], o)
	}
	short, up, long, n := 0, 0, 0, 0
	var shortEx string
	for _, os := range byKey {
		sort.Slice(os, func(i, j int) bool { return os[i].sent.Before(os[j].sent) })
		// nextAdm[i]: the first admission at or after i; lastRef[i]: the
		// last refusal at or before i (-1 when none). Linear, so a large
		// limit's hundreds of thousands of probes on one key stay cheap
		// (a scan from each refusal to the next admission took minutes).
		nextAdm, lastRefAt := make([]int, len(os)+1), make([]int, len(os))
		nextAdm[len(os)] = -1
		for i := len(os) - 1; i >= 0; i-- {
			nextAdm[i] = nextAdm[i+1]
			if adm(os[i].status) {
				nextAdm[i] = i
			}
		}
		for i := range os {
			lastRefAt[i] = -1
			if i > 0 {
				lastRefAt[i] = lastRefAt[i-1]
			}
			if ref(os[i].status) {
				lastRefAt[i] = i
			}
		}
		for i, o := range os {
			if !ref(o.status) || o.ev.RetryAfter == "" {
				continue
			}
			d, err := headers.ParseRetryAfter(o.ev.RetryAfter, o.recv)
			if err != nil {
				continue
			}
			// The next admission sent after o's answer (one in flight with
			// o, a burst, says nothing by its order), and the last refusal
			// sent after o's answer before it.
			var next *obs
			j := nextAdm[i+1]
			for j >= 0 && !os[j].sent.After(o.recv) {
				j = nextAdm[j+1]
			}
			lastRef := o
			if j >= 0 {
				next = &os[j]
				if k := lastRefAt[j-1]; k > i && os[k].sent.After(o.recv) {
					lastRef = os[k]
				}
			}
			if next == nil || next.sent.Sub(lastRef.sent) > 500*time.Millisecond {
				continue // not watched closely enough to compare
			}
			n++
			needLo := lastRef.sent.Sub(o.recv) // still refused this long after
			needHi := next.recv.Sub(o.sent)    // admitted by then
			switch {
			case d < needLo-20*time.Millisecond:
				short++
				if shortEx == "" {
					shortEx = fmt.Sprintf("Retry-After: %s, but still refused %s later", o.ev.RetryAfter, fmtS(needLo))
				}
			case d > needHi+1100*time.Millisecond: // delay-seconds round up by < 1s
				long++

			case d >= needHi:
				up++
			}
		}
	}
	if n == 0 {
		return ""
	}
	if short > 0 {
		h.Disagree = append(h.Disagree, fmt.Sprintf("Retry-After is shorter than the wait in %d of %d refusals compared (%s): a client honouring it is refused again", short, n, shortEx))
		return "down (shorter than the wait)"
	}
	h.Agree = append(h.Agree, fmt.Sprintf("Retry-After honoured: in %d refusals compared, a request at the advised time would have been admitted", n))
	if long > 0 {
		h.Disagree = append(h.Disagree, fmt.Sprintf("Retry-After is longer than needed by more than a second in %d of %d refusals", long, n))
	}
	if up > 0 {
		return "up (never shorter than the wait)"
	}
	return "exact"
}

// limitsAgree compares the limit and remaining the headers state with the
// capacity measured.
func limitsAgree(all []obs, adm func(int) bool, res *Result, g headers.Generation, h *Headers) {
	limits := map[int64]int{}
	falls, same := 0, 0
	prev := map[string]int64{}
	for _, o := range all {
		if !adm(o.status) {
			continue
		}
		f := fieldsOf(o.ev)
		var lim, rem headers.Value
		if g != headers.None {
			ob := headers.Read(g, f)
			lim, rem = ob.Limit, ob.Remaining
		}
		if !lim.Valid() && f.XLimit != "" {
			if n, err := headers.ParseXInt(f.XLimit); err == nil {
				lim = headers.Value{N: n, Status: headers.Status{State: headers.Valid}}
			}
		}
		if !rem.Valid() && f.XRemaining != "" {
			if n, err := headers.ParseXInt(f.XRemaining); err == nil {
				rem = headers.Value{N: n, Status: headers.Status{State: headers.Valid}}
			}
		}
		if lim.Valid() {
			limits[lim.N]++
		}
		if rem.Valid() {
			if p, ok := prev[o.key]; ok {
				if rem.N < p {
					falls++
				} else if rem.N == p {
					same++
				}
			}
			prev[o.key] = rem.N
		}
	}
	if falls+same > 4 && falls == 0 {
		h.Disagree = append(h.Disagree, fmt.Sprintf("remaining does not fall: %d admissions in a row on one key left it unchanged", same))
	} else if falls > 0 {
		h.Agree = append(h.Agree, fmt.Sprintf("remaining falls with admissions (%d times seen)", falls))
	}
	if len(limits) == 0 || len(res.Tiers) == 0 {
		return
	}
	var stated int64
	best := 0
	for v, n := range limits {
		if n > best {
			stated, best = v, n
		}
	}
	for _, t := range res.Tiers {
		c := t.Capacity
		if !c.Pinned {
			continue
		}
		if float64(stated) >= c.Low-1 && float64(stated) <= c.High+1 {
			h.Agree = append(h.Agree, fmt.Sprintf("the stated limit %d matches the measured capacity of tier %s (%s)", stated, t.Name, c.Range()))
		} else if len(res.Tiers) == 1 {
			h.Disagree = append(h.Disagree, fmt.Sprintf("the headers state a limit of %d, but tier %s admits %s", stated, t.Name, c.Range()))
		}
	}
}

// Range is n as "V" or "V (L … H)".
func (n Number) Range() string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', 4, 64) }
	if n.Low == n.High {
		return f(n.Value)
	}
	return fmt.Sprintf("%s (%s … %s)", f(n.Value), f(n.Low), f(n.High))
}

// invalidKey sends one request with a key the service never issued.
func (p *prober) invalidKey(ctx context.Context, res *Result) {
	tier := p.probePol.Tiers[0].Name
	bogus := fmt.Sprintf("rlverify-not-a-key-%s", p.runID)
	os, err := p.step(ctx, oneKey("discover", tier, bogus), attacks.Phase{Kind: attacks.KindBurst, Key: tier + "-invalid", Requests: 1})
	if err != nil || len(os) == 0 {
		return
	}
	res.InvalidKey = os[0].status
}

// prefixes sets each tier's key prefix: the longest prefix its keys share
// that no other tier's keys have.
func prefixes(ts []Tier, kf *attacks.KeyFile) {
	for i := range ts {
		keys := kf.ByTier[ts[i].Name]
		pre := keys[0]
		for _, k := range keys[1:] {
			for !strings.HasPrefix(k, pre) {
				pre = pre[:len(pre)-1]
			}
		}
		clash := false
		for t, ks := range kf.ByTier {
			if t == ts[i].Name {
				continue
			}
			for _, k := range ks {
				if strings.HasPrefix(k, pre) {
					clash = true
				}
			}
		}
		if pre != "" && !clash && len(pre) < len(keys[0]) {
			ts[i].KeyPrefix = pre
		} else {
			ts[i].Notes = append(ts[i].Notes, "its keys share no prefix that tells them from other tiers' keys: key_prefix left empty, set it by hand")
		}
	}
}

// pathScope asks for a sibling of the target's path (another path under its
// directory) with a key spent on the target: still refused means one quota
// for every path under the directory; admitted, one per path.
func (p *prober) pathScope(ctx context.Context, res *Result) {
	u, err := url.Parse(p.o.Targets[0])
	if err != nil {
		return
	}
	dir := u.Path[:strings.LastIndex(u.Path, "/")+1]
	if dir == "" {
		dir = "/"
	}
	sib := *u
	sib.Path = dir + policy.SiblingPath
	if sib.Path == u.Path {
		sib.Path += "-2"
	}
	t := res.Tiers[0]
	a := int(t.Capacity.High)
	cl := classifier{p.o.Admitted, p.o.Rejected}
	k, kf := p.key(ctx, t.Name)
	ex := a + max(2, a/4)
	if _, err := p.step(ctx, kf, burst(k, ex)...); err != nil {
		return
	}
	os, err := p.stepAt(ctx, []string{sib.String()}, kf, attacks.Phase{Kind: attacks.KindBurst, Key: k, Requests: 1})
	if err != nil || len(os) == 0 {
		return
	}
	switch st := os[0].status; {
	case cl.refused_(st):
		res.PathPrefix = dir
		res.PathEvidence = fmt.Sprintf("a key spent on %s was refused (%d) on %s too: one quota for every path under %s", u.Path, st, sib.Path, dir)
	case cl.admitted_(st):
		res.PathEvidence = fmt.Sprintf("a key spent on %s was admitted (%d) on %s: each path has its own quota (or the sibling is not limited)", u.Path, st, sib.Path)
	default:
		res.PathEvidence = fmt.Sprintf("%s answered %d: no sibling route to compare, path scope not measured", sib.Path, st)
	}
}
