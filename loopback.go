package rlverify

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
)

// Resolver looks up the addresses of a host name; *net.Resolver is one.
// Tests inject their own (nothing edits /etc/hosts).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// CheckLoopback is the loopback rule: rlverify sends load only to this
// machine unless the user allows more (--allow-remote). An IP literal must
// be a loopback address; a name — localhost too, which /etc/hosts may map
// elsewhere — is resolved with r (nil: net.DefaultResolver) and every
// address it resolves to must be one. what names the value in errors
// (`--target http://localhost:8080`).
func CheckLoopback(ctx context.Context, r Resolver, what, host string) error {
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Unmap().IsLoopback() {
			return nil
		}
		return fmt.Errorf("%s is not a loopback address; pass --allow-remote to use it (only services you own)", what)
	}
	if r == nil {
		r = net.DefaultResolver
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return fmt.Errorf("%s: cannot resolve %s to check that it is a loopback address (%v); pass --allow-remote to use it anyway (only services you own)", what, host, err)
	}
	if len(addrs) == 0 {
		return fmt.Errorf("%s: %s resolves to no address", what, host)
	}
	for _, a := range addrs {
		if !a.Unmap().IsLoopback() {
			return fmt.Errorf("%s is not a loopback address: %s resolves to %s; pass --allow-remote to use it (only services you own)", what, host, a)
		}
	}
	return nil
}
