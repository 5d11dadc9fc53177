package checks

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

const docOversell = "Admitted requests of one key never exceed the limit's envelope: no choice of decision times inside [Sent−slack, Recv+slack] fits K + r·d for buckets, N per rolling W for sliding windows, N per aligned fixed window; fails only with an interval certificate. Across a declared limit change the tier's own limits bound a lowering, the raised limits a raise (the tier's own before it), and the changed limits every admission from a full bucket of them once the change is in force (made plus tolerance.propagation)."

// keyEnvelope is the judgement of one key's non-variant admissions.
type keyEnvelope struct {
	g        *group
	admitted int
	// span is from the earliest possible decision to the latest.
	span    int64
	byLimit []envStatus
}

// envelopes judges every tiered key once; oversell, instances and regions
// share the result.
func (ix *index) envelopes() []keyEnvelope {
	ix.envOnce.Do(ix.computeEnvelopes)
	return ix.envCache
}

func (ix *index) computeEnvelopes() {
	var sc scratch
	for gi := range ix.groups {
		g := &ix.groups[gi]
		if g.tier == nil {
			continue
		}
		sc.recs = admitted(sc.recs[:0], g.recs, false)
		ke := keyEnvelope{g: g, admitted: len(sc.recs)}
		if len(sc.recs) > 0 {
			lo, hi := sc.recs[0].lo, sc.recs[0].hi
			for _, r := range sc.recs {
				hi = max(hi, r.hi)
			}
			ke.span = hi - lo
			ke.byLimit = make([]envStatus, len(g.tier.Limits))
			for li := range g.tier.Limits {
				st := ix.judgeLimit(sc.recs, &g.tier.Limits[li], &sc)
				for ci := range st.certs {
					// Detach certificate records from the scratch buffer.
					st.certs[ci].recs = append([]rec(nil), st.certs[ci].recs...)
				}
				ke.byLimit[li] = st
			}
		}
		ix.envCache = append(ix.envCache, ke)
	}
}

// checkOversell reads the envelopes (computeEnvelopes): for each key with
// m admissions and each limit, a token bucket or GCRA costs O(m log m)
// (EDF's heap; the Hall certificate's linear screen after an order by hi
// that is linear on nearly sorted input, and its O(m log m) sweep only when
// an excess may exist), a sliding log or counter O(m), an epoch-aligned
// fixed window O(m) and one anchored at the key's first request
// O(m log m). Over a history of N events: O(N log N) at worst, O(N) for
// the usual nearly sorted histories of a correct limiter.
func checkOversell(ix *index) Result {
	col := ix.collector()
	var admittedN, keys, unknown, infeasible int
	maxOver := 0.0
	worst, worstN := 0, int64(0)
	hasFixed := false
	for _, ke := range ix.envelopes() {
		if ke.admitted == 0 {
			continue
		}
		keys++
		admittedN += ke.admitted
		for li, st := range ke.byLimit {
			l := &ke.g.tier.Limits[li]
			unknown += st.unknown
			infeasible += st.infeasible
			for ci := range st.certs {
				ct := &st.certs[ci]
				maxOver = math.Max(maxOver, float64(ct.count)/ct.bound)
				ev := ix.evidence(ke.g.key, ct, "")
				ix.noteChangeAcross(&ev, ke.g.tier)
				col.add(ev)
			}
			if l.Algorithm == policy.FixedWindow {
				hasFixed = true
				if float64(st.worstRolling)/float64(l.Count) > float64(worst)/math.Max(1, float64(worstN)) {
					worst, worstN = st.worstRolling, l.Count
				}
			}
		}
	}
	unexplained, fallback := ix.unexplainedFallbacks()
	notes, over := ix.judgeChangedLimits(col)
	maxOver = math.Max(maxOver, over)
	res := oversellResult(col, oversellFigures{admitted: admittedN, keys: keys, maxOver: maxOver, hasFixed: hasFixed,
		worst: worst, worstN: worstN, unknown: unknown, infeasible: infeasible, unexplained: unexplained, fallback: fallback, weighted: ix.p.Weighted()})
	if len(notes) > 0 {
		res.Summary += "; " + strings.Join(notes, "; ")
	}
	return res
}

// oversellFigures is what checkOversell's verdict is made of, gathered in
// memory (checkOversell) or from a stream (oversellStream).
type oversellFigures struct {
	admitted, keys        int
	maxOver               float64
	hasFixed              bool
	worst                 int
	worstN                int64
	unknown               int
	infeasible            int // of unknown: proven to have no schedule
	unexplained, fallback int
	// weighted: the policy declares costs, so admitted counts tokens.
	weighted bool
}

func oversellResult(col *collector, f oversellFigures) Result {
	figs := map[string]float64{}
	figs["admitted"] = float64(f.admitted)
	figs["keys"] = float64(f.keys)
	figs["max_overrun"] = f.maxOver
	if f.hasFixed {
		figs["worst_rolling_window"] = float64(f.worst)
		figs["boundary_ratio"] = float64(f.worst) / math.Max(1, float64(f.worstN))
	}
	if f.unknown > 0 {
		figs["undecided_clusters"] = float64(f.unknown)
	}
	if f.infeasible > 0 {
		figs["infeasible_clusters"] = float64(f.infeasible)
	}
	if f.keys == 0 {
		return col.result(Skip, "no admitted requests of a key with a tier", figs, "")
	}
	one, many := "request", "requests"
	if f.weighted {
		one, many = "token", "tokens" // weighted admissions count their cost
	}
	v, sum := Pass, fmt.Sprintf("%s admitted across %s stayed within their envelopes", plural(f.admitted, one, many), plural(f.keys, "key", "keys"))
	if f.unknown > 0 {
		v = Unknown
		sum = fmt.Sprintf("%s could neither be scheduled within the envelope nor proven to exceed it by one interval (%s)", plural(f.unknown, "burst", "bursts"), undecidedWhy(f.unknown, f.infeasible))
	}
	// Decisions the target made by its failure mode although no fault was
	// injected mean the store was too slow or down on its own: the envelope
	// was then not really tested. Say so rather than pass.
	if f.fallback > 0 {
		figs["fallback_decisions"] = float64(f.fallback)
		figs["unexplained_fallbacks"] = float64(f.unexplained)
	}
	if v == Pass && f.unexplained > 0 && float64(f.unexplained) >= 0.05*float64(f.admitted+f.unexplained) {
		v = Unknown
		sum = fmt.Sprintf("%s were decided by the failure mode (X-RateLimit-Fallback) without an injected fault — the store was too slow or unavailable, so the envelope was not really tested; %s", plural(f.unexplained, "request", "requests"), sum)
	}
	fail := ""
	if col.total > 0 {
		fail = fmt.Sprintf("%s over the limit (worst %.2f× the envelope)", plural(col.total, "proven interval", "proven intervals"), f.maxOver)
	}
	return col.result(v, sum, figs, fail)
}

// undecidedWhy says why unknown bucket clusters were left undecided, of
// which infeasible were proven to have no schedule.
func undecidedWhy(unknown, infeasible int) string {
	var why []string
	if infeasible > 0 {
		why = append(why, fmt.Sprintf("%d proven to have no schedule by the exact search, by an argument over several intervals that no single interval's count shows", infeasible))
	}
	if n := unknown - infeasible; n > 0 {
		why = append(why, fmt.Sprintf("%d left undecided by the exact search (over its work bound)", n))
	}
	return strings.Join(why, "; ")
}

// unexplainedFallbacks counts the events the target marked as decided by
// its failure mode outside every injected fault window (and all marked ones).
func (ix *index) unexplainedFallbacks() (unexplained, all int) {
	for i := range ix.h.Events {
		e := &ix.h.Events[i]
		if e.Fallback == "" {
			continue
		}
		all++
		if !ix.fallbackExplained(e) {
			unexplained++
		}
	}
	return unexplained, all
}

// fallbackExplained reports whether e, which the target says its failure
// mode decided, may have been decided inside an injected fault window.
func (ix *index) fallbackExplained(e *history.Event) bool {
	lo, hi := e.Sent-ix.slack, e.Recv+ix.slack
	for _, f := range ix.h.Faults {
		from, to := f.Span()
		if f.End != 0 {
			to += recoveryOf(ix.p)
		}
		if lo <= to && hi >= from {
			return true
		}
	}
	return false
}

const docInstances = "For every key whose requests went to two or more instances, the aggregate admissions across instances fit one quota (the oversell envelope over the union); per-instance state shows up as ≈N× one quota."

// checkInstances judges the union of a key's instances as oversell judges
// one key: O(m log m) in the admissions of each multi-instance key.
// instancesUnspread is instances' result when no key's requests went to
// two or more instances (of insts in the run): nothing to judge.
func instancesUnspread(col *collector, insts int) Result {
	figs := map[string]float64{"instances": float64(insts), "aggregate_ratio": 0, "keys": 0}
	return col.result(Skip, "no key's requests went to two or more instances", figs, "")
}

func checkInstances(ix *index) Result {
	col := ix.collector()
	figs := map[string]float64{"instances": float64(ix.insts)}
	ratio := 0.0
	keys, unknown, perInstance := 0, 0, 0
	// sharedBy is the key whose refusals show the instances share state
	// ("" when none does), found once: shared state is the deployment's,
	// not one key's.
	sharedBy, sharedKnown := "", false
	for _, ke := range ix.envelopes() {
		if ke.g.insts < 2 || ke.admitted == 0 {
			continue
		}
		keys++
		for li, st := range ke.byLimit {
			l := &ke.g.tier.Limits[li]
			if l.PerInstance() {
				// Each instance has its own quota by declaration: oversell
				// judges each alone; the aggregate is not one quota.
				perInstance++
				continue
			}
			ratio = math.Max(ratio, float64(ke.admitted)/maxIn(l, time.Duration(ke.span)))
			unknown += st.unknown
			for ci := range st.certs {
				ct := &st.certs[ci]
				perInst := ix.eachInstanceFits(ct, l)
				why := "at least one instance also oversold on its own: a non-atomic update (a race), besides any per-instance state"
				if perInst {
					if !sharedKnown {
						sharedBy, sharedKnown = ix.refusalsShowSharedState(), true
					}
					if sharedBy != "" {
						// Instances that refused with room left of their own
						// saw the others' consumption: the state is shared,
						// and some instance misreads it (a skewed clock, a
						// stale cache), which is oversell's defect.
						perInst = false
						why = fmt.Sprintf("each instance's own admissions fit one quota, but an instance refused key %s with room left of its own, so the state is shared: an instance misreads it (a skewed clock, a stale cache)", sharedBy)
					} else {
						why = "each instance's own admissions fit one quota: state kept per instance (or a limit that is per instance but declared cluster-wide)"
					}
				}
				msg := fmt.Sprintf("key %s admitted %d across %d instances where one quota allows %s (%.1f×); %s",
					ke.g.key, ct.count, ke.g.insts, fmtF(ct.bound), float64(ct.count)/ct.bound, why)
				ev := ix.evidence(ke.g.key, ct, msg)
				if perInst {
					ev.Cause = CausePerInstanceState
				}
				col.add(ev)
			}
		}
	}
	figs["aggregate_ratio"] = ratio
	figs["keys"] = float64(keys)
	if keys == 0 {
		return instancesUnspread(col, ix.insts)
	}
	v, sum := Pass, fmt.Sprintf("%s spread over instances stayed within one quota (aggregate ratio %.2f)", plural(keys, "key", "keys"), ratio)
	if perInstance > 0 {
		figs["per_instance_limits"] = float64(perInstance)
		sum += fmt.Sprintf("; %s declared per instance judged by oversell, instance by instance", plural(perInstance, "limit", "limits"))
	}
	if unknown > 0 {
		v, sum = Unknown, fmt.Sprintf("%s could not be decided (no schedule, no certificate)", plural(unknown, "burst", "bursts"))
	}
	return col.result(v, sum, figs, fmt.Sprintf("%s exceeded one quota across instances", plural(col.total, "interval", "intervals")))
}

const docBypass = "Identity variants of a key (events with Variant set: spoofed X-Forwarded-For, the key given twice, surrounding spaces, another case, a key beyond max_length, path spellings) buy no extra quota: a variant fails only when the key's admissions with that variant exceed one envelope (an interval certificate) while the plain key's admissions alone fit it and the variant got more admissions than the control requests of the plain key sent in the same bursts — so a limiter that oversells anyway is reported by oversell, not blamed on the variants. A variant the declared identity says is refused (repeated: rejected; too_long: reject) must not be admitted at all. The repeat variant carries the key where the application serves its tenant (identity.tenant_occurrence): a limiter counting the other occurrence, declared so or not, fails here."

// variantName is a Variant without its per-request detail ("xff:1.2.3.4" →
// "xff"); path variants keep their spelling.
func variantName(v string) string {
	if name, _, ok := strings.Cut(v, ":"); ok && name != "path" {
		return name
	}
	return v
}

// refusedVariant reports whether the declared identity says requests of
// variant v are refused outright.
func refusedVariant(id *policy.Identity, v string) bool {
	switch v {
	case "repeat":
		return id.Repeated == policy.RepeatedRejected
	case "long":
		return id.TooLong == policy.TooLongReject && id.MaxLength > 0
	}
	return false
}

// variantCause says, for a variant whose cause the declaration names,
// what let it buy quota ("" for the others).
func variantCause(id *policy.Identity, v string) string {
	if v != "repeat" {
		return ""
	}
	if id.Mismatched() {
		return fmt.Sprintf(" — as the policy declares: the limiter counts the %s occurrence (identity.repeated) while the application serves the %s (identity.tenant_occurrence), so a client that adds another key is served beyond its quota", id.Repeated, id.Tenant())
	}
	return fmt.Sprintf(" — the limiter charged another occurrence than the %s, which the policy declares the tenant's and the limiter's", id.Tenant())
}

// checkBypass judges each probed key's plain and variant admissions
// together as oversell does: O(m log m) in the admissions of a probed key.
func checkBypass(ix *index) Result {
	col := ix.collector()
	figs := map[string]float64{}
	var sc scratch
	keys, variantsAdmitted, unknown, unattributed := 0, 0, 0, 0
	for gi := range ix.groups {
		g := &ix.groups[gi]
		if g.nVariant == 0 || g.tier == nil {
			continue
		}
		keys++
		plain := admitted(nil, g.recs, false)
		byName := map[string][]rec{}
		var names []string
		for _, r := range g.recs {
			if !r.variant {
				continue
			}
			v := variantName(ix.ev(r).Variant)
			if _, ok := byName[v]; !ok {
				names = append(names, v)
			}
			byName[v] = append(byName[v], r)
			if r.out == history.Admitted && !r.fault {
				variantsAdmitted++
			}
		}
		sort.Strings(names)
		// Does the plain key fit on its own? If not, its oversell explains
		// any excess, and no variant can be blamed.
		plainOver := false
		for li := range g.tier.Limits {
			if st := ix.judgeLimit(plain, &g.tier.Limits[li], &sc); len(st.certs) > 0 {
				plainOver = true
			}
		}
		for _, v := range names {
			vr := byName[v]
			if refusedVariant(&ix.p.Identity, v) {
				var adm []rec
				for _, r := range vr {
					if r.out == history.Admitted {
						adm = append(adm, r)
					}
				}
				if len(adm) > 0 {
					idl, total := ix.idList(adm)
					col.add(ix.refusedVariantEvidence(g.key, g.tier, v, len(adm), len(vr), adm[0].lo, adm[len(adm)-1].hi, idl, total))
				}
				continue
			}
			union := admitted(append([]rec(nil), plain...), vr, true)
			slices.SortFunc(union, cmpRec)
			// The control: plain requests sent within the variant's bursts.
			lo, hi := vr[0].lo, vr[0].hi
			vAdm := 0
			for _, r := range vr {
				lo, hi = min(lo, r.lo), max(hi, r.hi)
				if r.out == history.Admitted && !r.fault {
					vAdm++
				}
			}
			cAdm, cN := 0, 0
			for _, r := range g.recs {
				if !r.variant && r.lo >= lo && r.lo <= hi {
					cN++
					if r.out == history.Admitted && !r.fault {
						cAdm++
					}
				}
			}
			for li := range g.tier.Limits {
				l := &g.tier.Limits[li]
				st := ix.judgeLimit(union, l, &sc)
				unknown += st.unknown
				if len(st.certs) == 0 {
					continue
				}
				if plainOver || vAdm <= cAdm {
					unattributed++
					continue
				}
				ct := &st.certs[0]
				col.add(ix.evidence(g.key, ct, ix.bypassMessage(g.key, v, vAdm, len(vr), cN, cAdm, certMessage(ct))))
			}
		}
	}
	return ix.bypassResult(col, figs, keys, variantsAdmitted, unknown, unattributed)
}

// refusedVariantEvidence is the evidence of variant v of key, which the
// declared identity refuses: adm of its n requests were admitted, the
// first decided from lo, the last by hi.
func (ix *index) refusedVariantEvidence(key string, t *policy.Tier, v string, adm, n int, lo, hi int64, idl []uint64, total int) Evidence {
	why := "the key given more than once (identity.repeated: rejected)"
	if v == "long" {
		why = fmt.Sprintf("keys longer than identity.max_length %d (too_long: reject)", ix.p.Identity.MaxLength)
	}
	return Evidence{Key: key, Limit: limitNames(t), From: lo, To: hi, Bound: 0, Observed: float64(adm),
		RequestIDs: idl, TotalIDs: total,
		Message: fmt.Sprintf("key %s, variant %s: %d of %d requests were admitted although the policy declares %s refused", key, v, adm, n, why)}
}

// bypassMessage is the message of variant v of key bought quota: vAdm of
// its n requests admitted, cAdm of the cN control requests; certMsg the
// union's certificate's.
func (ix *index) bypassMessage(key, v string, vAdm, n, cN, cAdm int, certMsg string) string {
	control := "no control requests of the plain key were sent with it"
	if cN > 0 {
		control = fmt.Sprintf("the %d control requests of the plain key sent in the same bursts got %d", cN, cAdm)
	}
	return fmt.Sprintf("key %s, variant %s: %d of %d variant requests were admitted while %s; the plain key alone stays within its envelope, with the variant %s%s",
		key, v, vAdm, n, control, certMsg, variantCause(&ix.p.Identity, v))
}

// bypassResult is bypass's verdict from what checkBypass (or
// bypassStream) gathered.
func (ix *index) bypassResult(col *collector, figs map[string]float64, keys, variantsAdmitted, unknown, unattributed int) Result {
	figs["keys"] = float64(keys)
	figs["variants_admitted"] = float64(variantsAdmitted)
	if unattributed > 0 {
		figs["excess_explained_by_the_plain_key"] = float64(unattributed)
	}
	if keys == 0 {
		return col.result(Skip, "no events with an identity variant (Variant) in this run", figs, "")
	}
	v, sum := Pass, fmt.Sprintf("%s probed with identity variants; no variant bought quota the plain key did not get", plural(keys, "key", "keys"))
	if unattributed > 0 {
		sum += fmt.Sprintf(" (%s beyond the envelope came with the plain key oversold as much: see oversell)", plural(unattributed, "excess", "excesses"))
	}
	if unknown > 0 && col.total == 0 {
		v, sum = Unknown, fmt.Sprintf("%s could not be decided (no schedule, no certificate)", plural(unknown, "burst", "bursts"))
	}
	return col.result(v, sum, figs, fmt.Sprintf("identity variants bought extra quota or were admitted against the declaration in %s", plural(col.total, "case", "cases")))
}

const docRegions = "Applies when an event's phase starts with \"region\", or the policy declares a tolerance and the run used several instances: each key's admissions over the whole run stay within (1+Tolerance)·E(span), E = K + r·span for buckets."

// checkRegions sums each key's admissions over its span: O(N).
func checkRegions(ix *index) Result {
	applies := ix.p.Tolerance.Regions > 0 && ix.insts > 1
	if !applies {
		applies = ix.regionPhase
	}
	var keys []regionsKey
	if applies {
		for _, ke := range ix.envelopes() {
			if ke.admitted == 0 {
				continue
			}
			g := ke.g
			// The earliest possible decision of the key's first admission
			// and the latest of any (envelopes' span).
			var first int64
			for _, r := range g.recs {
				if r.out == history.Admitted && (!r.fault || r.changed) && !r.variant && r.tokens() > 0 {
					first = r.lo
					break
				}
			}
			keys = append(keys, regionsKey{key: g.key, tier: g.tier, admitted: ke.admitted, first: first, last: first + ke.span,
				ids: func() ([]uint64, int) { return ix.idList(admitted(nil, g.recs, false)) }})
		}
	}
	return ix.judgeRegions(applies, keys)
}

// regionsKey is what regions judges of one key with admissions: their
// count (tokens), the earliest possible decision of the first and the
// latest of any, and the evidence's ids (the first admissions in the
// key's order, as idList gives them).
type regionsKey struct {
	key         string
	tier        *policy.Tier
	admitted    int
	first, last int64
	ids         func() ([]uint64, int)
}

// judgeRegions is regions' judgement of keys (in key order, each with
// admissions) once applies is known: checkRegions in memory and
// regionsStream alike.
func (ix *index) judgeRegions(applies bool, keys []regionsKey) Result {
	col := ix.collector()
	figs := map[string]float64{"tolerance": ix.p.Tolerance.Regions}
	if !applies {
		return col.result(Skip, "no region data: no phase named region* and no declared tolerance with several instances", figs, "")
	}
	worst := 0.0
	for _, k := range keys {
		span := k.last - k.first
		for li := range k.tier.Limits {
			l := &k.tier.Limits[li]
			bound := (1 + ix.p.Tolerance.Regions) * maxIn(l, time.Duration(span))
			over := float64(k.admitted) / bound
			worst = math.Max(worst, over)
			if float64(k.admitted) > bound+eps {
				idl, total := k.ids()
				msg := fmt.Sprintf("key %s admitted %d over %s across regions; one quota plus the declared %.0f%% tolerance allows %s (overrun %.1f%%)",
					k.key, k.admitted, fmtDur(time.Duration(span)), ix.p.Tolerance.Regions*100, fmtF(bound), (over*(1+ix.p.Tolerance.Regions)-1)*100)
				col.add(Evidence{Key: k.key, Limit: l.Name, From: k.first, To: k.last, Bound: bound, Observed: float64(k.admitted),
					RequestIDs: idl, TotalIDs: total, Message: msg})
			}
		}
	}
	figs["worst_ratio"] = worst
	// The overrun over one plain quota: the figure a precision/latency
	// comparison of region settings puts side by side.
	figs["global_overrun_pct"] = math.Max(0, worst*(1+ix.p.Tolerance.Regions)-1) * 100
	figs["keys"] = float64(len(keys))
	if len(keys) == 0 {
		return col.result(Skip, "no admitted requests of a key with a tier", figs, "")
	}
	return col.result(Pass, fmt.Sprintf("global admissions of %s within the %.0f%% tolerance (worst %.2f of the bound)", plural(len(keys), "key", "keys"), ix.p.Tolerance.Regions*100, worst),
		figs, fmt.Sprintf("%s overran the declared tolerance", plural(col.total, "key", "keys")))
}

// refusalsShowSharedState returns the first key (in key order) whose
// refusals show that the instances share state, "" when none does.
func (ix *index) refusalsShowSharedState() string {
	// A limiter that charges refused requests (under-admission found a
	// refusal that only the key's own refusals explain) is judged with its
	// refusals as consumption; any other with its admissions alone, since
	// requests sent together cannot be ordered and counting every one of
	// them would hide the evidence of a concurrent burst.
	chargesRefusals := false
	for _, w := range ix.under().wrong {
		chargesRefusals = chargesRefusals || w.self
	}
	for gi := range ix.groups {
		if g := &ix.groups[gi]; ix.refusalShowsSharedState(g, chargesRefusals) {
			return g.key
		}
	}
	return ""
}

// refusalShowsSharedState reports whether some instance refused a request
// of g (by the limit, outside fault windows) that the instance's own
// requests left room for under every limit, timing tolerance included:
// only consumption seen through shared state explains such a refusal, so
// the instances do not keep the key's state each on their own. With
// chargesRefusals the instance's refused requests count as consumption too,
// so a limiter whose refusals cost (HAProxy's request rate counts every
// request) is not mistaken for shared state.
func (ix *index) refusalShowsSharedState(g *group, chargesRefusals bool) bool {
	if g.tier == nil || g.insts < 2 {
		return false
	}
	own := map[int16]*cands{}
	for _, r := range g.recs {
		if r.out == history.Rejected && !chargesRefusals {
			continue
		}
		c := own[r.inst]
		if c == nil {
			c = &cands{}
			own[r.inst] = c
		}
		c.add(r)
	}
	for _, c := range own {
		slices.Sort(c.hi)
	}
	// With refusals as consumption r itself is among its instance's
	// candidates: room is asked with self its cost.
	empty := &cands{}
	for _, r := range g.recs {
		if r.out != history.Rejected || r.variant || !r.limit || r.fault {
			continue
		}
		c := own[r.inst]
		if c == nil {
			c = empty
		}
		rt := r
		rt.lo -= ix.tol
		self := 0.0
		if chargesRefusals {
			self = float64(r.tokens())
		}
		roomy := true
		for li := range g.tier.Limits {
			if _, ok, dec := ix.room(c, rt, &g.tier.Limits[li], self); !ok || !dec {
				roomy = false
				break
			}
		}
		if roomy {
			return true
		}
	}
	return false
}

// eachInstanceFits reports whether the requests of a certificate, split by
// instance, each fit the limit alone.
func (ix *index) eachInstanceFits(ct *cert, l *policy.Limit) bool {
	by := map[int16][]rec{}
	for _, r := range ct.recs {
		by[r.inst] = append(by[r.inst], r)
	}
	if len(by) < 2 {
		return false
	}
	var sc scratch
	for _, rs := range by {
		slices.SortFunc(rs, cmpRec)
		if st := ix.judgeScope(rs, l, &sc); len(st.certs) > 0 {
			return false
		}
	}
	return true
}
