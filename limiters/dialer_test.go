package limiters

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRememberingDialer: a name that resolved once is still dialled while
// its name server is silent; a name that never resolved fails with the
// lookup's error; a new answer replaces the remembered one.
func TestRememberingDialer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)

	var silent atomic.Bool
	d := &RememberingDialer{Timeout: 200 * time.Millisecond, Lookup: func(ctx context.Context, host string) ([]netip.Addr, error) {
		if silent.Load() {
			<-ctx.Done() // a name server that never answers
			return nil, ctx.Err()
		}
		switch host {
		case "store":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return nil, errors.New("no such host " + host)
	}}
	ctx := context.Background()

	for _, tc := range []struct {
		name    string
		silent  bool
		addr    string
		wantErr string
	}{
		{"resolves", false, "store:" + port, ""},
		{"silent name server: the remembered address", true, "store:" + port, ""},
		{"never resolved", false, "other:" + port, "no such host other"},
		{"never resolved, silent", true, "other:" + port, "deadline exceeded"},
		{"an address is dialled as is", true, "127.0.0.1:" + port, ""},
		{"malformed", false, "store", "missing port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			silent.Store(tc.silent)
			c, err := d.DialContext(ctx, "tcp", tc.addr)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			c.Close()
		})
	}
}
