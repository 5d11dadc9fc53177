package policy

import (
	"strings"
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
		// raises: the change (named in yaml, first) raises its tier.
		raises bool
	}{
		{"a lowering change", `changes:
  - name: halve
    tier: free
    limits:
      - capacity: 5
        rate: 2/s
tolerance:
  propagation: 250ms
`, "", false},
		{"a raise", `changes:
  - name: double
    tier: free
    limits:
      - capacity: 20
        rate: 5/s
`, "", true},
		{"a faster refill", `changes:
  - name: quick
    tier: free
    limits:
      - capacity: 10
        rate: 6/s
`, "", true},
		{"a larger bucket refilled slower", `changes:
  - name: mixed
    tier: free
    limits:
      - capacity: 20
        rate: 2/s
`, "raising one part and lowering another", false},
		{"a window raised with another window", `name: p
tiers:
  - name: win
    key_prefix: "win-"
    limits:
      - algorithm: fixed-window
        limit: 10
        window: 1s
default_tier: win
changes:
  - name: wider
    tier: win
    limits:
      - algorithm: fixed-window
        limit: 30
        window: 2s
`, "a raise of a window limit keeps its window", false},
		{"one limit raised, another lowered", `name: p
tiers:
  - name: two
    key_prefix: "two-"
    limits:
      - capacity: 10
        rate: 5/s
      - name: hourly
        capacity: 100
        rate: 1/s
default_tier: two
changes:
  - name: swap
    tier: two
    limits:
      - capacity: 20
        rate: 5/s
      - name: hourly
        capacity: 50
        rate: 1/s
`, "raises one of tier \"two\"'s limits and lowers another", false},
		{"an unknown tier", `changes:
  - name: x
    tier: gold
    limits:
      - capacity: 5
        rate: 1/s
`, `names tier "gold", which the policy does not declare`, false},
		{"a limit missing", `changes:
  - name: x
    tier: free
    limits: []
`, `gives 0 limit(s) for tier "free"'s 1`, false},
		{"another algorithm", `changes:
  - name: x
    tier: free
    limits:
      - algorithm: fixed-window
        limit: 5
        window: 1s
`, "a change keeps the algorithm", false},
		{"declared twice", `changes:
  - name: x
    tier: free
    limits: [{capacity: 5, rate: 1/s}]
  - name: x
    tier: free
    limits: [{capacity: 4, rate: 1/s}]
`, `change "x" is declared twice`, false},
		{"an unsafe name", `changes:
  - name: "a b"
    tier: free
    limits: [{capacity: 5, rate: 1/s}]
`, "changes.0.name", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc := changesBase + c.yaml
			if strings.HasPrefix(c.yaml, "name:") {
				doc = c.yaml // a whole policy
			}
			p, err := Parse("p.yaml", []byte(doc))
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.raises, p.ChangeRaises(&p.Changes[0]))
			if c.raises {
				return
			}
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
