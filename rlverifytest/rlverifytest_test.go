package rlverifytest_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/rlverifytest"
	"github.com/rlverify/rlverify/service"
)

// reference is the reference service with limiter from the catalog, in
// memory, as an http.Handler of its own.
func reference(t *testing.T, limiter string) (http.Handler, *policy.Policy) {
	t.Helper()
	entry, err := catalog.Lookup(limiter, catalog.Memory)
	require.NoError(t, err)
	pol := policy.Default().WithAlgorithm(entry.Algorithm)
	lims, err := service.BuildLimiters(pol, entry, catalog.Env{}, nil)
	require.NoError(t, err)
	return &service.Service{Policy: pol, Limiters: lims}, pol
}

// recorder is a testing.TB that records the failure instead of failing
// the test; Fatalf ends the goroutine as testing.T's does.
type recorder struct {
	testing.TB
	failure string
}

func (r *recorder) Helper()      {}
func (r *recorder) Name() string { return r.TB.Name() }
func (r *recorder) Fatalf(format string, args ...any) {
	r.failure = fmt.Sprintf(format, args...)
	panic(r)
}

// verify runs rlverifytest.Verify on a recorder and returns its failure.
func verify(t *testing.T, h http.Handler, pol *policy.Policy, plan string) (failure string) {
	r := &recorder{TB: t}
	defer func() {
		if v := recover(); v != nil && v != r {
			panic(v)
		}
		failure = r.failure
	}()
	rlverifytest.Verify(r, rlverifytest.Handler(h, pol), plan)
	return ""
}

func TestVerifyPassesACorrectLimiter(t *testing.T) {
	h, pol := reference(t, "token-bucket")
	out := rlverifytest.Verify(t, rlverifytest.Handler(h, pol), "concurrent-burst")
	assert.Equal(t, checks.Pass, out.Document.Verdict)
	assert.Len(t, out.History.Events, 100)
}

func TestVerifyFailsWithTheEvidence(t *testing.T) {
	for _, tc := range []struct{ limiter, plan, check string }{
		{"faulty/racy-token-bucket", "concurrent-burst", "oversell: FAIL"},
		{"faulty/no-retry-after", "concurrent-burst", "retry-after: FAIL"},
	} {
		t.Run(tc.limiter, func(t *testing.T) {
			h, pol := reference(t, tc.limiter)
			failure := verify(t, h, pol, tc.plan)
			t.Log(failure)
			require.Contains(t, failure, tc.check)
			require.Contains(t, failure, "\n    ", "the failing check's evidence lines follow it")
		})
	}
}

func TestProblems(t *testing.T) {
	for _, tc := range []struct {
		name string
		rs   []checks.Result
		want string
	}{
		{"all pass", []checks.Result{{Name: "oversell", Verdict: checks.Pass}, {Name: "bypass", Verdict: checks.Skip}}, ""},
		{"explained alone", []checks.Result{{Name: "downstream", Verdict: checks.Explained}}, ""},
		{"fail with evidence", []checks.Result{
			{Name: "oversell", Verdict: checks.Fail, Summary: "12 > 10", Evidence: []checks.Evidence{{Message: "key free-a admitted 12 in 5ms"}}},
			{Name: "downstream", Verdict: checks.Explained, Summary: "explained by oversell"},
		}, "oversell: FAIL: 12 > 10\n    key free-a admitted 12 in 5ms\ndownstream: EXPLAINED: explained by oversell\n"},
		{"unknown", []checks.Result{{Name: "evidence", Verdict: checks.Unknown, Summary: "no requests"}}, "evidence: UNKNOWN: no requests\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, rlverifytest.Problems(tc.rs))
		})
	}
}
