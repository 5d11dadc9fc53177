package rlverify_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/discover"
	"github.com/rlverify/rlverify/policy"
)

// TestNoBorrowedPolicy: against a service rlverify did not start (URLs, a
// handler, the external environment), no declared policy is a typed usage
// error naming the option, whatever the plan; a limiter rlverify starts
// keeps its default. Nothing is sent: Prepare decides.
func TestNoBorrowedPolicy(t *testing.T) {
	burst, err := attacks.Load("concurrent-burst")
	require.NoError(t, err)
	retry, err := attacks.Load("retry-after")
	require.NoError(t, err)
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})
	for _, c := range []struct {
		name string
		o    rlverify.AttackOptions
		plan string // the plan named as lender
		ok   bool
	}{
		{"target", rlverify.AttackOptions{Plan: burst, Targets: []string{"http://127.0.0.1:1/v1"}}, "", false},
		{"handler", rlverify.AttackOptions{Plan: burst, Handler: h}, "", false},
		{"plan with its own policy", rlverify.AttackOptions{Plan: retry, Targets: []string{"http://127.0.0.1:1"}}, "retry-after", false},
		{"declared", rlverify.AttackOptions{Plan: burst, Targets: []string{"http://127.0.0.1:1"}, Policy: policy.Default()}, "", true},
		{"reference limiter", rlverify.AttackOptions{Plan: burst}, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := rlverify.Prepare(c.o)
			if c.ok {
				require.NoError(t, err)
				return
			}
			var mp *rlverify.MissingPolicyError
			require.ErrorAs(t, err, &mp)
			var oe *rlverify.OptionError
			require.ErrorAs(t, err, &oe, "a usage error (exit 2)")
			assert.Equal(t, c.plan, mp.Plan)
			assert.Equal(t, "Policy", oe.Field, "names the missing option")
			assert.Contains(t, err.Error(), "no declared policy")
			assert.Contains(t, err.Error(), "rlverify discover")
			assert.Equal(t, err.Error(), rlverify.CheckDeclaredPolicy(c.o).Error(), "the early check is the same rule")
		})
	}
}

// TestAuditNeverBorrowsAPolicy: an audit of a URL without a policy and
// without discovery is the same typed error, before any plan runs.
func TestAuditNeverBorrowsAPolicy(t *testing.T) {
	_, err := rlverify.Audit(context.Background(), rlverify.AuditOptions{Attack: rlverify.AttackOptions{Targets: []string{"http://127.0.0.1:1"}}})
	var mp *rlverify.MissingPolicyError
	require.True(t, errors.As(err, &mp), "%v", err)
	_, err = rlverify.Audit(context.Background(), rlverify.AuditOptions{
		Attack:   rlverify.AttackOptions{Handler: http.NotFoundHandler()},
		Discover: &discover.Options{},
	})
	var oe *rlverify.OptionError
	require.ErrorAs(t, err, &oe, "discovery needs URLs")
}
