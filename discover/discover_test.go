package discover_test

import (
	"context"
	"net/http"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/discover"
	"github.com/rlverify/rlverify/internal/testsvc"
	"github.com/rlverify/rlverify/policy"
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestScratch(t *testing.T) {
	kf := must(attacks.LoadKeyFile("../internal/testsvc/policies/orders-keys.yaml", must(policy.Load("../internal/testsvc/policies/orders.yaml"))))
	for _, c := range []struct {
		name string
		h    http.Handler
		path string
		opt  discover.Options
	}{
		{"windowed", must(testsvc.NewWindowed(testsvc.WindowedConfig{})), "/search/x", discover.Options{Identity: policy.Identity{In: "query", Name: "api_key"}}},
		{"sessions", must(testsvc.NewSessions(testsvc.SessionsConfig{})), "/app/x", discover.Options{Identity: policy.Identity{In: "cookie", Name: "session"}}},
		{"orders", must(testsvc.NewOrders(testsvc.OrdersConfig{Keys: testsvc.DefaultOrdersKeys()})), "/v1/orders", discover.Options{Identity: policy.Identity{In: "bearer"}, Keys: kf,
			Request: attacks.Request{Method: "POST", Body: `{"sku":"a"}`, Headers: map[string]string{"Content-Type": "application/json"}},
		}},
	} {
		if os.Getenv("ONLY") != "" && os.Getenv("ONLY") != c.name {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			url, stop := testsvc.Serve(c.h)
			defer stop()
			o := c.opt
			o.Targets = []string{url + c.path}
			o.Log = t.Logf
			res, err := discover.Run(context.Background(), o)
			require.NoError(t, err)
			b, _, err := discover.Policy(res)
			t.Logf("%s", b)
			require.NoError(t, err)
		})
	}
}
