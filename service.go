package rlverify

import (
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/service"
)

// Service is one reference limiter instance, ready to serve.
type Service struct {
	Handler http.Handler
	// Release frees what the instance holds (its store connections).
	Release func() error
	// Desc says what runs: the limiter, its algorithm, store and modes.
	Desc string
}

// NewService checks cfg and builds the instance it describes (rlverify
// serve); logf receives its log lines. Errors in cfg are *OptionError
// naming the field.
func NewService(cfg service.Config, logf func(format string, args ...any)) (*Service, error) {
	pol := cfg.Policy
	if pol == nil {
		pol = policy.Default()
	}
	entry, err := catalog.Lookup(cfg.Limiter, cfg.Store)
	if err != nil {
		return nil, &OptionError{Err: err}
	}
	redisLatency := cfg.RedisLatency.D()
	switch {
	case entry.Store == catalog.Redis && cfg.Redis == "":
		return nil, fieldErr("Redis", "is required by Store redis: give redis://HOST:PORT")
	case redisLatency < 0 || redisLatency > 5*time.Second:
		return nil, fieldErr("RedisLatency", "%s: want 0 … 5s", redisLatency)
	}
	if cfg.RegionMode != "" {
		if err := service.CheckRegionMode(cfg.RegionMode); err != nil {
			return nil, &OptionError{Field: "RegionMode", Err: err}
		}
	}
	token := cfg.ControlToken
	if token == "" {
		token = os.Getenv(service.EnvControlToken)
	}
	if cfg.Control && token == "" && !envs.LoopbackListen(cfg.Addr) {
		return nil, fieldErr("Control", "on %s: the control endpoint lets anyone who reaches it break the limiter; on an address other than loopback give ControlToken TOKEN (or $%s)", cfg.Addr, service.EnvControlToken)
	}
	opts := service.StandaloneOptions{
		Policy: pol.WithAlgorithm(entry.Algorithm), Entry: entry, RedisAddr: cfg.Redis, RedisLatency: redisLatency,
		ClockOffset: cfg.ClockOffset.D(), RegionMode: cfg.RegionMode, Control: cfg.Control, ControlToken: token, Name: cfg.Addr,
		Logf: logf,
	}
	if cfg.Downstream != "" {
		opts.Downstream = &service.HTTPForwarder{URL: cfg.Downstream, Client: &http.Client{Timeout: 5 * time.Second}}
	}
	h, release, err := service.NewStandalone(opts)
	if err != nil {
		return nil, err
	}
	extra := ""
	if cfg.RegionMode != "" {
		extra += ", region mode " + cfg.RegionMode
	}
	if cfg.Control {
		extra += ", control endpoint on"
	}
	return &Service{Handler: h, Release: release, Desc: fmt.Sprintf("%s (%s, store %s%s)", entry.Name, entry.Algorithm, entry.Store, extra)}, nil
}
