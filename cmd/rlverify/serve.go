package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/rlverify/rlverify/limiters"
	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/targets"
)

func serveCmd() *cobra.Command {
	var (
		limiter, addr, policyFile, store, redisAddr, downstream string
	)
	c := &cobra.Command{
		Use:   "serve --limiter NAME --addr HOST:PORT",
		Short: "Run one reference limiter instance as an HTTP service",
		Long: `Run one reference limiter instance. Requests carry the API key in X-API-Key
(or the policy's identity header); admitted requests get 200 (and are forwarded
to --downstream when set), denied ones 429 with Retry-After and rate-limit
headers. /healthz answers 200, /metrics serves Prometheus metrics.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			pol, err := loadPolicy(policyFile)
			if err != nil {
				return err
			}
			entry, err := catalog.Lookup(limiter, store)
			if err != nil {
				return usageWrap(err)
			}
			declared := pol.WithAlgorithm(entry.Algorithm)
			env := catalog.Env{}
			if entry.Store == catalog.Redis {
				if redisAddr == "" {
					return usageErr("--store redis needs --redis HOST:PORT")
				}
				client := limiters.NewRedisClient(redisAddr, declared.Failure.StoreTimeout.D())
				defer client.Close()
				env.Redis = client
			}
			metrics := targets.NewMetrics()
			lims, err := targets.BuildLimiters(declared, entry, env, metrics)
			if err != nil {
				return runErr(err)
			}
			global, err := targets.BuildGlobal(declared, entry, env, metrics)
			if err != nil {
				return runErr(err)
			}
			svc := &targets.Service{Policy: declared, Limiters: lims, Global: global, Metrics: metrics, TrustXFF: entry.TrustXFF, ForwardRejected: entry.ForwardRejected, Name: addr}
			if downstream != "" {
				svc.Downstream = &targets.HTTPForwarder{URL: downstream, Client: &http.Client{Timeout: 5 * time.Second}}
			}
			return serveUntilDone(c.Context(), addr, svc, func(a string) {
				fmt.Fprintf(c.ErrOrStderr(), "rlverify serve: %s (%s, store %s) listening on http://%s\n", entry.Name, entry.Algorithm, entry.Store, a)
			})
		},
	}
	fl := c.Flags()
	fl.StringVar(&limiter, "limiter", "token-bucket", "limiter name (see rlverify limiters)")
	fl.StringVar(&addr, "addr", "127.0.0.1:8080", "listen address")
	fl.StringVar(&policyFile, "policy", "", "policy YAML (default: built-in)")
	fl.StringVar(&store, "store", "", "memory or redis")
	fl.StringVar(&redisAddr, "redis", "", "Redis address HOST:PORT for --store redis")
	fl.StringVar(&downstream, "downstream", "", "URL admitted requests are forwarded to (e.g. an rlverify sink)")
	return c
}

func sinkCmd() *cobra.Command {
	var addr string
	c := &cobra.Command{
		Use:   "sink --addr HOST:PORT",
		Short: "Run the downstream counter your service forwards admitted requests to",
		Long: `Run a downstream sink. Point your service's downstream at it; every request
it receives counts as an arrival for the key in X-RL-Key (or X-API-Key).
rlverify attack --sink URL reads GET /_sink/stats at the end of a run.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			s := targets.NewSink(nil)
			return serveUntilDone(c.Context(), addr, s, func(a string) {
				fmt.Fprintf(c.ErrOrStderr(), "rlverify sink: listening on http://%s\n", a)
			})
		},
	}
	c.Flags().StringVar(&addr, "addr", "127.0.0.1:9090", "listen address")
	return c
}

// serveUntilDone serves h on addr until ctx ends (SIGINT/SIGTERM).
func serveUntilDone(ctx context.Context, addr string, h http.Handler, started func(string)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return runErr(fmt.Errorf("listen on %s: %w", addr, err))
	}
	srv := targets.Server(h)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	started(ln.Addr().String())
	select {
	case err := <-done:
		return runErr(err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return runErr(err)
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return runErr(err)
	}
	return nil
}
