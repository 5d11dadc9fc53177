package testsvc

import (
	"embed"
	"fmt"
	"strconv"
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

// Variant is how a service was built beyond its defaults, as far as its
// honest policy shows it.
type Variant struct {
	// ServeLast: Common.ServeLast (a repeated identity is served and
	// limited as its last occurrence).
	ServeLast bool
	// Skip: the windowed service's skip list (WindowedConfig.Skip), keys
	// the policy declares exempt.
	Skip string
}

// HonestPolicyYAML returns PolicyYAML(name) as a service built as v
// declares itself: tenant_occurrence and limiter_occurrence last for
// ServeLast, an exempt class "skipped" for the skip list.
func HonestPolicyYAML(name string, v Variant) ([]byte, error) {
	b, err := PolicyYAML(name)
	if err != nil {
		return nil, err
	}
	text := string(b)
	edit := func(from, to string) error {
		if !strings.Contains(text, from) {
			return fmt.Errorf("testsvc: policy %s has no %q to declare the variant by", name, strings.TrimSpace(from))
		}
		text = strings.Replace(text, from, to, 1)
		return nil
	}
	if v.ServeLast {
		if err := edit("  repeated: first\n", "  tenant_occurrence: last\n  limiter_occurrence: last\n"); err != nil {
			return nil, err
		}
	}
	if v.Skip != "" {
		if name != ServiceWindowed {
			return nil, fmt.Errorf("testsvc: only the windowed service has a skip list, not %s", name)
		}
		if err := edit("default_tier: all\n", "default_tier: all\nexempt:\n  - name: skipped\n    key_prefix: "+strconv.Quote(v.Skip)+"\n"); err != nil {
			return nil, err
		}
	}
	return []byte(text), nil
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
