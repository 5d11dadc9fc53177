package policy

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The tenant and the limiter may read different occurrences of a repeated
// identity; the declaration says which, and a mismatch is visible.
func TestTenantAndLimiterOccurrences(t *testing.T) {
	base := "name: p\ntiers:\n  - name: a\n    limits: [{capacity: 1, rate: 1}]\nidentity:\n"
	for _, tc := range []struct {
		name, yaml        string
		limiter, tenant   string
		mismatched        bool
		tenantKey, limKey string
	}{
		{"default: both first", "", RepeatedFirst, RepeatedFirst, false, "a", "a"},
		{"repeated last: both last", "  repeated: last\n", RepeatedLast, RepeatedLast, false, "b", "b"},
		{"new spelling", "  limiter_occurrence: last\n", RepeatedLast, RepeatedLast, false, "b", "b"},
		{"app first, limiter last", "  tenant_occurrence: first\n  limiter_occurrence: last\n", RepeatedLast, RepeatedFirst, true, "a", "b"},
		{"app last, limiter first", "  tenant_occurrence: last\n", RepeatedFirst, RepeatedLast, true, "b", "a"},
		{"limiter refuses: no mismatch", "  tenant_occurrence: last\n  repeated: rejected\n", RepeatedRejected, RepeatedLast, false, "b", "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse("p.yaml", []byte(base+tc.yaml+"  name: X-Key\n"))
			require.NoError(t, err)
			id := &p.Identity
			require.Equal(t, tc.limiter, id.Repeated)
			require.Empty(t, id.LimiterOccurrence, "one home after Validate: Repeated")
			require.Equal(t, tc.tenant, id.Tenant())
			require.Equal(t, tc.mismatched, id.Mismatched())
			require.Equal(t, tc.tenantKey, id.TenantKey([]string{" a", "b "}))
			k, _, _ := id.Key([]string{" a", "b "})
			require.Equal(t, tc.limKey, k)
			require.NoError(t, p.Validate(), "a validated policy validates again")
		})
	}
	for _, tc := range []struct{ yaml, want string }{
		{"  repeated: first\n  limiter_occurrence: last\n", `p.yaml:6: identity.repeated: "first" disagrees with identity.limiter_occurrence "last"`},
		{"  limiter_occurrence: middle\n", `identity.limiter_occurrence: "middle": want first, last or rejected`},
		{"  repeated: middle\n", `identity.repeated: "middle": want first, last or rejected`},
		{"  tenant_occurrence: rejected\n", `p.yaml:6: identity.tenant_occurrence: "rejected": want first or last`},
	} {
		_, err := Parse("p.yaml", []byte(base+tc.yaml))
		require.ErrorContains(t, err, tc.want)
	}
}

// Identity.Key is the one reading of a key: the reference service and the
// importers both go through it.
func TestIdentityKey(t *testing.T) {
	no := false
	for _, tc := range []struct {
		name              string
		id                Identity
		vals              []string
		key               string
		repeated, tooLong bool
	}{
		{"first counts", Identity{}, []string{"a", "b"}, "a", false, false},
		{"last counts", Identity{Repeated: RepeatedLast}, []string{"a", "b"}, "b", false, false},
		{"repeat refused", Identity{Repeated: RepeatedRejected}, []string{"a", "b"}, "a", true, false},
		{"one value is no repeat", Identity{Repeated: RepeatedRejected}, []string{"a"}, "a", false, false},
		{"header trims", Identity{In: InHeader}, []string{" k "}, "k", false, false},
		{"query keeps spaces", Identity{In: InQuery}, []string{" k "}, " k ", false, false},
		{"case folded", Identity{CaseSensitive: &no}, []string{"KeY"}, "key", false, false},
		{"too long refused, whole", Identity{MaxLength: 3}, []string{"abcd"}, "abcd", false, true},
		{"too long cut", Identity{MaxLength: 3, TooLong: TooLongCut}, []string{"abcd"}, "abc", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, rep, long := tc.id.Key(tc.vals)
			require.Equal(t, tc.key, k)
			require.Equal(t, tc.repeated, rep)
			require.Equal(t, tc.tooLong, long)
		})
	}
	tok, ok := BearerToken(" bearer abc")
	require.True(t, ok)
	require.Equal(t, "abc", tok)
	_, ok = BearerToken("Basic abc")
	require.False(t, ok)
}
