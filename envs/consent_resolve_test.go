package envs

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeResolver answers from a table, as /etc/hosts would.
type fakeResolver map[string][]string

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	l, ok := f[host]
	if !ok {
		return nil, errors.New("no such host")
	}
	var out []netip.Addr
	for _, s := range l {
		out = append(out, netip.MustParseAddr(s))
	}
	return out, nil
}

// Issue 26, item 4: localhost was trusted by name; with /etc/hosts
// mapping it elsewhere, --target and --sink dialled the other address. A
// name is resolved first and every address must be loopback.
func TestLoopbackRuleResolvesNames(t *testing.T) {
	t.Cleanup(func() { LoopbackResolver = nil })
	LoopbackResolver = fakeResolver{"localhost": {"192.0.2.7"}, "mixed": {"127.0.0.1", "10.0.0.1"}, "me": {"127.0.0.1", "::1"}, "mapped": {"::ffff:127.0.0.1"}}
	for _, tc := range []struct {
		host, want string
	}{
		{"127.0.0.1", ""},
		{"127.9.9.9", ""},
		{"::1", ""},
		{"[::1]", ""},
		{"me", ""},
		{"mapped", ""},
		{"localhost", "localhost resolves to 192.0.2.7"},
		{"localhost.", "localhost resolves to 192.0.2.7"},
		{"mixed", "mixed resolves to 10.0.0.1"},
		{"10.0.0.1", "is not a loopback address"},
		{"unknown.invalid", "cannot resolve unknown.invalid"},
	} {
		t.Run(tc.host, func(t *testing.T) {
			err := CheckLoopback("--target http://"+tc.host, tc.host, false)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, "AllowRemote")
			require.NoError(t, CheckLoopback("x", tc.host, true), "consent")
		})
	}
	require.ErrorContains(t, CheckLoopbackURL("http://localhost:8080", false), "http://localhost:8080 is not a loopback address: localhost resolves to 192.0.2.7")
	require.ErrorIs(t, CheckLoopbackAddr("localhost:6379", false), ErrNotLoopback)
}
