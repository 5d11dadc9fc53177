// Command testsvc runs one of the internal/testsvc test services as a
// separate process, as a user's own service would run, for rlverify's
// end-to-end tests and docs:
//
//	testsvc --service orders --addr 127.0.0.1:8080 --instances 3
//	testsvc --service redisbucket --redis 127.0.0.1:6390 --quirk fail-open
//
// Once every instance listens it prints their base URLs, one per line, on
// stdout, and serves until interrupted. The honest policy of a service run
// with its defaults is internal/testsvc/policies/NAME.yaml (--print-policy
// prints it). Exit status 2 is a usage error, 1 any other failure.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/rlverify/rlverify/internal/testsvc"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "testsvc:", err)
		var u usageError
		if errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError is a bad command line.
type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// options are the parsed flags.
type options struct {
	service      string
	addr         string
	instances    int
	instancesSet bool
	localState   bool
	quirks       testsvc.Quirks
	keys         string
	tiers        []string
	limit        int64
	window       time.Duration
	guard        time.Duration
	capacity     int64
	rate         float64
	redis        string
	storeTimeout time.Duration
	failMode     string
	printPolicy  bool
	serveLast    bool
	skip         string
}

// serviceFlags says which services each service-specific flag applies to.
var serviceFlags = map[string][]string{
	"keys":          {testsvc.ServiceOrders},
	"tier":          {testsvc.ServiceOrders},
	"limit":         {testsvc.ServiceWindowed, testsvc.ServiceSessions},
	"window":        {testsvc.ServiceWindowed, testsvc.ServiceSessions},
	"guard":         {testsvc.ServiceSessions},
	"capacity":      {testsvc.ServiceRedisBucket},
	"rate":          {testsvc.ServiceRedisBucket},
	"redis":         {testsvc.ServiceRedisBucket},
	"store-timeout": {testsvc.ServiceRedisBucket},
	"fail-mode":     {testsvc.ServiceRedisBucket},
	"skip":          {testsvc.ServiceWindowed},
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := pflag.NewFlagSet("testsvc", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.service, "service", "", "the service to run: "+strings.Join(testsvc.Services, ", "))
	fs.StringVar(&o.addr, "addr", "127.0.0.1:0", "the first instance's listen address (port 0: free ports), or a comma-separated list, one instance each")
	fs.IntVar(&o.instances, "instances", 1, "instances on consecutive ports from --addr's port")
	fs.BoolVar(&o.localState, "local-state", false, "each instance keeps its own limiter state (default: one shared store; redisbucket: one Redis namespace)")
	fs.Var(&o.quirks, "quirk", "a deliberate defect NAME[=VALUE], repeatable: "+strings.Join(testsvc.QuirkNames(), ", "))
	fs.StringVar(&o.keys, "keys", "", "orders: the allowlist, YAML tier → list of keys (default: internal/testsvc/policies/orders-keys.yaml)")
	fs.StringArrayVar(&o.tiers, "tier", nil, "orders: a tier's bucket NAME=K@R (R tokens per second, e.g. free=5@2.5), repeatable (default: free=5@2.5 paid=20@12.5)")
	fs.Int64Var(&o.limit, "limit", 0, fmt.Sprintf("windowed, sessions: requests per window (default %d, %d)", testsvc.DefaultWindowedLimit, testsvc.DefaultSessionsLimit))
	fs.DurationVar(&o.window, "window", 0, fmt.Sprintf("windowed, sessions: the window (default %s, %s)", testsvc.DefaultWindowedWindow, testsvc.DefaultSessionsWindow))
	fs.DurationVar(&o.guard, "guard", 0, "sessions: conservative guard, a freed slot is used again only this much later (e.g. 30ms)")
	fs.Int64Var(&o.capacity, "capacity", 0, fmt.Sprintf("redisbucket: bucket capacity K (default %d)", testsvc.DefaultRedisBucket().Capacity))
	fs.Float64Var(&o.rate, "rate", 0, fmt.Sprintf("redisbucket: refill rate in tokens per second (default %g)", testsvc.DefaultRedisBucket().Rate))
	fs.StringVar(&o.redis, "redis", "", "redisbucket: the Redis address (host:port), for instance a store proxy")
	fs.DurationVar(&o.storeTimeout, "store-timeout", 0, fmt.Sprintf("redisbucket: bound on every Redis call (default %s)", testsvc.DefaultRedisStoreTimeout))
	fs.StringVar(&o.failMode, "fail-mode", "", "redisbucket: closed (503 + Retry-After, default) or open (admit) while Redis fails")
	fs.BoolVar(&o.serveLast, "serve-last", false, "serve and limit a repeated identity as its last occurrence (default: the first)")
	fs.StringVar(&o.skip, "skip", "", "windowed: a key prefix never limited (a skip list; the policy declares it exempt)")
	fs.BoolVar(&o.printPolicy, "print-policy", false, "print the service's honest policy (for its defaults, --serve-last and --skip) and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return o, err
		}
		return o, usageError{err}
	}
	if fs.NArg() > 0 {
		return o, usagef("unexpected arguments %q", fs.Args())
	}
	known := false
	for _, s := range testsvc.Services {
		known = known || s == o.service
	}
	if !known {
		return o, usagef("--service %q: want one of %s", o.service, strings.Join(testsvc.Services, ", "))
	}
	var bad error
	fs.Visit(func(f *pflag.Flag) {
		if services, ok := serviceFlags[f.Name]; ok && bad == nil && !contains(services, o.service) {
			bad = usagef("--%s applies to %s, not %s", f.Name, strings.Join(services, " and "), o.service)
		}
	})
	if bad != nil {
		return o, bad
	}
	o.instancesSet = fs.Changed("instances")
	if o.instances < 1 || o.instances > 64 {
		return o, usagef("--instances %d: want 1 … 64", o.instances)
	}
	return o, nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// addresses expands --addr and --instances into one listen address per
// instance.
func addresses(addr string, n int, nSet bool) ([]string, error) {
	if strings.Contains(addr, ",") {
		list := strings.Split(addr, ",")
		for i := range list {
			list[i] = strings.TrimSpace(list[i])
			if _, _, err := net.SplitHostPort(list[i]); err != nil {
				return nil, usagef("--addr %q: item %d: %v", addr, i+1, err)
			}
		}
		if nSet && n != len(list) {
			return nil, usagef("--instances %d but --addr lists %d addresses", n, len(list))
		}
		return list, nil
	}
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, usagef("--addr %q: want HOST:PORT: %v", addr, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port+n-1 > 65535 {
		return nil, usagef("--addr %q: port %q with %d instances is outside 0 … 65535", addr, portText, n)
	}
	out := make([]string, n)
	for i := range out {
		p := port
		if port != 0 {
			p = port + i
		}
		out[i] = net.JoinHostPort(host, strconv.Itoa(p))
	}
	return out, nil
}

// parseTiers reads --tier NAME=K@R values.
func parseTiers(specs []string) (map[string]testsvc.Bucket, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	tiers := map[string]testsvc.Bucket{}
	for _, spec := range specs {
		name, bucket, ok := strings.Cut(spec, "=")
		k, r, ok2 := strings.Cut(bucket, "@")
		capacity, err1 := strconv.ParseInt(k, 10, 64)
		rate, err2 := strconv.ParseFloat(strings.TrimSuffix(r, "/s"), 64)
		if !ok || !ok2 || name == "" || err1 != nil || err2 != nil {
			return nil, usagef("--tier %q: want NAME=K@R such as free=5@2.5", spec)
		}
		if _, dup := tiers[name]; dup {
			return nil, usagef("--tier %q: tier %s is given twice", spec, name)
		}
		tiers[name] = testsvc.Bucket{Capacity: capacity, Rate: rate}
	}
	return tiers, nil
}

// build returns one handler per instance and a function that releases them.
func build(o options, n int) ([]http.Handler, func(), error) {
	up := testsvc.NewUpstream()
	shared := testsvc.NewStore()
	store := func() *testsvc.Store {
		if o.localState {
			return testsvc.NewStore()
		}
		return shared
	}
	var hs []http.Handler
	var closers []func() error
	release := func() {
		for _, c := range closers {
			_ = c()
		}
	}
	var keys map[string]string
	var tiers map[string]testsvc.Bucket
	if o.service == testsvc.ServiceOrders {
		var err error
		if tiers, err = parseTiers(o.tiers); err != nil {
			return nil, nil, err
		}
		keys = testsvc.DefaultOrdersKeys()
		if o.keys != "" {
			if keys, err = testsvc.LoadKeys(o.keys); err != nil {
				return nil, nil, usageError{err}
			}
		}
	}
	for i := 0; i < n; i++ {
		common := testsvc.Common{Upstream: up, Quirks: o.quirks, Instance: fmt.Sprintf("%s-%d", o.service, i), ServeLast: o.serveLast}
		var h http.Handler
		var err error
		switch o.service {
		case testsvc.ServiceOrders:
			h, err = testsvc.NewOrders(testsvc.OrdersConfig{Common: common, Keys: keys, Tiers: tiers, Store: store()})
		case testsvc.ServiceWindowed:
			h, err = testsvc.NewWindowed(testsvc.WindowedConfig{Common: common, Limit: o.limit, Window: o.window, Store: store(), Skip: o.skip})
		case testsvc.ServiceSessions:
			h, err = testsvc.NewSessions(testsvc.SessionsConfig{Common: common, Limit: o.limit, Window: o.window, Guard: o.guard, Store: store()})
		case testsvc.ServiceRedisBucket:
			ns := ""
			if o.localState {
				ns = fmt.Sprintf("i%d:", i)
			}
			var b *testsvc.RedisBucket
			b, err = testsvc.NewRedisBucket(testsvc.RedisBucketConfig{
				Common: common, Addr: o.redis, Bucket: testsvc.Bucket{Capacity: o.capacity, Rate: o.rate},
				StoreTimeout: o.storeTimeout, FailMode: o.failMode, Namespace: ns,
			})
			if err == nil {
				closers = append(closers, b.Close)
				h = b
			}
		}
		if err != nil {
			release()
			return nil, nil, usageError{err}
		}
		hs = append(hs, h)
	}
	return hs, release, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	if o.printPolicy {
		name := o.service
		if o.service == testsvc.ServiceRedisBucket && o.failMode == testsvc.FailOpen {
			name += "-open"
		}
		text, err := testsvc.HonestPolicyYAML(name, testsvc.Variant{ServeLast: o.serveLast, Skip: o.skip})
		if err != nil {
			return usageError{err}
		}
		_, err = stdout.Write(text)
		return err
	}
	addrs, err := addresses(o.addr, o.instances, o.instancesSet)
	if err != nil {
		return err
	}
	hs, release, err := build(o, len(addrs))
	if err != nil {
		return err
	}
	defer release()

	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	for _, a := range addrs {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			return fmt.Errorf("instance on %s: %w", a, err)
		}
		lns = append(lns, ln)
	}
	servers := make([]*http.Server, len(hs))
	errs := make(chan error, len(hs))
	for i, h := range hs {
		servers[i] = testsvc.NewServer(h)
		go func(s *http.Server, ln net.Listener) { errs <- s.Serve(ln) }(servers[i], lns[i])
	}
	for _, ln := range lns {
		fmt.Fprintf(stdout, "http://%s\n", ln.Addr())
	}
	state := "shared state"
	if o.localState {
		state = "per-instance state"
	}
	quirks := o.quirks.String()
	if quirks == "" {
		quirks = "none"
	}
	fmt.Fprintf(stderr, "testsvc: %s: %d instance(s), %s, quirks: %s\n", o.service, len(hs), state, quirks)

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errs:
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(shutdown)
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", serveErr)
	}
	return nil
}
