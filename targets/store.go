package targets

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/rlverify/rlverify/internal/redisproc"
	"github.com/rlverify/rlverify/limiters"
	"github.com/rlverify/rlverify/limiters/catalog"
)

// storeHandle is the state store a stack's instances share.
type storeHandle struct {
	client redis.UniversalClient
	addr   string
	// proxy sits between the instances and Redis to inject store faults.
	proxy *FaultProxy
}

// startStore brings up the store the limiter entry needs: nothing for the
// memory store; for redis the given URL, else a redis-server child process
// when one is on PATH, else an in-process Redis emulation (noted in the
// report: it is not real Redis).
func (e Embedded) startStore(ctx context.Context, spec Spec, entry catalog.Entry, st *Stack) (storeHandle, error) {
	if entry.Store != catalog.Redis {
		st.StoreDesc = "memory (shared by the in-process instances)"
		return storeHandle{}, nil
	}
	timeout := spec.Policy.Failure.StoreTimeout.D()
	if timeout <= 0 {
		timeout = 50 * time.Millisecond
	}
	var addr string
	switch {
	case spec.RedisURL != "":
		opt, err := redis.ParseURL(spec.RedisURL)
		if err != nil {
			return storeHandle{}, fmt.Errorf("embedded: --redis %q: %w", spec.RedisURL, err)
		}
		addr = opt.Addr
		st.StoreDesc = "redis " + addr + " (given)"
	case redisproc.Available() == nil:
		srv, err := redisproc.Start()
		if err != nil {
			return storeHandle{}, fmt.Errorf("embedded: start redis-server: %w", err)
		}
		st.OnClose(func() error { srv.Stop(); return nil })
		addr = srv.Addr
		st.StoreDesc = "redis-server " + addr + " (child process)"
	default:
		mr := miniredis.NewMiniRedis()
		if err := mr.StartAddr("127.0.0.1:0"); err != nil {
			return storeHandle{}, fmt.Errorf("embedded: start in-process redis: %w", err)
		}
		st.OnClose(func() error { mr.Close(); return nil })
		addr = mr.Addr()
		st.StoreDesc = "in-process Redis emulation " + addr
		st.Notes = append(st.Notes, "redis-server is not on PATH: the store is miniredis, an in-process emulation, not real Redis")
	}
	proxy, err := NewFaultProxy(addr)
	if err != nil {
		return storeHandle{}, fmt.Errorf("embedded: %w", err)
	}
	st.OnClose(proxy.Close)
	client := limiters.NewRedisClient(proxy.Addr(), timeout)
	st.OnClose(client.Close)
	if err := client.Ping(ctx).Err(); err != nil {
		return storeHandle{}, fmt.Errorf("embedded: redis at %s does not answer PING: %w", addr, err)
	}
	return storeHandle{client: client, addr: addr, proxy: proxy}, nil
}
