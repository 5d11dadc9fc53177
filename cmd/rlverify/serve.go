package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/service"
)

func serveCmd() *cobra.Command {
	var (
		cfg                       service.Config // set by the flags
		configFile, policyFile    string
		clockOffset, redisLatency time.Duration
	)
	c := &cobra.Command{
		Use:   "serve --limiter NAME --addr HOST:PORT",
		Short: "Run one reference limiter instance as an HTTP service",
		Long: `Run one reference limiter instance. Requests carry the API key in X-API-Key
(or the policy's identity header); admitted requests get 200 (and are forwarded
to --downstream when set), denied ones 429 with Retry-After and rate-limit
headers. /healthz answers 200, /metrics serves Prometheus metrics.

--control serves the harness's control endpoint (the docker environment turns
it on in its containers): POST /_rlverify/fault?kind=clock-skew&param=+2s or
?kind=rules-down injects a fault into this instance, DELETE with the same kind
clears it, POST /_rlverify/drain hands over a regional replica's admissions.
Anyone who reaches it can break the limiter: never expose it.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg.RedisLatency, cfg.ClockOffset = policy.Duration(redisLatency), policy.Duration(clockOffset)
			var err error
			if configFile != "" {
				for _, name := range []string{"limiter", "addr", "policy", "store", "redis", "downstream", "control", "control-token", "clock-offset", "region-mode", "redis-latency"} {
					if c.Flags().Changed(name) {
						return usageErr("--config %s holds the whole configuration: --%s does not go with it", configFile, name)
					}
				}
				if cfg, err = service.ReadConfig(configFile); err != nil {
					return usageWrap(err)
				}
			} else if cfg.Policy, err = loadPolicy(policyFile); err != nil {
				return err
			}
			return serve(c, cfg)
		},
	}
	fl := c.Flags()
	fl.StringVar(&configFile, "config", "", "read the whole configuration from this YAML file (what the docker environment writes; see service.Config) instead of the flags below")
	fl.StringVar(&cfg.Limiter, "limiter", "token-bucket", "limiter name (see rlverify limiters)")
	fl.StringVar(&cfg.Addr, "addr", "127.0.0.1:8080", "listen address")
	fl.StringVar(&policyFile, "policy", "", "policy YAML (default: built-in)")
	fl.StringVar(&cfg.Store, "store", "", "memory or redis")
	newRedisFlag(fl, &cfg.Redis, true, "Redis of --store redis: redis://HOST:PORT")
	fl.StringVar(&cfg.Downstream, "downstream", "", "URL admitted requests are forwarded to (e.g. an rlverify sink)")
	fl.BoolVar(&cfg.Control, "control", false, "serve the control endpoint /_rlverify/ (fault injection, regional drain) — for test harnesses only")
	fl.StringVar(&cfg.ControlToken, "control-token", "", "require Authorization: Bearer TOKEN on the control endpoint (needed to serve it beyond loopback; default $"+service.EnvControlToken+")")
	fl.DurationVar(&clockOffset, "clock-offset", 0, "shift this instance's clock (e.g. 2s or -2s): a limiter that trusts instance clocks sees it")
	fl.StringVar(&cfg.RegionMode, "region-mode", "", "run the reference token bucket as one instance of a region: replicated, strict or independent")
	fl.DurationVar(&redisLatency, "redis-latency", 0, "delay every exchange with Redis by this much each way (a store in another region)")
	return c
}

// serve runs one reference limiter instance as cfg says until the command
// is interrupted.
func serve(c *cobra.Command, cfg service.Config) error {
	s, err := rlverify.NewService(cfg, func(format string, args ...any) {
		fmt.Fprintf(c.ErrOrStderr(), "%s rlverify serve: %s\n", time.Now().UTC().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	})
	if err != nil {
		return fromLib(err)
	}
	defer s.Release()
	return serveUntilDone(c.Context(), cfg.Addr, s.Handler, func(a string) {
		fmt.Fprintf(c.ErrOrStderr(), "rlverify serve: %s listening on http://%s\n", s.Desc, a)
	})
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
			s := service.NewSink(nil)
			return serveUntilDone(c.Context(), addr, s, func(a string) {
				fmt.Fprintf(c.ErrOrStderr(), "rlverify sink: listening on http://%s\n", a)
			})
		},
	}
	c.Flags().StringVar(&addr, "addr", "127.0.0.1:9090", "listen address")
	return c
}

// serveUntilDone serves h on addr until ctx ends (SIGINT/SIGTERM/SIGHUP).
func serveUntilDone(ctx context.Context, addr string, h http.Handler, started func(string)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return runErr(fmt.Errorf("listen on %s: %w", addr, err))
	}
	srv := service.Server(h)
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
