package envs

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/rlverify/rlverify/envs/redisproc"
	"github.com/rlverify/rlverify/internal/faultproxy"
	"github.com/rlverify/rlverify/limiters"
	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policy"
)

// storeHandle is the state store a stack's instances share.
type storeHandle struct {
	client redis.UniversalClient
	addr   string
	// proxy sits between the instances and Redis to inject store faults.
	proxy *faultproxy.Proxy
}

// startStore brings up the store the limiter entry needs: nothing for the
// memory store; for redis the given URL, else a redis-server child process
// when one is on PATH, else an in-process Redis emulation (noted in the
// report: it is not real Redis).
func (e Embedded) startStore(ctx context.Context, spec Spec, entry catalog.Entry, st *Stack) (storeHandle, error) {
	if entry.Store != catalog.Redis {
		st.StoreDesc = "memory"
		if spec.Instances > 1 {
			st.StoreDesc = "memory (each instance its own)"
		}
		return storeHandle{}, nil
	}
	addr, desc, err := startRedis(ctx, spec.RedisURL, st)
	if err != nil {
		return storeHandle{}, fmt.Errorf("embedded: %w", err)
	}
	st.StoreDesc = desc
	return connectRedis(ctx, addr, storeTimeout(spec), st)
}

func storeTimeout(spec Spec) time.Duration {
	if t := spec.Policy.Failure.StoreTimeout.D(); t > 0 {
		return t
	}
	return policy.DefaultStoreTimeout
}

// startRedis returns the address of a Redis to use: url when given, else a
// new redis-server child process when one is on PATH, else an in-process
// emulation (with a note for the report). What it starts stops with st.
func startRedis(_ context.Context, url string, st *Stack) (addr, desc string, err error) {
	switch {
	case url != "":
		opt, err := redis.ParseURL(url)
		if err != nil {
			return "", "", fmt.Errorf("redis URL %q: %w", url, err)
		}
		return opt.Addr, "redis " + opt.Addr + " (given)", nil
	case redisproc.Available() == nil:
		srv, err := redisproc.Start()
		if err != nil {
			return "", "", fmt.Errorf("start redis-server: %w", err)
		}
		st.OnClose(func() error { srv.Stop(); return nil })
		return srv.Addr, "redis-server " + srv.Addr + " (child process)", nil
	}
	mr := miniredis.NewMiniRedis()
	if err := mr.StartAddr("127.0.0.1:0"); err != nil {
		return "", "", fmt.Errorf("start in-process redis: %w", err)
	}
	st.OnClose(func() error { mr.Close(); return nil })
	const note = "redis-server is not on PATH: the store is miniredis, an in-process emulation, not real Redis"
	if len(st.Notes) == 0 || st.Notes[len(st.Notes)-1] != note {
		st.Notes = append(st.Notes, note)
	}
	return mr.Addr(), "in-process Redis emulation " + mr.Addr(), nil
}

// connectRedis puts a fault proxy in front of addr and returns a client
// through it.
func connectRedis(ctx context.Context, addr string, timeout time.Duration, st *Stack) (storeHandle, error) {
	proxy, err := faultproxy.New(addr)
	if err != nil {
		return storeHandle{}, fmt.Errorf("embedded: %w", err)
	}
	st.OnClose(proxy.Close)
	client := limiters.NewRedisClient(proxy.Addr(), timeout)
	st.OnClose(client.Close)
	if err := pingWithin(ctx, client, storeUpWithin); err != nil {
		return storeHandle{}, fmt.Errorf("embedded: redis at %s does not answer PING within %s: %w", addr, storeUpWithin, err)
	}
	warmStore(ctx, client)
	return storeHandle{client: client, addr: addr, proxy: proxy}, nil
}

// warmStore opens the client's idle connections before the run: go-redis
// fills MinIdleConns in the background, and a burst at the very start of a
// plan on a busy machine otherwise dials most of them at once within the
// store timeout, which a correct limiter then answers by its failure mode.
func warmStore(ctx context.Context, client redis.Cmdable) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	limiters.WarmPool(ctx, client, limiters.RedisOptions("", 0).MinIdleConns)
}

// storeUpWithin is how long a store just started or connected may take to
// answer its first PING.
const storeUpWithin = 5 * time.Second

// pingWithin PINGs client until it answers, for at most within: each PING
// has only the client's per-operation timeout (the store timeout, 200ms by
// default), which a busy machine's first dial through the fault proxy can
// outlast.
func pingWithin(ctx context.Context, client redis.Cmdable, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		err := client.Ping(ctx).Err()
		if err == nil || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}
