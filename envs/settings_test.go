package envs_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/envs"
)

// The external environment's settings as a user writes them are read and
// checked here, with the field at fault and no flag named.
func TestExternalSettingsAreReadWithTheirField(t *testing.T) {
	ok := envs.ExternalSettings{HookTimeout: time.Second}
	for _, tc := range []struct {
		name  string
		s     func(s *envs.ExternalSettings)
		field string // "" when accepted
		want  string
	}{
		{"nothing", func(*envs.ExternalSettings) {}, "", ""},
		{"a proxy", func(s *envs.ExternalSettings) { s.StoreProxies = []string{"127.0.0.1:16379=127.0.0.1:6379"} }, "", ""},
		{"a proxy without its upstream", func(s *envs.ExternalSettings) { s.StoreProxies = []string{"nonsense"} }, "StoreProxies", "want LISTEN=UPSTREAM"},
		{"an inject hook", func(s *envs.ExternalSettings) { s.OnInject = []string{"store-down=true"} }, "", ""},
		{"an unknown fault", func(s *envs.ExternalSettings) { s.OnInject = []string{"disk-full=true"} }, "OnInject", `unknown fault "disk-full"`},
		{"a clear without its inject", func(s *envs.ExternalSettings) { s.OnClear = []string{"store-down=true"} }, "OnClear", "has no OnInject store-down"},
		{"no hook time", func(s *envs.ExternalSettings) { s.HookTimeout = 0 }, "HookTimeout", "want a positive duration"},
		{"a JSON counter without paths", func(s *envs.ExternalSettings) { s.JSONURL = "http://127.0.0.1:1/c" }, "JSONURL", "give JSONByKey PATH"},
		{"paths without a JSON counter", func(s *envs.ExternalSettings) { s.JSONTotal = "a.b" }, "JSONTotal", "need JSONURL"},
		{"a metric without its endpoint", func(s *envs.ExternalSettings) { s.PromMetric = "up_total" }, "PromMetric", "needs PromURL"},
		{"two sources", func(s *envs.ExternalSettings) {
			s.Sink, s.PromURL, s.PromMetric, s.PromLabel = "http://127.0.0.1:1", "http://127.0.0.1:2", "m", "k"
		}, "Downstream", "give one source"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ok
			tc.s(&s)
			x, err := s.Environment()
			if tc.field == "" {
				require.NoError(t, err)
				require.Equal(t, time.Second, x.HookTimeout)
				return
			}
			var fe *envs.FieldError
			require.True(t, errors.As(err, &fe), "%v is a *envs.FieldError", err)
			require.Equal(t, tc.field, fe.Field)
			require.ErrorContains(t, err, tc.want)
			require.False(t, strings.Contains(err.Error(), "--"), "%q names a flag", err)
		})
	}
}
