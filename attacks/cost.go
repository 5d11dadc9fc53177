package attacks

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/policy"
)

// Weighted requests (policy cost): a phase's costs field gives the cost of
// each request of a key in turn ("costs: [0, 1, K]" cycles), sent where the
// policy's cost section says and recorded in each event.

// costExpr is one entry of a phase's costs: a whole number, or K (the
// smallest limit count of the key's tier) plus or minus a number.
type costExpr struct {
	k     bool
	delta int64
}

func parseCostExpr(s string) (costExpr, error) {
	t := strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(t, "K"); ok {
		if rest == "" {
			return costExpr{k: true}, nil
		}
		rest = strings.ReplaceAll(rest, " ", "")
		n, err := strconv.ParseInt(rest, 10, 64)
		if err != nil || (rest[0] != '+' && rest[0] != '-') || n < -policy.MaxCost || n > policy.MaxCost {
			return costExpr{}, fmt.Errorf("%q: want a whole number of tokens, K, or K+n / K-n", s)
		}
		return costExpr{k: true, delta: n}, nil
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > policy.MaxCost {
		return costExpr{}, fmt.Errorf("%q: want a whole number of tokens 0 … %d, K, or K+n / K-n", s, policy.MaxCost)
	}
	return costExpr{delta: n}, nil
}

func (c costExpr) String() string {
	switch {
	case !c.k:
		return strconv.FormatInt(c.delta, 10)
	case c.delta == 0:
		return "K"
	}
	return fmt.Sprintf("K%+d", c.delta)
}

// validateCosts checks a phase's costs field.
func validateCosts(costs []string) error {
	if len(costs) > MaxBurstRequests {
		return fmt.Errorf("%d costs: at most %d", len(costs), MaxBurstRequests)
	}
	for _, s := range costs {
		if _, err := parseCostExpr(s); err != nil {
			return err
		}
	}
	return nil
}

// costCycle hands out a phase's resolved costs in turn.
type costCycle struct {
	costs []int64
	next  atomic.Uint64
}

func (c *costCycle) take() history.Cost {
	i := c.next.Add(1) - 1
	return history.CostOf(c.costs[i%uint64(len(c.costs))])
}

// keyCosts are one phase's cost cycles by sent key: K resolves per key's
// tier, so the tenants of one phase may cycle through different numbers.
type keyCosts map[string]*costCycle

// phaseCosts are the cost cycles of the phases running, by phase name.
type phaseCosts struct{ m sync.Map }

// of is the cycle of phase for sent key, nil when the phase sends
// unweighted requests.
func (p *phaseCosts) of(phase, key string) *costCycle {
	if v, ok := p.m.Load(phase); ok {
		return v.(keyCosts)[key]
	}
	return nil
}

// costKeys are the plan keys a phase's costs resolve against: its key, or
// its tenants'.
func costKeys(ph *Phase) []string {
	if ph.Kind != KindTenants {
		return []string{ph.Key}
	}
	out := make([]string, 0, len(ph.Tenants))
	for _, t := range ph.Tenants {
		out = append(out, t.Key)
	}
	return out
}

// resolveCosts turns ph's costs into numbers for each of its keys' tiers.
// note is set (and the cycles nil) when the phase cannot be sent as
// written: the policy declares no cost, or a cost falls outside the
// declared range for one of its keys.
func (e *Engine) resolveCosts(ph *Phase) (cycles keyCosts, note string, err error) {
	decl := e.o.Policy.Cost
	if decl == nil {
		return nil, fmt.Sprintf("not run: the phase gives costs but policy %s declares no cost section, so no request can say its weight", e.o.Policy.Name), nil
	}
	cycles = keyCosts{}
	for _, key := range costKeys(ph) {
		sent := e.Key(key)
		t, ok := e.tierOf(sent)
		if !ok {
			return nil, "", fmt.Errorf("key %q matches no tier of policy %s and there is no default tier", key, e.o.Policy.Name)
		}
		k := t.Limits[0].Count
		for _, l := range t.Limits[1:] {
			k = min(k, l.Count)
		}
		cyc := &costCycle{}
		for _, s := range ph.Costs {
			x, perr := parseCostExpr(s)
			if perr != nil {
				return nil, "", perr
			}
			n := x.delta
			if x.k {
				n += k
			}
			if !decl.Allows(n) {
				return nil, fmt.Sprintf("not run: cost %s is %d for tier %s (K = %d), outside the policy's declared costs %d … %d", x, n, t.Name, k, decl.MinCost(), decl.Max), nil
			}
			cyc.costs = append(cyc.costs, n)
		}
		cycles[sent] = cyc
	}
	return cycles, "", nil
}

// costParts is what r sends as its cost: a header or a query parameter.
func costParts(c *policy.Cost, r *req) (hdr [2]string, query string, ok bool) {
	if c == nil || !r.cost.Weighted() {
		return hdr, "", false
	}
	v := strconv.FormatInt(r.cost.Tokens(), 10)
	if c.In == policy.CostInQuery {
		return hdr, c.Name + "=" + v, true
	}
	return [2]string{c.Name, v}, "", true
}
