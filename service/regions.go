package service

import (
	"context"
	"fmt"

	"github.com/rlverify/rlverify/limiters"
)

// Region modes: how regions share one global quota.
const (
	// RegionReplicated: each region decides against its own Redis replica of
	// the global bucket; a reconciliation loop ships each region's
	// consumption to the others every RegionSync, arriving RegionLatency
	// later. Fast decisions, bounded overrun.
	RegionReplicated = "replicated"
	// RegionStrict: every region decides against one global Redis in the
	// home region, paying RegionLatency each way on every decision. Exact,
	// slow.
	RegionStrict = "strict"
	// RegionIndependent: each region enforces the whole quota alone, never
	// reconciling: N regions admit N× the quota (the mistake to catch).
	RegionIndependent = "independent"
)

// CheckRegionMode fails for anything but the three region modes.
func CheckRegionMode(mode string) error {
	switch mode {
	case RegionReplicated, RegionStrict, RegionIndependent:
		return nil
	}
	return fmt.Errorf("region mode %q: want replicated, strict or independent", mode)
}

// RegionReplicas is a region whose instances share limiters in this process:
// the regional replica of each tier. Drain and Debit serve the
// reconciliation loop and the control endpoint's drain.
type RegionReplicas map[string]*limiters.Regional

// Drain returns what the replicas admitted since the last drain, per tier
// and key.
func (m RegionReplicas) Drain(context.Context) (map[string]map[string]int64, error) {
	out := map[string]map[string]int64{}
	for tier, rg := range m {
		if d := rg.Drain(); len(d) > 0 {
			out[tier] = d
		}
	}
	return out, nil
}

// Debit charges tier's replica with n admissions of key made elsewhere.
func (m RegionReplicas) Debit(ctx context.Context, tier, key string, n int64) error {
	rg := m[tier]
	if rg == nil {
		return fmt.Errorf("regions: no replica of tier %q", tier)
	}
	return rg.Debit(ctx, key, n)
}
