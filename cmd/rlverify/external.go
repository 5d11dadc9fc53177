package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/rlverify/rlverify/envs"
)

// addExternalFlags registers the external environment's settings: faults
// on a user's store (a store proxy, their Toxiproxy, commands) and what
// reached their downstream (a sink, a JSON counter, a Prometheus metric).
func addExternalFlags(fl *pflag.FlagSet, f *envs.ExternalSettings) {
	fl.StringArrayVar(&f.StoreProxies, "store-proxy", nil, "external env: run a store proxy LISTEN=UPSTREAM and point your service's store at LISTEN; fault phases act on it (repeatable)")
	fl.StringVar(&f.Toxiproxy, "toxiproxy", "", "external env: URL of your Toxiproxy server's API; fault phases act on the --toxiproxy-proxy proxies")
	fl.StringArrayVar(&f.ToxiproxyProxies, "toxiproxy-proxy", nil, "name of a proxy of --toxiproxy to break (repeatable)")
	fl.StringArrayVar(&f.OnInject, "on-inject", nil, "external env: KIND=COMMAND run (sh -c) when a fault of KIND starts, e.g. store-down='docker stop redis' (repeatable)")
	fl.StringArrayVar(&f.OnClear, "on-clear", nil, "external env: KIND=COMMAND run when a fault of KIND ends, e.g. store-down='docker start redis' (repeatable)")
	fl.DurationVar(&f.HookTimeout, "hook-timeout", 30*time.Second, "longest a --on-inject or --on-clear command may run")
	fl.StringVar(&f.Sink, "sink", "", "external env: URL of the rlverify sink your service forwards admitted requests to")
	fl.StringVar(&f.JSONURL, "downstream-json", "", "external env: URL of a JSON endpoint counting what reached your downstream (with --downstream-total and/or --downstream-by-key)")
	fl.StringVar(&f.JSONTotal, "downstream-total", "", "dotted path of the total count in --downstream-json, e.g. forwarded.total")
	fl.StringVar(&f.JSONByKey, "downstream-by-key", "", "dotted path of the object of key: count in --downstream-json, e.g. forwarded.by_key")
	fl.StringVar(&f.PromURL, "downstream-prometheus", "", "external env: URL of a Prometheus text endpoint with a counter of what reached your downstream")
	fl.StringVar(&f.PromMetric, "downstream-metric", "", "metric name in --downstream-prometheus")
	fl.StringVar(&f.PromLabel, "downstream-label", "api_key", "label of --downstream-metric that carries the key")
}
