package checks

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/rlverify/rlverify/headers"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// CalibrationCheck is the name of the check that measures a limiter's
// parameters in calibrate phases.
const CalibrationCheck = "calibration"

const docCalibration = "In a calibrate phase (a burst of one more than the quota from a whole quota, then probes just before and after each next due time) the limiter's measured parameters are the declared ones: the burst admits exactly the capacity (a bucket's burst that outlasts a token may admit what came back while it was decided: the measurement then gives the range); no token (or freed window) arrives before its due time and none after it; the refused request's Retry-After is not shorter than the exact wait; and the admitted requests' remaining counts are exactly the bucket's levels. Each is stated as a measurement beside the declared value; a mismatch fails only when the measurement's own timing cannot explain it."

// Measurement is one parameter of a limiter as measured, beside the
// declared value.
type Measurement struct {
	Name     string `json:"name"`
	Declared string `json:"declared"`
	Measured string `json:"measured"`
	// Verdict is pass, fail or unknown.
	Verdict Verdict `json:"verdict"`
}

// Measurements returns the measurements a calibration result carries.
func Measurements(r Result) []Measurement { return r.Measured }

// checkCalibration reads the calibration phases only: O(c log c) in their
// c requests (sorted by send time), O(N) to find them.
func checkCalibration(ix *index) Result {
	col := ix.collector()
	figs := map[string]float64{}
	var ms []Measurement
	unknown := 0
	phases := 0
	for _, ph := range ix.h.Phases {
		if ph.Kind != "calibrate" {
			continue
		}
		phases++
		m, u := ix.calibratePhase(ph, col, figs)
		ms = append(ms, m...)
		unknown += u
	}
	if phases == 0 {
		return col.result(Skip, "no calibrate phase in this run (the precision plan has one)", figs, "")
	}
	v, sum := Pass, fmt.Sprintf("capacity, refill, advice and remaining counts measured in %s match the declared policy", plural(phases, "calibrate phase", "calibrate phases"))
	if unknown > 0 && col.total == 0 {
		v, sum = Unknown, fmt.Sprintf("%s could not be measured (see the measurements)", plural(unknown, "parameter", "parameters"))
	}
	r := col.result(v, sum, figs, fmt.Sprintf("%s measured unlike the declared policy", plural(col.total, "parameter", "parameters")))
	r.Measured = ms
	return r
}

// calibratePhase measures one calibrate phase; it returns the measurements
// and how many could not be decided.
func (ix *index) calibratePhase(ph history.Phase, col *collector, figs map[string]float64) ([]Measurement, int) {
	var burst, probes []rec
	var key string
	var g *group
	for gi := range ix.groups {
		for _, r := range ix.groups[gi].recs {
			e := ix.ev(r)
			if e.Phase != ph.Name {
				continue
			}
			key, g = ix.groups[gi].key, &ix.groups[gi]
			if e.Intended == ph.Target {
				burst = append(burst, r)
			} else {
				probes = append(probes, r)
			}
		}
	}
	if g == nil || g.tier == nil || len(burst) == 0 {
		return []Measurement{{Name: "capacity", Declared: "-", Measured: "no request of the phase was judged", Verdict: Unknown}}, 1
	}
	l := &g.tier.Limits[0]
	sortRecs := func(rs []rec) {
		slices.SortFunc(rs, func(a, b rec) int { return cmpI64(a.lo, b.lo) })
	}
	sortRecs(burst)
	sortRecs(probes)
	lo, hi := burst[0].lo, burst[0].hi
	adm, errs := 0, 0
	var admitted, rejected []rec
	for _, r := range burst {
		lo, hi = min(lo, r.lo), max(hi, r.hi)
		switch r.out {
		case history.Admitted:
			adm++
			admitted = append(admitted, r)
		case history.Rejected:
			rejected = append(rejected, r)
		default:
			errs++
		}
	}
	N := int(l.Count)
	spread := time.Duration(hi - lo)
	refillDuring := l.R() * spread.Seconds() // at most this much came back during the burst
	figs["measured_capacity"] = float64(adm)
	figs["burst_spread_ms"] = float64(spread) / 1e6
	var ms []Measurement
	unknown := 0
	evidenceOf := func(rs []rec, bound, obs float64, msg, cause string) {
		idl, total := ix.idList(rs)
		col.add(Evidence{Key: key, Limit: l.Name, From: rs[0].lo, To: rs[len(rs)-1].hi, Bound: bound, Observed: obs,
			RequestIDs: idl, TotalIDs: total, Message: msg, Cause: cause})
	}
	evidence := func(rs []rec, bound, obs float64, msg string) { evidenceOf(rs, bound, obs, msg, "") }
	// Capacity.
	capM := Measurement{Name: "capacity", Declared: fmt.Sprint(N), Measured: fmt.Sprint(adm), Verdict: Pass}
	straddles := l.Algorithm == policy.FixedWindow && !l.AnchoredAtFirst() && floorDiv(ix.startNs+lo, int64(l.W())) != floorDiv(ix.startNs+hi, int64(l.W()))
	switch {
	case errs > 0 || straddles || (adm > N && refillDuring >= 1 && !l.Algorithm.Bucketed()):
		capM.Verdict, capM.Measured = Unknown, fmt.Sprintf("%d (not decisive: %d errors, burst over %s)", adm, errs, fmtDur(spread))
		unknown++
	case adm > N && float64(adm-N) <= refillDuring:
		// A bucket that started whole admits at most N plus what came
		// back while the burst was decided: consistent with N, though
		// not exactly N (a fast tier's burst outlasts a token).
		capM.Measured = fmt.Sprintf("%d … %d (a burst of %s: %.2f tokens may have come back during it)", N, adm, fmtDur(spread), refillDuring)
	case adm > N:
		capM.Verdict, capM.Measured = Fail, fmt.Sprintf("at least %d", adm-int(refillDuring))
		evidence(admitted, float64(N), float64(adm), fmt.Sprintf("key %s: a burst of %d from a whole quota admitted %d where the declared capacity is %d (the burst took %s, time for at most %.2f tokens to come back)", key, len(burst), adm, N, fmtDur(spread), refillDuring))
	case adm < N:
		capM.Verdict = Fail
		evidence(rejected, float64(N), float64(adm), fmt.Sprintf("key %s: a burst of %d from a whole quota admitted only %d where the declared capacity is %d", key, len(burst), adm, N))
	}
	ms = append(ms, capM)
	if adm < N || capM.Verdict != Pass {
		// The probes measure from an emptied quota: a bucket the burst
		// left below r·(hi − lo) tokens (it admitted N or more).
		return ms, unknown
	}
	if adm > N && !l.Algorithm.Bucketed() {
		return ms, unknown
	}
	// Refill: tokens (buckets) or the freed window.
	if len(probes) > 0 {
		m, u := ix.calibrateRefill(l, key, lo, hi, probes, col, figs)
		ms = append(ms, m)
		unknown += u
	}
	// Retry-After of the refusal in the burst: never shorter than the
	// exact wait, which is at least wantMin.
	if len(rejected) > 0 {
		r := rejected[0]
		e := ix.ev(r)
		wantMin, wantMax := ix.exactWait(l, r, lo)
		if wantMax > 0 && e.RetryAfter != "" {
			d, err := headers.ParseRetryAfter(e.RetryAfter, ix.h.Wall(e.Recv))
			raM := Measurement{Name: "retry-after", Declared: fmt.Sprintf("the exact wait %s–%s, rounded up: %ds", fmtDur(wantMin), fmtDur(wantMax), headers.Seconds(wantMax)), Verdict: Pass}
			switch {
			case err != nil:
				raM.Measured, raM.Verdict = fmt.Sprintf("%q: %v", e.RetryAfter, err), Unknown
				unknown++
			case d < wantMin:
				raM.Measured, raM.Verdict = fmt.Sprint(d), Fail
				evidenceOf([]rec{r}, wantMin.Seconds(), d.Seconds(), fmt.Sprintf("request %d of key %s was told to retry after %s; the exact wait was at least %s (rounded up: %ds) — advice rounded down sends clients back too early", e.ID, key, d, fmtDur(wantMin), headers.Seconds(wantMin)), CauseAdvice)
			case d > wantMax+time.Second+time.Duration(ix.tol):
				// From a whole quota the state is known: the advice, not
				// the bucket, is wrong (a late token behind it would be
				// refill's finding and under-admission's).
				raM.Measured, raM.Verdict = fmtDur(d), Fail
				evidenceOf([]rec{r}, wantMax.Seconds(), d.Seconds(), fmt.Sprintf("request %d of key %s was told to retry after %s; from a whole quota the exact wait was at most %s (plus 1s of rounding and the timing tolerance %s: %s)", e.ID, key, fmtDur(d), fmtDur(wantMax), fmtDur(time.Duration(ix.tol)), fmtDur(wantMax+time.Second+time.Duration(ix.tol))), CauseAdvice)
			case d > time.Duration(headers.Seconds(wantMax))*time.Second:
				raM.Measured = fmt.Sprintf("%s (longer than the exact wait rounded up)", fmtDur(d))
				figs["retry_after_excess_s"] = (d - time.Duration(headers.Seconds(wantMax))*time.Second).Seconds()
			default:
				raM.Measured = fmtDur(d)
			}
			ms = append(ms, raM)
		}
	}
	// Remaining counts in the burst: exactly the levels K−1 … K−adm.
	var got []int64
	for _, r := range admitted {
		if v, ok := ix.remainingOf(ix.ev(r)); ok {
			got = append(got, v)
		}
	}
	if len(got) == len(admitted) && len(got) > 0 && refillDuring < 1 {
		slices.Sort(got)
		want := make([]int64, adm)
		for i := range want {
			want[i] = int64(N - adm + i)
		}
		remM := Measurement{Name: "remaining", Declared: fmt.Sprintf("%d … %d", want[len(want)-1], want[0]), Measured: fmt.Sprintf("%d … %d", got[len(got)-1], got[0]), Verdict: Pass}
		if !slices.Equal(got, want) {
			remM.Verdict = Fail
			off := float64(sumI(got)-sumI(want)) / float64(len(got))
			evidence(admitted, float64(want[len(want)-1]), float64(got[len(got)-1]), fmt.Sprintf("key %s: the %d requests admitted from a whole quota of %d reported remaining %s, where the quota's levels were %s (off by %+.1f on average)", key, adm, N, fmtRange(got), fmtRange(want), off))
		}
		ms = append(ms, remM)
	}
	return ms, unknown
}

// calibrateRefill measures the refill from the probes after the burst
// emptied the quota in [lo, hi].
func (ix *index) calibrateRefill(l *policy.Limit, key string, lo, hi int64, probes []rec, col *collector, figs map[string]float64) (Measurement, int) {
	if l.Algorithm.Bucketed() {
		// After the burst the bucket held less than r·(hi − lo) ≤ … tokens;
		// an admitted probe p (n-th since the burst) needs n tokens by p.hi:
		// r ≥ n / (p.hi − lo); a refused one had less than one token at
		// p.lo: r < (m+1) / (p.lo − hi) with m probes admitted before it.
		low, high := 0.0, math.Inf(1)
		var fast, slow *rec
		n, fastN := 0, 0
		for i := range probes {
			p := probes[i]
			switch p.out {
			case history.Admitted:
				n++
				if v := float64(n) / time.Duration(p.hi-lo).Seconds(); v > low {
					low = v
					if v > l.R()*(1+1e-9) {
						fast, fastN = &probes[i], n
					}
				}
			case history.Rejected:
				// A refusal up to the timing tolerance late is a guard.
				if dt := time.Duration(p.lo - hi - ix.tol).Seconds(); dt > 0 {
					if v := float64(n+1) / dt; v < high {
						high = v
						if v < l.R()*(1-1e-9) {
							slow = &probes[i]
						}
					}
				}
			}
		}
		figs["measured_rate_low"] = low
		if !math.IsInf(high, 1) {
			figs["measured_rate_high"] = high
		}
		m := Measurement{Name: "refill", Declared: perSecond(l.R()), Measured: rateRange(low, high), Verdict: Pass}
		if fast != nil {
			m.Verdict = Fail
			e := ix.ev(*fast)
			col.add(Evidence{Key: key, Limit: l.Name, From: lo, To: fast.hi, Bound: l.R(), Observed: low, RequestIDs: []uint64{e.ID}, TotalIDs: 1,
				Message: fmt.Sprintf("key %s: request %d was admitted %s after the burst emptied the bucket, its %s since, where at %s only %.2f could have come back: the refill is at least %s (%+.1f%%)",
					key, e.ID, fmtDur(time.Duration(fast.hi-lo)), plural(fastN, "token", "tokens"), policy.FormatRate(l.R()), l.R()*time.Duration(fast.hi-lo).Seconds(), policy.FormatRate(low), (low/l.R()-1)*100)})
		}
		if slow != nil {
			m.Verdict = Fail
			e := ix.ev(*slow)
			col.add(Evidence{Key: key, Limit: l.Name, From: hi, To: slow.lo, Bound: l.R(), Observed: high, RequestIDs: []uint64{e.ID}, TotalIDs: 1,
				Message: fmt.Sprintf("key %s: request %d was refused %s after the burst, when its token was due: the refill is at most %s where %s is declared (%+.0f%%)",
					key, e.ID, fmtDur(time.Duration(slow.lo-hi)), policy.FormatRate(high), policy.FormatRate(l.R()), (high/l.R()-1)*100)})
		}
		return m, 0
	}
	if l.Algorithm != policy.SlidingLog && !l.AnchoredAtFirst() {
		return Measurement{Name: "window", Declared: l.Window.String(), Measured: "not measured for epoch windows", Verdict: Pass}, 0
	}
	// A window of W: the burst's slots free at the earliest W after lo. An
	// admitted probe at p.hi shows W ≤ p.hi − lo; a refused one at p.lo
	// shows W > p.lo − hi.
	wLow, wHigh := time.Duration(0), time.Duration(math.MaxInt64)
	var short, long *rec
	for i := range probes {
		p := probes[i]
		switch p.out {
		case history.Admitted:
			if d := time.Duration(p.hi - lo); d < wHigh {
				wHigh = d
				if d < l.W() {
					short = &probes[i]
				}
			}
		case history.Rejected:
			if d := time.Duration(p.lo - hi - ix.tol); d > wLow {
				wLow = d
				if d > l.W() {
					long = &probes[i]
				}
			}
		}
	}
	m := Measurement{Name: "window", Declared: l.Window.String(), Verdict: Pass}
	if wHigh == time.Duration(math.MaxInt64) {
		m.Measured = fmt.Sprintf("more than %s", fmtDur(wLow))
	} else {
		m.Measured = fmt.Sprintf("%s … %s", fmtDur(wLow), fmtDur(wHigh))
	}
	if short != nil {
		m.Verdict = Fail
		e := ix.ev(*short)
		col.add(Evidence{Key: key, Limit: l.Name, From: lo, To: short.hi, Bound: l.W().Seconds(), Observed: time.Duration(short.hi - lo).Seconds(), RequestIDs: []uint64{e.ID}, TotalIDs: 1,
			Message: fmt.Sprintf("key %s: request %d was admitted %s after a full window's burst, before the declared window of %s had passed", key, e.ID, fmtDur(time.Duration(short.hi-lo)), l.Window)})
	}
	if long != nil {
		m.Verdict = Fail
		e := ix.ev(*long)
		col.add(Evidence{Key: key, Limit: l.Name, From: hi, To: long.lo, Bound: l.W().Seconds(), Observed: time.Duration(long.lo - hi).Seconds(), RequestIDs: []uint64{e.ID}, TotalIDs: 1,
			Message: fmt.Sprintf("key %s: request %d was refused %s after the burst, when the declared window of %s had passed", key, e.ID, fmtDur(time.Duration(long.lo-hi)), l.Window)})
	}
	return m, 0
}

// remainingOf is the remaining count a response states: the declared
// RateLimit generation's, else X-RateLimit-Remaining.
func (ix *index) remainingOf(e *history.Event) (int64, bool) {
	if ix.gen != headers.None {
		o := headers.Read(ix.gen, e.Fields)
		if o.Remaining.Valid() {
			return o.Remaining.N, true
		}
	}
	if ix.p.Headers.XRateLimit && e.XRemaining != "" {
		v, err := headers.ParseXInt(e.XRemaining)
		return v, err == nil
	}
	return 0, false
}

func rateRange(low, high float64) string {
	switch {
	case math.IsInf(high, 1) && low == 0:
		return "not measured"
	case math.IsInf(high, 1):
		return "at least " + perSecond(low)
	case low == 0:
		return "at most " + perSecond(high)
	}
	return fmt.Sprintf("%.4g … %s", low, perSecond(high))
}

// perSecond writes a rate per second with 4 significant digits.
func perSecond(r float64) string { return fmt.Sprintf("%.4g/s", r) }

func sumI(xs []int64) int64 {
	var s int64
	for _, x := range xs {
		s += x
	}
	return s
}

func fmtRange(xs []int64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[len(xs)-1-i] = fmt.Sprint(x)
	}
	if len(parts) > 6 {
		parts = append(parts[:3], append([]string{"…"}, parts[len(parts)-2:]...)...)
	}
	return strings.Join(parts, ", ")
}

// exactWait is the exact wait after refusal r of a calibrate burst that
// began (its earliest decision) at lo from a whole quota of l: at least
// wantMin, at most wantMax.
func (ix *index) exactWait(l *policy.Limit, r rec, lo int64) (wantMin, wantMax time.Duration) {
	switch {
	case l.Algorithm.Bucketed():
		// At its decision the bucket held at most r·(r.hi − lo) tokens.
		per := time.Duration(float64(time.Second) / l.R())
		return time.Duration(math.Max(0, float64(per)*(1-l.R()*time.Duration(r.hi-lo).Seconds()))), per
	case l.Algorithm == policy.SlidingLog || l.AnchoredAtFirst():
		return l.W() - time.Duration(r.hi-lo), l.W()
	case l.Algorithm == policy.FixedWindow:
		W := int64(l.W())
		edge := (floorDiv(ix.startNs+r.hi, W)+1)*W - ix.startNs
		return time.Duration(edge - r.hi), time.Duration(edge - r.lo)
	}
	return 0, 0
}

// calibrateWaits maps the first refusal of each calibrate burst whose
// burst admitted exactly the declared quota (rec.idx) to the longest its
// exact wait can be: the state there is known, so advice far beyond it is
// the advice's own defect (retry-after).
func (ix *index) calibrateWaits() map[int32]time.Duration {
	var out map[int32]time.Duration
	for _, ph := range ix.h.Phases {
		if ph.Kind != "calibrate" {
			continue
		}
		for gi := range ix.groups {
			g := &ix.groups[gi]
			if g.tier == nil {
				continue
			}
			var b calBurst
			for _, r := range g.recs {
				if e := ix.ev(r); e.Phase == ph.Name && e.Intended == ph.Target {
					b.add(r)
				}
			}
			if idx, max, ok := ix.calWait(&b, g.tier); ok {
				if out == nil {
					out = map[int32]time.Duration{}
				}
				out[idx] = max
			}
		}
	}
	return out
}

// calBurst is one key's requests of one calibrate burst, in the key's
// order (calibrateWaits; retryStream gathers it event by event).
type calBurst struct {
	n     int
	lo    int64 // the earliest decision
	adm   int   // admissions (negative after an error: the state is not known)
	first rec   // the refusal decided first
	seen  bool  // first is set
}

func (b *calBurst) add(r rec) {
	if b.n == 0 {
		b.lo = r.lo
	}
	b.n++
	b.lo = min(b.lo, r.lo)
	switch r.out {
	case history.Admitted:
		b.adm++
	case history.Rejected:
		if !b.seen || r.lo < b.first.lo {
			b.first, b.seen = r, true
		}
	default:
		b.adm = -1 << 30 // an error: the state is not known
	}
}

// calWait is the longest exact wait after b's first refusal (its rec.idx)
// when b admitted exactly tier t's quota from a whole one (ok).
func (ix *index) calWait(b *calBurst, t *policy.Tier) (idx int32, wait time.Duration, ok bool) {
	l := &t.Limits[0]
	if b.n == 0 || !b.seen || b.adm != int(l.Count) || !b.first.limit {
		return 0, 0, false
	}
	if _, max := ix.exactWait(l, b.first, b.lo); max > 0 {
		return b.first.idx, max, true
	}
	return 0, 0, false
}
