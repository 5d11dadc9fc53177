package envs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The loopback-consent rule, in one place: rlverify sends traffic, breaks
// connections and writes limiter state only on loopback unless the caller
// allows remote addresses (AllowRemote: only services they own). Every
// address a run will touch — targets, a Redis, store proxies, a Toxiproxy
// API, downstream readers — goes through CheckLoopback.

// ErrNotLoopback is wrapped by every refusal of an address outside
// loopback without consent.
var ErrNotLoopback = errors.New("is not a loopback address")

// CheckLoopback refuses host (what names it in the error: the URL or
// host:port as given) when it is not a loopback address and allowRemote is
// false.
func CheckLoopback(what, host string, allowRemote bool) error {
	if allowRemote {
		return nil
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Unmap().IsLoopback() {
			return nil
		}
		return fmt.Errorf("%s %w; set AllowRemote to use it (only services you own)", what, ErrNotLoopback)
	}
	// A name — localhost too, which /etc/hosts may map elsewhere — is
	// resolved, and every address it names must be loopback.
	r := LoopbackResolver
	if r == nil {
		r = net.DefaultResolver
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return fmt.Errorf("%s: cannot resolve %s to check that it is a loopback address (%v); set AllowRemote to use it anyway (only services you own)", what, host, err)
	}
	for _, a := range addrs {
		if !a.Unmap().IsLoopback() {
			return fmt.Errorf("%s %w: %s resolves to %s; set AllowRemote to use it (only services you own)", what, ErrNotLoopback, host, a)
		}
	}
	return nil
}

// Resolver looks up the addresses of a host name; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// LoopbackResolver resolves the names CheckLoopback checks (nil: the
// system's resolver). Tests set it to answer as a hostile /etc/hosts
// would; nothing else should.
var LoopbackResolver Resolver

// CheckLoopbackURL is CheckLoopback for an http(s) URL.
func CheckLoopbackURL(raw string, allowRemote bool) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "grpc") || u.Host == "" {
		return fmt.Errorf("%q: want an http(s) URL such as http://127.0.0.1:8080, or a rate-limit service's grpc://HOST:PORT", raw)
	}
	return CheckLoopback(raw, u.Hostname(), allowRemote)
}

// CheckLoopbackAddr is CheckLoopback for host:port.
func CheckLoopbackAddr(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: want host:port", addr)
	}
	return CheckLoopback(addr, host, allowRemote)
}

// RedisAddr is the host:port of a Redis URL (redis://HOST:PORT[/DB]).
func RedisAddr(raw string) (string, error) {
	opt, err := redis.ParseURL(raw)
	if err != nil {
		return "", fmt.Errorf("%q: %w", raw, err)
	}
	return opt.Addr, nil
}

// FieldError is an error in one field of an environment's settings; the
// library reports it as an option error naming the field.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + " " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// Validate checks what the external environment will touch: every store
// proxy, the Toxiproxy API and the downstream reader on loopback unless
// allowRemote, and a Toxiproxy with the proxies to break. Errors are
// *FieldError naming the field.
func (x External) Validate(allowRemote bool) error {
	if err := CheckProxySpecs(x.StoreProxies); err != nil {
		return &FieldError{"StoreProxies", err}
	}
	for _, p := range x.StoreProxies {
		for _, a := range []string{p.Listen, p.Upstream} {
			if err := CheckLoopbackAddr(a, allowRemote); err != nil {
				return &FieldError{"StoreProxies", err}
			}
		}
	}
	if x.Toxiproxy != "" {
		if err := CheckLoopbackURL(x.Toxiproxy, allowRemote); err != nil {
			return &FieldError{"Toxiproxy", err}
		}
		if len(x.ToxiproxyProxies) == 0 {
			return &FieldError{"ToxiproxyProxies", fmt.Errorf("is empty: name the proxies of Toxiproxy %s to break", x.Toxiproxy)}
		}
	} else if len(x.ToxiproxyProxies) > 0 {
		return &FieldError{"ToxiproxyProxies", errors.New("needs Toxiproxy, the URL of their server's API")}
	}
	if x.Downstream != nil {
		field, u := "", ""
		switch d := x.Downstream.(type) {
		case *RemoteSink:
			field, u = "Downstream.RemoteSink", d.URL
		case *JSONCounter:
			field, u = "Downstream.JSONCounter", d.URL
		case *PromCounter:
			field, u = "Downstream.PromCounter", d.URL
		}
		if u != "" {
			if err := CheckLoopbackURL(u, allowRemote); err != nil {
				return &FieldError{field, err}
			}
		}
	}
	return nil
}

// LoopbackListen reports whether a listen address (HOST:PORT) is on
// loopback only.
func LoopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	return CheckLoopback("listen address "+addr, host, false) == nil
}
