package prose

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var names = regexp.MustCompile(`\b(Out|Store|MaxRequests|Checks\.Off)\b`)

func lower(m []string) string { return "<" + strings.ToLower(m[0]) + ">" }

func TestReplaceLeavesTokensAlone(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"raise Out", "raise <out>"},
		{"Out", "<out>"},
		{"(Out)", "(<out>)"},
		{"in Store.", "in <store>."},
		{"Store: redis", "<store>: redis"},
		{"(Checks.Off)", "(<checks.off>)"},
		{"key Out-1", "key Out-1"},
		{"X-Store-Key", "X-Store-Key"},
		{"my.Store Store.x Out:1 'Out' \"Store\" {Out} Out_2 a/Out", "my.Store Store.x Out:1 'Out' \"Store\" {Out} Out_2 a/Out"},
		{"MaxRequests 5 for key MaxRequests-x", "<maxrequests> 5 for key MaxRequests-x"},
		{"Outer Stores", "Outer Stores"},
	} {
		require.Equal(t, tc.want, Replace(tc.in, names, lower), "%q", tc.in)
	}
	require.Equal(t, "keep Out", Replace("keep Out", names, func([]string) string { return "" }), "an empty replacement keeps the match")
}

func TestCompound(t *testing.T) {
	for name, want := range map[string]bool{"MaxRequests": true, "Checks.Off": true, "KeysFile": true, "Store": false, "Out": false, "B": false, "": false} {
		require.Equal(t, want, Compound(name), name)
	}
}

func TestYAMLCommentsOnly(t *testing.T) {
	in := "name: Out # raise Out\n# Store here\nkey_prefix: \"a#Out\" # Out\nplain: Out#Out\n"
	want := "name: Out # raise <out>\n# <store> here\nkey_prefix: \"a#Out\" # <out>\nplain: Out#Out\n"
	require.Equal(t, want, string(YAMLComments([]byte(in), func(s string) string { return Replace(s, names, lower) })))
}
