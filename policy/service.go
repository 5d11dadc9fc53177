package policy

import (
	"fmt"
	"strings"
)

// RateLimitService says how a request becomes a call to an Envoy rate-limit
// service (envoy.service.ratelimit.v3 ShouldRateLimit): the domain the
// service's configuration is loaded under, and the entries of the one
// descriptor each call carries, in order (a service's nested rules match
// them as a path: tenant, then plan).
type RateLimitService struct {
	Domain      string            `yaml:"domain" json:"domain"`
	Descriptors []DescriptorEntry `yaml:"descriptors" json:"descriptors"`
}

// DescriptorEntry is one key/value of the descriptor. Value is a template:
// {key} is the key sent, {tenant} the plan's logical key, {tier} the key's
// tier; anything else is literal text.
type DescriptorEntry struct {
	Key   string `yaml:"key" json:"key"`
	Value string `yaml:"value" json:"value"`
}

// DescriptorVars are the names a descriptor value may use.
var DescriptorVars = []string{"key", "tenant", "tier"}

// maxDescriptorEntries bounds a descriptor (Envoy's own configurations
// nest a few levels).
const maxDescriptorEntries = 16

// Render is the value of e for a request.
func (e DescriptorEntry) Render(key, tenant, tier string) string {
	return strings.NewReplacer("{key}", key, "{tenant}", tenant, "{tier}", tier).Replace(e.Value)
}

func (s *RateLimitService) normalize(errf func(path, format string, args ...any) error) error {
	if strings.TrimSpace(s.Domain) == "" {
		return errf("ratelimit_service.domain", "a rate-limit service needs the domain its configuration is loaded under")
	}
	if len(s.Descriptors) == 0 {
		return errf("ratelimit_service.descriptors", "at least one entry is required, e.g. {key: tenant, value: \"{key}\"}")
	}
	if len(s.Descriptors) > maxDescriptorEntries {
		return errf("ratelimit_service.descriptors", "%d entries; at most %d", len(s.Descriptors), maxDescriptorEntries)
	}
	keyed := false
	for i, e := range s.Descriptors {
		path := fmt.Sprintf("ratelimit_service.descriptors.%d", i)
		if e.Key == "" {
			return errf(path+".key", "an entry needs a key")
		}
		if e.Value == "" {
			return errf(path+".value", "entry %q needs a value (the service would match any value of it, not a key's)", e.Key)
		}
		rest := e.Value
		for {
			i := strings.IndexByte(rest, '{')
			if i < 0 {
				if strings.Contains(rest, "}") {
					return errf(path+".value", "%q: a } without its {", e.Value)
				}
				break
			}
			j := strings.IndexByte(rest[i:], '}')
			if j < 0 {
				return errf(path+".value", "%q: a { without its }", e.Value)
			}
			name := rest[i+1 : i+j]
			switch name {
			case "key", "tenant":
				keyed = true
			case "tier":
			default:
				return errf(path+".value", "%q: unknown {%s}: want {%s}", e.Value, name, strings.Join(DescriptorVars, "}, {"))
			}
			rest = rest[i+j+1:]
		}
	}
	if !keyed {
		return errf("ratelimit_service.descriptors", "no entry's value holds {key} or {tenant}: every key would share one limit, so no check could tell keys apart")
	}
	return nil
}
