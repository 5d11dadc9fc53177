package policy

import (
	"testing"

	"github.com/stretchr/testify/require"
)

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
