package testsvc

import (
	"embed"
	"fmt"
	"strings"
)

// The services, by the name --service takes.
const (
	ServiceOrders      = "orders"
	ServiceWindowed    = "windowed"
	ServiceSessions    = "sessions"
	ServiceRedisBucket = "redisbucket"
)

// Services lists every service name.
var Services = []string{ServiceOrders, ServiceWindowed, ServiceSessions, ServiceRedisBucket}

//go:embed policies/*.yaml
var policyFiles embed.FS

// PolicyYAML returns the text of the honest policy policies/NAME.yaml of a
// service run with its defaults: orders, windowed, sessions, redisbucket
// (failing closed) or redisbucket-open (--fail-mode open).
func PolicyYAML(name string) ([]byte, error) {
	if strings.ContainsAny(name, "/\\.") {
		return nil, fmt.Errorf("testsvc: policy %q: want a service name such as orders", name)
	}
	b, err := policyFiles.ReadFile("policies/" + name + ".yaml")
	if err != nil || strings.HasSuffix(name, "-keys") {
		return nil, fmt.Errorf("testsvc: no policy %q (policies: orders, windowed, sessions, redisbucket, redisbucket-open)", name)
	}
	return b, nil
}

// DefaultOrdersKeys returns the allowlist policies/orders-keys.yaml: 24
// free keys (fr_alpha … fr_xray) and 8 paid keys (pd_alpha … pd_hotel).
func DefaultOrdersKeys() map[string]string {
	b, err := policyFiles.ReadFile("policies/orders-keys.yaml")
	if err != nil {
		panic("testsvc: the built-in allowlist is missing: " + err.Error())
	}
	keys, err := ParseKeys("policies/orders-keys.yaml", b)
	if err != nil {
		panic(err.Error())
	}
	return keys
}
