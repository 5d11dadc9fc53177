// Command shell is the small HTTP service of the mutation study
// (internal/mutation): it limits every request with
// github.com/throttled/throttled/v2 — the library's own HTTP middleware
// (HTTPRateLimiterCtx), its GCRA limiter and its in-memory store — keyed by
// the X-Api-Key header, and answers what the library decides: 200 "ok", or
// the library's 429, with the X-RateLimit-* and Retry-After headers the
// library writes. Nothing here limits or writes a header of its own, so
// what the shell answers is the library's behaviour, and a mutant of the
// library changes it only through the library.
//
//	shell --addr 127.0.0.1:0 --capacity 5 --per 400ms
//
// Once it listens it prints its base URL on stdout and serves until
// interrupted. Its honest policy is internal/mutation/policy.yaml (with the
// default flags).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "shell:", err)
		os.Exit(2)
	}
}

// maxKeys bounds the library's LRU store; an audit uses a few hundred keys.
const maxKeys = 1 << 16

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("shell", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	capacity := fs.Int("capacity", 5, "requests a fresh key may send at once (the bucket's K)")
	per := fs.Duration("per", 400*time.Millisecond, "time to earn one more request (1/r)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	h, err := handler(*capacity, *per)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	fmt.Fprintf(stdout, "http://%s\n", ln.Addr())
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// handler wires the library as its documentation shows: a GCRA limiter of
// MaxBurst K−1 (the library's burst counts requests beyond the first) and
// one request per per, in front of a handler that answers "ok".
func handler(capacity int, per time.Duration) (http.Handler, error) {
	if capacity < 1 || per <= 0 {
		return nil, fmt.Errorf("capacity %d and per %s must be positive", capacity, per)
	}
	st, err := memstore.NewCtx(maxKeys)
	if err != nil {
		return nil, fmt.Errorf("throttled store: %w", err)
	}
	rl, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{MaxRate: throttled.PerDuration(1, per), MaxBurst: capacity - 1})
	if err != nil {
		return nil, fmt.Errorf("throttled limiter: %w", err)
	}
	mw := throttled.HTTPRateLimiterCtx{
		RateLimiter: rl,
		VaryBy:      &throttled.VaryBy{Headers: []string{"X-Api-Key"}},
	}
	return mw.RateLimit(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})), nil
}
