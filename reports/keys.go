package reports

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/internal/human"
	"github.com/rlverify/rlverify/policy"
)

// KeyStats is what one key got over the run, beside what its tier's first
// limit allows over the same span.
type KeyStats struct {
	Key      string `json:"key"`
	Tier     string `json:"tier,omitempty"`
	Admitted int64  `json:"admitted"`
	Rejected int64  `json:"rejected"`
	Errors   int64  `json:"errors"`
	// Span is from the key's first send to its last receive, ns.
	Span int64 `json:"span"`
	// Limit describes the tier's first limit; Allowed is its envelope over
	// Span (K + r·span for buckets). Both empty when the key has no tier.
	Limit   string  `json:"limit,omitempty"`
	Allowed float64 `json:"allowed,omitempty"`
}

// MaxKeyStats bounds the keys listed (the busiest first).
const MaxKeyStats = 20

func keyStats(h *history.History, p *policy.Policy, oc []history.Outcome, g keyGroups) []KeyStats {
	type acc struct {
		KeyStats
		first, last int64
		n           int64
		at          int // the key's first event (bypass variants aside)
	}
	var order []*acc
	for k := range g.keys {
		var a *acc
		for _, i := range g.idx[k] {
			e := &h.Events[i]
			if e.Variant != "" {
				continue
			}
			if a == nil {
				a = &acc{KeyStats: KeyStats{Key: e.Key, Tier: e.Tier}, first: e.Sent, last: e.Recv, at: i}
				order = append(order, a)
			}
			a.n++
			a.first, a.last = min(a.first, e.Sent), max(a.last, e.Recv)
			switch oc[i] {
			case history.Admitted:
				a.Admitted++
			case history.Rejected:
				a.Rejected++
			default:
				a.Errors++
			}
		}
	}
	// The busiest first; among equals, the first seen.
	sort.Slice(order, func(i, j int) bool {
		if order[i].n != order[j].n {
			return order[i].n > order[j].n
		}
		return order[i].at < order[j].at
	})
	if len(order) > MaxKeyStats {
		order = order[:MaxKeyStats]
	}
	out := make([]KeyStats, len(order))
	for i, a := range order {
		ks := a.KeyStats
		ks.Span = a.last - a.first
		out[i] = ks
	}
	return withQuotas(out, p)
}

// withQuotas fills each row's tier, limit and what one quota allows over
// its span, and orders the rows by key.
func withQuotas(out []KeyStats, p *policy.Policy) []KeyStats {
	for i := range out {
		ks := &out[i]
		var t *policy.Tier
		var ok bool
		if ks.Tier != "" {
			t, ok = p.Tier(ks.Tier)
		} else {
			t, ok = p.TierFor(ks.Key)
		}
		if ok {
			l := t.Limits[0]
			ks.Tier, ks.Limit = t.Name, l.Describe()
			ks.Allowed = l.Envelope(time.Duration(ks.Span))
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// keyRows renders the per-key table's rows.
func keyRows(ks []KeyStats) [][]string {
	rows := make([][]string, 0, len(ks))
	for _, k := range ks {
		allowed := "-"
		if k.Limit != "" {
			allowed = fmt.Sprintf("%s (%s)", human.Count(int64(math.Round(k.Allowed))), k.Limit)
		}
		rows = append(rows, []string{k.Key, orDash(k.Tier), human.Count(k.Admitted), human.Count(k.Rejected), human.Count(k.Errors), dur(k.Span), allowed})
	}
	return rows
}

var keyHead = []string{"key", "tier", "admitted", "rejected", "errors", "span", "one quota allows over the span"}

func textKeys(b *strings.Builder, ks []KeyStats) {
	if len(ks) == 0 {
		return
	}
	tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.ToUpper(strings.Join(keyHead, "\t")))
	for _, r := range keyRows(ks) {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
}

func mdKeys(b *strings.Builder, ks []KeyStats) {
	if len(ks) == 0 {
		return
	}
	b.WriteString("\n### Keys\n\n| " + strings.Join(keyHead, " | ") + " |\n|" + strings.Repeat("---|", len(keyHead)) + "\n")
	for _, r := range keyRows(ks) {
		for i := range r {
			r[i] = mdCell(r[i])
		}
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
}
