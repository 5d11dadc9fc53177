package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const serviceBase = "name: p\ntiers:\n  - name: free\n    key_prefix: free-\n    limits: [{limit: 5, window: 1s}]\n"

func TestRateLimitServiceErrorsNameFileLineField(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"no domain", "ratelimit_service:\n  descriptors: [{key: tenant, value: \"{key}\"}]\n", "p.yaml:6: ratelimit_service.domain: a rate-limit service needs the domain"},
		{"no entries", "ratelimit_service:\n  domain: api\n", "p.yaml:6: ratelimit_service.descriptors: at least one entry"},
		{"no key", "ratelimit_service:\n  domain: api\n  descriptors:\n    - {value: \"{key}\"}\n", "p.yaml:9: ratelimit_service.descriptors.0.key: an entry needs a key"},
		{"no value", "ratelimit_service:\n  domain: api\n  descriptors:\n    - {key: tenant}\n", `p.yaml:9: ratelimit_service.descriptors.0.value: entry "tenant" needs a value`},
		{"unknown name", "ratelimit_service:\n  domain: api\n  descriptors:\n    - {key: tenant, value: \"{user}\"}\n", `ratelimit_service.descriptors.0.value: "{user}": unknown {user}: want {key}, {tenant}, {tier}`},
		{"unclosed", "ratelimit_service:\n  domain: api\n  descriptors:\n    - {key: tenant, value: \"{key\"}\n", "a { without its }"},
		{"stray }", "ratelimit_service:\n  domain: api\n  descriptors:\n    - {key: tenant, value: \"key}\"}\n", "a } without its {"},
		{"no key in any value", "ratelimit_service:\n  domain: api\n  descriptors:\n    - {key: plan, value: \"{tier}\"}\n", "no entry's value holds {key} or {tenant}"},
		{"unknown field", "ratelimit_service:\n  domain: api\n  descriptor: []\n", `unknown field "descriptor"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(serviceBase+tc.yaml))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestRateLimitServiceRenders(t *testing.T) {
	p, err := Parse("p.yaml", []byte(serviceBase+"ratelimit_service:\n  domain: api\n  descriptors:\n    - {key: tenant, value: \"{key}\"}\n    - {key: plan, value: \"plan-{tier}\"}\n    - {key: who, value: \"{tenant}\"}\n"))
	require.NoError(t, err)
	require.NotNil(t, p.Service)
	var got []string
	for _, e := range p.Service.Descriptors {
		got = append(got, e.Key+"="+e.Render("free-x1", "a", "free"))
	}
	assert.Equal(t, []string{"tenant=free-x1", "plan=plan-free", "who=a"}, got)
	// {key} is replaced once, not re-read: a key holding braces stays data.
	assert.Equal(t, "{tier}", DescriptorEntry{Value: "{key}"}.Render("{tier}", "", "free"))
}
