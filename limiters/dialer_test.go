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

	"github.com/redis/go-redis/v9"
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

// TestWarmPool: the pool holds the warmed connections without go-redis
// keeping a minimum of idle ones, and warming a store that is not there
// returns once its context ends.
func TestWarmPool(t *testing.T) {
	o := RedisOptions(singleAddr(t), 2*time.Second)
	o.MinIdleConns = 0
	c := redis.NewClient(o)
	defer c.Close()
	WarmPool(context.Background(), c, 8)
	require.EqualValues(t, 8, c.PoolStats().TotalConns)

	do := RedisOptions("127.0.0.1:1", 50*time.Millisecond)
	do.MinIdleConns = 0
	dead := redis.NewClient(do)
	defer dead.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	WarmPool(ctx, dead, 4)
	require.Zero(t, dead.PoolStats().TotalConns)
}
