package policy

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDelay(t *testing.T) {
	const tiers = `
tiers:
  - name: free
    key_prefix: "free-"
    limits: [{capacity: 5, rate: 5/s}]
  - name: paid
    key_prefix: "paid-"
    limits: [{capacity: 50, rate: 50/s}]
`
	for _, tc := range []struct {
		name, yaml, err string
		free, paid      time.Duration // declared max_wait; 0: none
	}{
		{name: "none", yaml: tiers},
		{name: "global", yaml: tiers + "delay: {max_wait: 500ms, queue: 20}\n", free: 500 * time.Millisecond, paid: 500 * time.Millisecond},
		{name: "per tier", yaml: `
tiers:
  - name: free
    key_prefix: "free-"
    limits: [{capacity: 5, rate: 5/s}]
  - name: paid
    key_prefix: "paid-"
    limits: [{capacity: 50, rate: 50/s}]
    delay: {max_wait: 2s}
delay: {max_wait: 500ms}
`, free: 500 * time.Millisecond, paid: 2 * time.Second},
		{name: "no max_wait", yaml: tiers + "delay: {queue: 20}\n", err: "delay.max_wait"},
		{name: "negative queue", yaml: tiers + "delay: {max_wait: 1s, queue: -1}\n", err: "delay.queue"},
		{name: "too long", yaml: tiers + "delay: {max_wait: 2m}\n", err: "delay.max_wait"},
		{name: "window", yaml: `
tiers:
  - name: free
    limits: [{algorithm: fixed-window, limit: 5, window: 1s}]
delay: {max_wait: 1s}
`, err: "token-bucket and gcra limits only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse("test.yaml", []byte(tc.yaml))
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			for name, want := range map[string]time.Duration{"free": tc.free, "paid": tc.paid} {
				tier, ok := p.Tier(name)
				require.True(t, ok)
				d := p.DelayFor(tier)
				if want == 0 {
					assert.Nil(t, d, name)
					continue
				}
				require.NotNil(t, d, name)
				assert.Equal(t, want, d.MaxWait.D(), name)
			}
			assert.Equal(t, tc.free != 0, p.Delays())
			c := p.Clone()
			if p.Delay != nil {
				c.Delay.MaxWait = 1
				assert.NotEqual(t, c.Delay.MaxWait, p.Delay.MaxWait, "Clone copies the delay")
			}
		})
	}
}
