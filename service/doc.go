// Package service is the reference HTTP rate-limiter service that
// `rlverify serve` runs and the environments start: the limiting handler
// with its response headers, the downstream sink that counts what got
// through, the control endpoint for clock-skew and rules-down faults, the
// Prometheus metrics, the rule source and the instance clock.
//
// service imports limiters, policy, headers and history; never envs,
// attacks, checks, reports or the rlverify library.
package service
