package rlverify_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/envs/redisproc"
	"github.com/rlverify/rlverify/policy"
)

// An audit keeps the external environment's store proxies up from its first
// plan to its last: stopped between plans, they would be a store outage
// nobody declared, and a store client backing off from it could fail the
// next plan's first requests by its failure mode.
func TestAuditKeepsTheStoreProxyUpBetweenPlans(t *testing.T) {
	store, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer store.Close()
	go func() {
		for {
			c, err := store.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	port, err := redisproc.FreePort()
	require.NoError(t, err)
	listen := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	// The service holds one connection to its store through the proxy, as a
	// pool's idle connection would, and answers every request.
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer svc.Close()
	connected := make(chan struct{})
	go func() {
		for {
			if c, err := net.DialTimeout("tcp", listen, time.Second); err == nil {
				defer c.Close()
				close(connected)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()

	var between []error
	_, err = rlverify.Audit(context.Background(), rlverify.AuditOptions{
		Attack: rlverify.AttackOptions{
			Targets:     []string{svc.URL},
			Policy:      policy.Default(),
			Environment: envs.External{StoreProxies: []envs.ProxySpec{{Listen: listen, Upstream: store.Addr().String()}}},
		},
		Plans: []string{"concurrent-burst", "retry-after"},
		Dir:   t.TempDir(),
		OnPlan: func(plan, _ string, out *rlverify.Outcome) error {
			c, err := net.DialTimeout("tcp", listen, time.Second)
			if err == nil {
				c.Close()
			}
			between = append(between, err)
			return nil
		},
	})
	require.NoError(t, err)
	<-connected
	require.Len(t, between, 2)
	for i, err := range between {
		require.NoError(t, err, "the store proxy listens after plan %d", i+1)
	}
	c, err := net.DialTimeout("tcp", listen, time.Second)
	if err == nil {
		c.Close()
	}
	require.Error(t, err, "the audit stops its store proxy at the end")
}
