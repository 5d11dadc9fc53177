package policy

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// Names are data: a policy whose names or key prefixes could break out of
// a generated configuration (nginx's master runs as root) is refused at
// load time, naming the file, the line and the field.
func TestHostileNamesAreRefusedAtLoad(t *testing.T) {
	tier := func(name, prefix string) string {
		return fmt.Sprintf("  - name: %s\n    key_prefix: %s\n    limits:\n      - capacity: 10\n        rate: 5/s\n", name, prefix)
	}
	for _, tc := range []struct {
		name, yaml string
		want       string
	}{
		{"policy name with a directive", "name: \"default\\nerror_log /tmp/x.log;\\n#\"\ntiers:\n" + tier("free", "free-"),
			`p.yaml:1: name: policy name "default\nerror_log /tmp/x.log;\n#" is not a safe name`},
		{"tier name with a quote", "name: p\ntiers:\n" + tier(`'fr"ee'`, "free-"), `p.yaml:3: tiers.0.name: tier name "fr\"ee" is not a safe name`},
		{"tier name with braces", "name: p\ntiers:\n" + tier(`"a}b{"`, "free-"), `p.yaml:3: tiers.0.name: tier name "a}b{" is not a safe name`},
		{"tier name with a space", "name: p\ntiers:\n" + tier(`"free tier"`, "free-"), `tiers.0.name`},
		{"default_tier with a newline", "name: p\ndefault_tier: \"free\\n\"\ntiers:\n" + tier("free", "free-"), `p.yaml:2: default_tier: default tier "free\n" is not one of the tiers`},
		{"key prefix with a quote", "name: p\ntiers:\n" + tier("free", `'fr"ee-'`), `p.yaml:4: tiers.0.key_prefix: "fr\"ee-" is not a safe key prefix`},
		{"key prefix with a dollar", "name: p\ntiers:\n" + tier("free", `"$host"`), `tiers.0.key_prefix`},
		{"limit name with a semicolon", "name: p\ntiers:\n  - name: free\n    limits:\n      - name: \"a; b\"\n        capacity: 10\n        rate: 5/s\n", `p.yaml:5: tiers.0.limits.0.name: "a; b" is not a safe limit name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(tc.yaml))
			require.ErrorContains(t, err, tc.want)
		})
	}
	// A policy built in code meets the same rule in Validate.
	p := Default()
	p.Tiers[0].Name = "free\n}"
	require.ErrorContains(t, p.Validate(), `tier name "free\n}" is not a safe name`)
	// Names of the shipped form pass: default limit names read "10@5/s".
	_, err := Parse("p.yaml", []byte("name: my-policy.v2\ntiers:\n"+tier("free_1", "sk_live.free-")))
	require.NoError(t, err)
}

func FuzzCheckName(f *testing.F) {
	for _, s := range []string{"free", "paid-2", "a.b_c", "default\nerror_log /x;", `fr"ee`, "a}b", "", "-x", "ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if CheckName(s) != nil {
			return
		}
		// An accepted name holds nothing any generated syntax gives a
		// meaning to: no white space, quotes, braces, ;, #, $ or \.
		for _, c := range []byte(s) {
			ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
			if !ok {
				t.Fatalf("%q accepted with byte %q", s, c)
			}
		}
		if len(s) == 0 || len(s) > 64 || s[0] == '-' || s[0] == '.' || s[0] == '_' {
			t.Fatalf("%q accepted", s)
		}
	})
}
