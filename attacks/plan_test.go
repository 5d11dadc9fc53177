package attacks

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBuiltinsParse(t *testing.T) {
	ps := Builtins()
	require.NotEmpty(t, ps)
	names := map[string]bool{}
	for _, p := range ps {
		names[p.Name] = true
		require.NotEmpty(t, p.Description, p.Name)
		require.NotEmpty(t, p.Proves, p.Name)
		b, ok := BuiltinYAML(p.Name)
		require.True(t, ok, "file name matches plan name %s", p.Name)
		require.NotEmpty(t, b)
	}
	for _, want := range []string{"concurrent-burst", "idle-refill", "boundary-burst"} {
		require.True(t, names[want], want)
	}
}

func TestPlanErrorsNameFileLineField(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"wrong type", "name: x\nphases:\n  - kind: burst\n    key: a\n    requests: lots\n", "p.yaml:5: cannot unmarshal a string `lots` into int"},
		{"unknown field", "name: x\nphases:\n  - kind: burst\n    key: a\n    requests: 3\n    colour: red\n", "p.yaml:6: field colour not found"},
		{"unknown kind", "name: x\nphases:\n  - kind: explode\n", "p.yaml:3: phases.0.kind: unknown phase kind \"explode\""},
		{"field of another kind", "name: x\nphases:\n  - kind: burst\n    key: a\n    requests: 3\n    rate: 5/s\n", "p.yaml:6: phases.0.rate: field \"rate\" does not apply to a burst phase"},
		{"missing key", "name: x\nphases:\n  - kind: idle\n    duration: 1s\n  - kind: burst\n    requests: 3\n", "p.yaml:5: phases.1.key: a burst phase needs a key"},
		{"negative requests", "name: x\nphases:\n  - kind: burst\n    key: a\n    requests: -3\n", "p.yaml:5: phases.0.requests"},
		{"huge burst", "name: x\nphases:\n  - kind: burst\n    key: a\n    requests: 1000000000\n", "phases.0.requests"},
		{"bad rate", "name: x\nphases:\n  - kind: rate\n    key: a\n    rate: fast\n    duration: 1s\n", "p.yaml:5: rate \"fast\""},
		{"absurd rate", "name: x\nphases:\n  - kind: rate\n    key: a\n    rate: 1000000000/s\n    duration: 1s\n", "phases.0.rate"},
		{"bad duration", "name: x\nphases:\n  - kind: idle\n    duration: forever\n", "p.yaml:4: duration \"forever\""},
		{"idle needs one", "name: x\nphases:\n  - kind: idle\n", "p.yaml:3: phases.0: an idle phase needs"},
		{"no phases", "name: x\n", "p.yaml:1: phases: a plan needs at least one phase"},
		{"no name", "phases:\n  - kind: idle\n    duration: 1s\n", "p.yaml:1: name"},
		{"empty", "", "p.yaml: document is empty"},
		{"not yaml", "name: [x\n", "p.yaml:1"},
		{"two docs", "name: x\nphases:\n  - kind: idle\n    duration: 1s\n---\nname: y\n", "more than one YAML document"},
		{"fault action", "name: x\nphases:\n  - kind: fault\n    action: explode\n    fault: store-down\n", "p.yaml:4: phases.0.action"},
		{"tenant weight", "name: x\nphases:\n  - kind: tenants\n    rate: 5/s\n    duration: 1s\n    tenants:\n      - key: a\n        weight: -1\n", "p.yaml:7: phases.0.tenants.0"},
		{"alias bomb", "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\ng: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]\nh: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]\ni: [*h, *h, *h, *h, *h, *h, *h, *h, *h]\n", "p.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(tc.yaml))
			require.Error(t, err)
			require.True(t, strings.Contains(err.Error(), tc.want), "got %q, want it to contain %q", err.Error(), tc.want)
		})
	}
}

func TestPlanDefaults(t *testing.T) {
	p, err := Parse("p.yaml", []byte("name: x\nphases:\n  - kind: burst\n    key: free-a\n    requests: 3\n  - kind: probe\n    key: free-a\n"))
	require.NoError(t, err)
	require.Equal(t, "1-burst", p.Phases[0].Name)
	require.Equal(t, "retry-after", p.Phases[1].At)
}
