package policy

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const changesBase = `name: p
tiers:
  - name: free
    key_prefix: "free-"
    limits:
      - capacity: 10
        rate: 5/s
default_tier: free
`

func TestChangesAreValidated(t *testing.T) {
	for _, c := range []struct {
		name, yaml, err string
	}{
		{"a lowering change", `changes:
  - name: halve
    tier: free
    limits:
      - capacity: 5
        rate: 2/s
tolerance:
  propagation: 250ms
`, ""},
		{"a raise", `changes:
  - name: double
    tier: free
    limits:
      - capacity: 20
        rate: 5/s
`, `changes.0.limits.0: change "double" raises tier "free"'s limit`},
		{"a faster refill", `changes:
  - name: quick
    tier: free
    limits:
      - capacity: 10
        rate: 6/s
`, "only a change that lowers a limit"},
		{"an unknown tier", `changes:
  - name: x
    tier: gold
    limits:
      - capacity: 5
        rate: 1/s
`, `names tier "gold", which the policy does not declare`},
		{"a limit missing", `changes:
  - name: x
    tier: free
    limits: []
`, `gives 0 limit(s) for tier "free"'s 1`},
		{"another algorithm", `changes:
  - name: x
    tier: free
    limits:
      - algorithm: fixed-window
        limit: 5
        window: 1s
`, "a change keeps the algorithm"},
		{"declared twice", `changes:
  - name: x
    tier: free
    limits: [{capacity: 5, rate: 1/s}]
  - name: x
    tier: free
    limits: [{capacity: 4, rate: 1/s}]
`, `change "x" is declared twice`},
		{"an unsafe name", `changes:
  - name: "a b"
    tier: free
    limits: [{capacity: 5, rate: 1/s}]
`, "changes.0.name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := Parse("p.yaml", []byte(changesBase+c.yaml))
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			ch, ok := p.ChangeNamed("halve")
			require.True(t, ok)
			assert.Equal(t, 250*time.Millisecond, p.Propagation())
			q := p.WithChange(ch)
			assert.Equal(t, int64(5), q.Tiers[0].Limits[0].Capacity)
			assert.Equal(t, int64(10), p.Tiers[0].Limits[0].Capacity, "the declared policy is not modified")
			assert.Empty(t, q.Changes)
		})
	}
}

func TestPropagationDefault(t *testing.T) {
	assert.Equal(t, DefaultPropagation, Default().Propagation())
}
