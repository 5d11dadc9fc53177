package service

import (
	"sync/atomic"

	"github.com/rlverify/rlverify/limiters"
	"github.com/rlverify/rlverify/policy"
)

// RuleSource is where the reference service reads its rules (the policy)
// from. While it is down the service must not reject everything: it applies
// the conservative defaults from code (policy.Conservative: every key held to
// the fallback tier's limits), answering with X-RateLimit-Fallback: rules.
// Safe for concurrent use.
type RuleSource struct {
	down atomic.Bool
	// Fallback is the conservative policy and Limiters its limiters per tier.
	Fallback *policy.Policy
	Limiters map[string]limiters.Limiter
	// RejectWhenDown answers 503 to everything while the rules are down: the
	// defect of faulty/no-rule-defaults.
	RejectWhenDown bool
}

// SetDown makes the source unreadable (true) or readable again.
func (r *RuleSource) SetDown(down bool) { r.down.Store(down) }

// Down reports whether the rules cannot be read now.
func (r *RuleSource) Down() bool { return r != nil && r.down.Load() }

// FallbackRules is the X-RateLimit-Fallback value of decisions made under
// the conservative defaults.
const FallbackRules = "rules"
