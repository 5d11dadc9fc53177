package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/internal/testsvc"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/reports"
)

// TestNoBorrowedPolicyAgainstATarget: the commonest first command against
// someone else's service — a plan without its own policy, no --policy — is
// a usage error naming --policy FILE and rlverify discover, never a
// verdict against rlverify's reference policy.
func TestNoBorrowedPolicyAgainstATarget(t *testing.T) {
	url, stop := testsvc.Serve(mustWindowed(t))
	defer stop()
	for _, plan := range []string{"concurrent-burst", "precision", "idle-refill"} {
		out, stderr, code := rl(t, "attack", "--plan", plan, "--target", url+"/search/x", "--identity", "query:api_key", "--out", t.TempDir(), "--quiet")
		assert.Equal(t, ExitUsage, code, stderr)
		assert.Contains(t, stderr, "no declared policy")
		assert.Contains(t, stderr, "--policy FILE")
		assert.Contains(t, stderr, "rlverify discover")
		assert.NotContains(t, out, "FAIL")
	}
}

// TestDiscoverWritesThePolicyItFound: discover against the windowed test
// service (a fixed window of 10 per 2s anchored at a key's first request)
// writes a policy the loader reads, with the family, N, W and anchoring
// its honest policy declares; it refuses to overwrite the file.
func TestDiscoverWritesThePolicyItFound(t *testing.T) {
	url, stop := testsvc.Serve(mustWindowed(t))
	defer stop()
	file := filepath.Join(t.TempDir(), "policy.yaml")
	_, stderr, code := rl(t, "discover", "--target", url+"/search/x", "--identity", "query:api_key", "--budget", "40s", "-o", file)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "for at most 40s", "it says how long it will take before it starts")
	p, err := policy.Load(file)
	require.NoError(t, err)
	require.Len(t, p.Tiers, 1)
	l := p.Tiers[0].Limits[0]
	assert.Equal(t, policy.FixedWindow, l.Algorithm)
	assert.Equal(t, int64(10), l.Count)
	assert.InDelta(t, 2.0, l.W().Seconds(), 0.1)
	assert.Equal(t, policy.AnchorFirst, l.Anchor)
	assert.Equal(t, policy.InQuery, p.Identity.In)
	text, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Contains(t, string(text), "# N = 10", "every number carries its evidence")

	_, stderr, code = rl(t, "discover", "--target", url+"/search/x", "--identity", "query:api_key", "-o", file)
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, stderr, "pass --force")
}

// TestAuditWithoutPolicyDiscoversFirst: audit --target without --policy
// discovers the policy, says so in its report, and shows the properties
// that need the promise as measured, not judged.
func TestAuditWithoutPolicyDiscoversFirst(t *testing.T) {
	url, stop := testsvc.Serve(mustWindowed(t))
	defer stop()
	out := t.TempDir()
	stdout, stderr, code := rl(t, "audit", "--target", url+"/search/x", "--identity", "query:api_key", "--plans", "concurrent-burst",
		"--discover-budget", "30s", "--out", out, "--quiet", "--format", "text")
	require.NotEqual(t, ExitUsage, code, stderr)
	assert.Contains(t, stdout, reports.DiscoveredNote)
	b, err := os.ReadFile(filepath.Join(out, "latest", "audit.json"))
	require.NoError(t, err)
	var a reports.Audit
	require.NoError(t, json.Unmarshal(b, &a))
	require.NotEmpty(t, a.Discovered)
	assert.Equal(t, reports.DiscoveredNote, a.Discovered[0])
	for _, p := range a.Properties {
		if p.Name == "oversell" {
			assert.Contains(t, p.Summary, reports.NotJudged)
		}
	}
	_, err = policy.Load(filepath.Join(out, "latest", "discovered-policy.yaml"))
	require.NoError(t, err, "the discovered policy is kept beside the plans")
}

// TestAuditPutsDeclaredBesideDiscovered: with --policy and --discover the
// audit shows each declared number beside the discovered one; the honest
// policy passes, a policy declaring 12 per window where the service allows
// 10 fails declared-vs-discovered with the evidence.
func TestAuditPutsDeclaredBesideDiscovered(t *testing.T) {
	url, stop := testsvc.Serve(mustWindowed(t))
	defer stop()
	honest, err := testsvc.PolicyYAML("windowed")
	require.NoError(t, err)
	lying := strings.Replace(string(honest), "limit: 10", "limit: 12", 1)
	require.NotEqual(t, string(honest), lying)
	for _, c := range []struct {
		name, policy, want string
	}{{"honest", string(honest), "pass"}, {"lying", lying, "fail"}} {
		t.Run(c.name, func(t *testing.T) {
			out := t.TempDir()
			_, stderr, _ := rl(t, "audit", "--target", url+"/search/x", "--policy", writeFile(t, "p.yaml", c.policy), "--discover",
				"--discover-budget", "30s", "--plans", "concurrent-burst", "--out", out, "--quiet", "--format", "text")
			b, err := os.ReadFile(filepath.Join(out, "latest", "audit.json"))
			require.NoError(t, err, stderr)
			var a reports.Audit
			require.NoError(t, json.Unmarshal(b, &a))
			var got *reports.Property
			for i := range a.Properties {
				if a.Properties[i].Name == rlverify.DiscoveredProperty {
					got = &a.Properties[i]
				}
			}
			require.NotNil(t, got, "the audit has a %s property", rlverify.DiscoveredProperty)
			assert.Equal(t, c.want, string(got.Verdict), "%s %v", got.Summary, got.Evidence)
			if c.want == "fail" {
				require.NotEmpty(t, got.Evidence)
				assert.Contains(t, got.Evidence[0].Message, "K/N: declared 12")
			}
		})
	}
}

// TestCompareNeverBorrowsAPolicyForATarget: a compare column that is your
// own service needs the declared policy too.
func TestCompareNeverBorrowsAPolicyForATarget(t *testing.T) {
	url, stop := testsvc.Serve(mustWindowed(t))
	defer stop()
	_, stderr, code := rl(t, "compare", "--plan", "concurrent-burst", "--limiter", "token-bucket", "--target", "mine="+url+"/search/x", "--out", t.TempDir())
	assert.Equal(t, ExitUsage, code, stderr)
	assert.Contains(t, stderr, "--policy FILE")
}
