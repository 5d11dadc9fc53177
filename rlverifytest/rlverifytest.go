// Package rlverifytest verifies rate limiters from go test: mount an
// http.Handler (served on 127.0.0.1 for the test) or point at URLs, give
// the declared policy, run a plan or the audit, and the test fails with
// the evidence of every check that failed or could not decide.
//
// It is a thin layer over the rlverify library: every helper takes a
// testing.TB and cleans up after itself. It imports no Docker code.
package rlverifytest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/reports"
)

// Target is a limiter under test and what it promises.
type Target struct {
	// Handler is served on 127.0.0.1 for the run; URLs are used when it
	// is nil.
	Handler http.Handler
	URLs    []string
	// Policy is the declared policy.
	Policy *policy.Policy
}

// Handler is h, which promises pol.
func Handler(h http.Handler, pol *policy.Policy) Target { return Target{Handler: h, Policy: pol} }

// URL is the running instances at urls (base URLs on loopback), which
// promise pol.
func URL(pol *policy.Policy, urls ...string) Target { return Target{URLs: urls, Policy: pol} }

// Option adjusts the attack's options before it runs (bounds, request
// shape, seed …).
type Option func(*rlverify.AttackOptions)

// Policy parses a policy given as YAML text, failing t on an error.
func Policy(t testing.TB, yamlText string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse(t.Name()+".yaml", []byte(yamlText))
	if err != nil {
		t.Fatalf("rlverifytest: policy: %v", err)
	}
	return p
}

// Options are target's attack options for plan (loaded by name or file).
// The run is judged in memory (InMemory), so the Outcome's History holds
// its events for the test to read: a test's runs are small, and both
// paths give the same verdicts.
func (target Target) Options(t testing.TB, plan string, opts ...Option) rlverify.AttackOptions {
	t.Helper()
	p, err := attacks.Load(plan)
	if err != nil {
		t.Fatalf("rlverifytest: plan %s: %v", plan, err)
	}
	o := rlverify.AttackOptions{Plan: p, Policy: target.Policy, Handler: target.Handler, Targets: target.URLs, Seed: 1, InMemory: true}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// Run runs plan against target and returns the judged run; the test fails
// when the run cannot be done. It judges nothing itself: see Verify.
func Run(t testing.TB, target Target, plan string, opts ...Option) *rlverify.Outcome {
	t.Helper()
	return Attack(t, target.Options(t, plan, opts...))
}

// Attack runs o and returns the judged run; the test fails when the run
// cannot be done.
func Attack(t testing.TB, o rlverify.AttackOptions) *rlverify.Outcome {
	t.Helper()
	out, err := rlverify.Attack(context.Background(), o)
	if err != nil {
		t.Fatalf("rlverifytest: attack: %v", err)
	}
	return out
}

// Verify runs plan against target and fails the test, with the evidence,
// unless every check passed or had nothing to judge.
func Verify(t testing.TB, target Target, plan string, opts ...Option) *rlverify.Outcome {
	t.Helper()
	out := Run(t, target, plan, opts...)
	if msg := Problems(out.Results); msg != "" {
		t.Fatalf("rlverifytest: plan %s:\n%s", plan, msg)
	}
	if v := out.Document.Verdict; v == checks.Interrupted || v == checks.Incomplete {
		t.Fatalf("rlverifytest: plan %s: %s: %s", plan, strings.ToUpper(string(v)), out.Document.Reason)
	}
	return out
}

// Audit runs every built-in plan that applies to target's policy and fails
// the test, with the evidence, unless every property passed or was not
// measured.
func Audit(t testing.TB, target Target, opts ...Option) *reports.Audit {
	t.Helper()
	base := rlverify.AttackOptions{Policy: target.Policy, Handler: target.Handler, Targets: target.URLs, Seed: 1}
	for _, opt := range opts {
		opt(&base)
	}
	a, err := rlverify.Audit(context.Background(), rlverify.AuditOptions{Attack: base})
	if err != nil {
		t.Fatalf("rlverifytest: audit: %v", err)
	}
	if msg := Problems(a.Results()); msg != "" {
		t.Fatalf("rlverifytest: audit of %s:\n%s", a.Target, msg)
	}
	if a.Verdict == checks.Interrupted || a.Verdict == checks.Incomplete {
		t.Fatalf("rlverifytest: audit of %s: %s (see its plans)", a.Target, strings.ToUpper(string(a.Verdict)))
	}
	return a
}

// Problems describes every result that failed or could not decide, with
// its evidence lines, or "" when there is none. Checks whose violations
// another check's defect explains are listed under a failure.
func Problems(rs []checks.Result) string {
	var b strings.Builder
	bad := false
	for _, r := range rs {
		switch r.Verdict {
		case checks.Fail, checks.Unknown:
			bad = true
		case checks.Explained:
		default:
			continue
		}
		fmt.Fprintf(&b, "%s: %s: %s\n", r.Name, strings.ToUpper(string(r.Verdict)), r.Summary)
		for _, e := range r.Evidence {
			fmt.Fprintf(&b, "    %s\n", e.Message)
		}
	}
	if !bad {
		return ""
	}
	return b.String()
}
