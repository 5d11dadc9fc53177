package checks

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// bypassStream is checkBypass as a stream, in two passes over the events.
//
// checkBypass judges, per key probed with identity variants, the plain
// key's admissions alone (does the plain key oversell?) and, per variant,
// the plain and the variant's admissions together, each as oversell
// judges a key. Both are judged here as oversellStream judges a key:
// segments cut by the tier's gap, screened as they stream by, flagged
// segments collected and judged in the second pass. The plain key's
// judgement is oversell's own (the Streamer's oversellStream, run for
// bypass even when oversell is not asked for: oversellKey.certs says
// whether the plain key oversold). A variant's union is a second
// oversellStream's key, born at the variant's first admission as a copy
// of the plain key's state then (before it, the union's admissions are
// the plain key's), fed every later plain admission of the key and the
// variant's. Per variant it also keeps the span of its requests, its
// admissions and (a variant the identity declares refused) the count,
// span and first ids of its admissions; the second pass counts the plain
// key's control requests sent within the variant's span.
//
// State: per key probed, per variant, the union's oversell state (bounded
// as oversell's: a union that never pauses for its gap and is flagged
// holds its admissions of that segment) and a few counts; nothing for a
// key without variants. A run without variants (the common soak) keeps
// nothing, besides oversell's plain judgement.
type bypassStream struct {
	ix    *index
	plain *oversellStream
	us    *oversellStream
	keys  map[string]*bypassKey
	// unions maps a union's oversellKey.key to its variant.
	unions map[string]*bypassVariant
	// variantsAdmitted counts the figure of that name.
	variantsAdmitted int
	asked            bool
}

type bypassKey struct {
	key      string
	tier     *policy.Tier
	variants []*bypassVariant
}

type bypassVariant struct {
	name    string
	refused bool
	n       int   // requests
	lo, hi  int64 // their span
	vAdm    int   // admissions, not during a fault
	union   *oversellKey
	// A refused variant's admissions: count, the first lo, the last (in
	// Run's order) and the first ids.
	adm      int
	admLo    int64
	admLast  segRec
	admFirst firstIDs
	// The second pass: the plain key's requests sent within the span
	// (cN), admitted and not during a fault (cAdm).
	cN, cAdm int
	// first is, per limit, the first certificate of the union in Run's
	// order (its instance, then the order it was found in).
	first []*bypassCert
}

type bypassCert struct {
	inst int
	at   uint64
	ct   cert // without recs
	msg  string
	idl  []uint64
	n    int
}

func newBypassStream(ix *index, plain *oversellStream) *bypassStream {
	bs := &bypassStream{ix: ix, plain: plain, us: newOversellStream(ix), keys: map[string]*bypassKey{}, unions: map[string]*bypassVariant{}}
	bs.us.evidence = func(key string, ct *cert, idl []uint64, total int) Evidence {
		v := bs.unions[key]
		li := 0
		for i := range v.union.tier.Limits {
			if &v.union.tier.Limits[i] == ct.limit {
				li = i
			}
		}
		c := &bypassCert{inst: ct.inst, at: bs.us.certs, ct: *ct, msg: certMessage(ct), idl: idl, n: total}
		c.ct.recs = nil
		if f := v.first[li]; f == nil || cmp.Or(cmp.Compare(c.inst, f.inst), cmp.Compare(c.at, f.at)) < 0 {
			v.first[li] = c
		}
		return Evidence{}
	}
	return bs
}

// judged reports whether r is an admission the envelope judges (as
// admitted() keeps them, variants included).
func envelopeJudged(r rec) bool {
	return r.out == history.Admitted && !r.fault && r.tokens() > 0
}

func (bs *bypassStream) add(e *history.Event, seq uint64, r rec, sk *streamKey) {
	bs.us.tick(r.lo)
	t := sk.tier
	if t == nil {
		return
	}
	bk := bs.keys[e.Key]
	if !r.variant {
		if bk != nil && envelopeJudged(r) {
			for _, v := range bk.variants {
				if v.union != nil {
					bs.us.admit(v.union, r, r.tokens())
				}
			}
		}
		return
	}
	if bk == nil {
		bk = &bypassKey{key: e.Key, tier: t}
		bs.keys[e.Key] = bk
	}
	name := variantName(e.Variant)
	i := slices.IndexFunc(bk.variants, func(v *bypassVariant) bool { return v.name == name })
	if i < 0 {
		i = len(bk.variants)
		bk.variants = append(bk.variants, &bypassVariant{name: name, refused: refusedVariant(&bs.ix.p.Identity, name), lo: r.lo, hi: r.hi, first: make([]*bypassCert, len(t.Limits))})
	}
	v := bk.variants[i]
	v.n++
	v.lo, v.hi = min(v.lo, r.lo), max(v.hi, r.hi)
	if r.out == history.Admitted && !r.fault {
		v.vAdm++
		bs.variantsAdmitted++
	}
	if v.refused {
		if r.out == history.Admitted {
			if v.adm == 0 {
				v.admLo = r.lo
			}
			v.adm++
			at := segRec{r: r, id: e.ID, seq: seq}
			if v.adm == 1 || cmp.Or(cmp.Compare(r.lo, v.admLast.r.lo), cmp.Compare(r.hi, v.admLast.r.hi), cmp.Compare(seq, v.admLast.seq)) > 0 {
				v.admLast = at
			}
			v.admFirst.add(r, e.ID, seq, 1)
		}
		return
	}
	if !envelopeJudged(r) {
		return
	}
	if v.union == nil {
		v.union = bs.unionOf(e.Key, name, sk.oversell, t)
	}
	bs.us.admit(v.union, r, r.tokens())
}

// unionOf is the union of key's plain admissions and variant name's, born
// now: a copy of the plain key's state (nil: no plain admission yet).
func (bs *bypassStream) unionOf(key, name string, plain *oversellKey, t *policy.Tier) *oversellKey {
	id := key + "\x00" + name
	var u *oversellKey
	if plain == nil {
		u = bs.us.newKey(id, t)
	} else {
		u = plain.clone()
		u.key = id
		// The plain key's segments flagged so far are the union's too.
		bs.us.flagged += len(u.flagged)
		if u.isOpen = u.segN > 0; u.isOpen {
			bs.us.open = append(bs.us.open, u)
		}
	}
	bs.unions[id] = bs.keys[key].variants[slices.IndexFunc(bs.keys[key].variants, func(v *bypassVariant) bool { return v.name == name })]
	return u
}

// clone is a copy of k's pass-1 state sharing nothing with it.
func (k *oversellKey) clone() *oversellKey {
	c := *k
	c.flagged = slices.Clone(k.flagged)
	c.worst = slices.Clone(k.worst)
	c.seg = nil
	if k.screens != nil {
		c.screens = make([]limitScreen, len(k.screens))
		for i, s := range k.screens {
			switch {
			case s.edf != nil:
				e := *s.edf
				e.heap, e.next = slices.Clone(s.edf.heap), slices.Clone(s.edf.next)
				c.screens[i].edf = &e
			case s.slide != nil:
				sl := *s.slide
				sl.q, sl.dq = slices.Clone(s.slide.q), slices.Clone(s.slide.dq)
				c.screens[i].slide = &sl
			case s.fixed != nil:
				f := *s.fixed
				f.los = slices.Clone(s.fixed.los)
				c.screens[i].fixed = &f
			}
		}
	}
	return &c
}

// needAgain ends pass 1: the unions' flagged segments need a second.
func (bs *bypassStream) needAgain() bool {
	if bs.asked {
		return false
	}
	bs.asked = true
	bs.us.again = bs.us.needAgain()
	return bs.us.again
}

func (bs *bypassStream) addAgain(e *history.Event, seq uint64, r rec) {
	if !bs.us.again {
		return
	}
	bs.us.tick(r.lo)
	bk := bs.keys[e.Key]
	if bk == nil {
		return
	}
	if r.variant {
		i := slices.IndexFunc(bk.variants, func(v *bypassVariant) bool { return v.name == variantName(e.Variant) })
		if v := bk.variants[i]; v.union != nil && envelopeJudged(r) {
			bs.us.collect(v.union, e.ID, seq, r, r.tokens())
		}
		return
	}
	for _, v := range bk.variants {
		if v.refused {
			continue
		}
		if r.lo >= v.lo && r.lo <= v.hi {
			v.cN++
			if r.out == history.Admitted && !r.fault {
				v.cAdm++
			}
		}
		if v.union != nil && envelopeJudged(r) {
			bs.us.collect(v.union, e.ID, seq, r, r.tokens())
		}
	}
}

func (bs *bypassStream) result(all map[string]*streamKey, n, n2 uint64) Result {
	if !bs.asked && bs.needAgain() || !bs.plain.again && bs.plain.needAgain() || n2 != n && (bs.us.again || bs.plain.again) {
		return Result{Verdict: Unknown, Summary: fmt.Sprintf("not judged: the keys' and their variants' admissions needed a second pass over the events (Streamer.Again), which did not see every event (%d of %d)", n2, n), Figures: map[string]float64{}}
	}
	bs.plain.finish()
	bs.us.finish()
	ix := bs.ix
	col := ix.collector()
	figs := map[string]float64{}
	keys := make([]*bypassKey, 0, len(bs.keys))
	for _, bk := range bs.keys {
		keys = append(keys, bk)
	}
	slices.SortFunc(keys, func(a, b *bypassKey) int { return cmp.Compare(a.key, b.key) })
	unattributed := 0
	for _, bk := range keys {
		var plainCerts []int // per limit
		if sk := all[bk.key]; sk != nil && sk.oversell != nil {
			plainCerts = sk.oversell.certs
		}
		plainOver := slices.ContainsFunc(plainCerts, func(n int) bool { return n > 0 })
		vs := slices.Clone(bk.variants)
		slices.SortFunc(vs, func(a, b *bypassVariant) int { return cmp.Compare(a.name, b.name) })
		for _, v := range vs {
			if v.refused {
				if v.adm > 0 {
					idl, total := v.admFirst.ids(func(rec) int { return 1 }, v.adm)
					col.add(ix.refusedVariantEvidence(bk.key, bk.tier, v.name, v.adm, v.n, v.admLo, v.admLast.r.hi, idl, total))
				}
				continue
			}
			for li := range bk.tier.Limits {
				c := v.first[li]
				if v.union == nil {
					// No admission of the variant: the union is the plain
					// key, whose certificates oversell found.
					if plainCerts != nil && plainCerts[li] > 0 {
						unattributed++
					}
					continue
				}
				if c == nil {
					continue
				}
				if plainOver || v.vAdm <= v.cAdm {
					unattributed++
					continue
				}
				ct := c.ct
				col.add(Evidence{Key: bk.key, Limit: ct.limit.Name, From: ct.from, To: ct.to, Bound: ct.bound, Observed: float64(ct.count), RequestIDs: c.idl, TotalIDs: c.n,
					Message: ix.bypassMessage(bk.key, v.name, v.vAdm, v.n, v.cN, v.cAdm, c.msg)})
			}
		}
	}
	return ix.bypassResult(col, figs, len(keys), bs.variantsAdmitted, bs.us.unknown, unattributed)
}
