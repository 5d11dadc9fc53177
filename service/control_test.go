package service

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/envs/redisproc"
	"github.com/rlverify/rlverify/internal/envtest"
	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policy"
)

// TestControlEndpoint: each request to the control endpoint and what it
// does to the instance's clock and rule source.
func TestControlEndpoint(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := NewSkewClock(func() time.Time { return t0 }, time.Second)
	rules := &RuleSource{}
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	full := &Control{Next: next, Clock: clk, Rules: rules}
	bare := &Control{Next: next}

	for _, tc := range []struct {
		name       string
		ctl        *Control
		method     string
		target     string
		wantStatus int
		wantBody   string
		wantOffset time.Duration // the clock's offset afterwards
		wantDown   bool
	}{
		{"skew an instance", full, http.MethodPost, ControlFaultPath + "?kind=clock-skew&param=%2B2s", http.StatusNoContent, "", 3 * time.Second, false},
		{"skew backwards", full, http.MethodPost, ControlFaultPath + "?kind=clock-skew&param=-2s", http.StatusNoContent, "", -time.Second, false},
		{"clear the skew", full, http.MethodDelete, ControlFaultPath + "?kind=clock-skew", http.StatusNoContent, "", time.Second, false},
		{"garbage skew", full, http.MethodPost, ControlFaultPath + "?kind=clock-skew&param=soon", http.StatusBadRequest, `param "soon"`, time.Second, false},
		{"rules down", full, http.MethodPost, ControlFaultPath + "?kind=rules-down", http.StatusNoContent, "", time.Second, true},
		{"rules back", full, http.MethodDelete, ControlFaultPath + "?kind=rules-down", http.StatusNoContent, "", time.Second, false},
		{"store faults are not an instance's", full, http.MethodPost, ControlFaultPath + "?kind=store-down", http.StatusBadRequest, "takes clock-skew, rules-down", time.Second, false},
		{"an instance without a rule source", bare, http.MethodPost, ControlFaultPath + "?kind=rules-down", http.StatusBadRequest, "takes no faults", time.Second, false},
		{"GET is not a fault", full, http.MethodGet, ControlFaultPath + "?kind=rules-down", http.StatusMethodNotAllowed, "POST to inject", time.Second, false},
		{"drain without replicas", full, http.MethodPost, ControlDrainPath, http.StatusNotFound, "no regional replica", time.Second, false},
		{"drain with GET", full, http.MethodGet, ControlDrainPath, http.StatusMethodNotAllowed, "use POST", time.Second, false},
		{"everything else goes to the service", full, http.MethodGet, "/api", http.StatusTeapot, "", time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			tc.ctl.ServeHTTP(w, httptest.NewRequest(tc.method, tc.target, nil))
			require.Equal(t, tc.wantStatus, w.Code, w.Body.String())
			require.Contains(t, w.Body.String(), tc.wantBody)
			require.Equal(t, t0.Add(tc.wantOffset), clk.Now())
			require.Equal(t, tc.wantDown, rules.Down())
		})
	}
}

// TestStandaloneThroughControl: a standalone instance (what `rlverify
// serve --control` runs) takes rules-down and clock-skew through the
// ControlClient, and a replicated region instance hands over what it
// admitted exactly once.
func TestStandaloneThroughControl(t *testing.T) {
	ctx := context.Background()
	entry, err := catalog.Lookup("token-bucket", catalog.Memory)
	require.NoError(t, err)
	h, release, err := NewStandalone(StandaloneOptions{Policy: policy.Default(), Entry: entry, Control: true})
	require.NoError(t, err)
	defer release()
	srv := httptest.NewServer(h)
	defer srv.Close()
	cc := ControlClient{}

	call := func(key string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api", nil)
		req.Header.Set("X-API-Key", key)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	require.Empty(t, call("paid-a").Header.Get(FallbackHeader))
	require.NoError(t, cc.Fault(ctx, srv.URL, FaultRulesDown, "", true))
	resp := call("paid-a")
	require.Equal(t, FallbackRules, resp.Header.Get(FallbackHeader), "conservative defaults while the rules are down")
	require.Equal(t, "10", resp.Header.Get("X-RateLimit-Limit"), "held to the fallback tier's limits")
	require.NoError(t, cc.Fault(ctx, srv.URL, FaultRulesDown, "", false))
	require.Empty(t, call("paid-a").Header.Get(FallbackHeader))

	require.NoError(t, cc.Fault(ctx, srv.URL, FaultClockSkew, "2s", true))
	require.NoError(t, cc.Fault(ctx, srv.URL, FaultClockSkew, "", false))
	err = cc.Fault(ctx, srv.URL, "store-slow", "200ms", true)
	require.ErrorContains(t, err, "400 Bad Request")
	require.ErrorContains(t, err, "takes clock-skew, rules-down")
	_, err = cc.Drain(ctx, srv.URL)
	require.ErrorContains(t, err, "404")

	if err := redisproc.Available(); err != nil {
		envtest.SkipOrFail(t, "the regional drain needs redis-server: %v", err)
	}
	rs, err := redisproc.Start()
	require.NoError(t, err)
	defer rs.Stop()
	entry, err = catalog.Lookup("token-bucket", catalog.Redis)
	require.NoError(t, err)
	h, release2, err := NewStandalone(StandaloneOptions{Policy: policy.Default(), Entry: entry, RedisAddr: rs.Addr, RegionMode: RegionReplicated, Control: true})
	require.NoError(t, err)
	defer release2()
	srv2 := httptest.NewServer(h)
	defer srv2.Close()
	srv = srv2
	for i := 0; i < 3; i++ {
		require.Equal(t, http.StatusOK, call("free-drain").StatusCode)
	}
	got, err := cc.Drain(ctx, srv2.URL)
	require.NoError(t, err)
	require.Len(t, got["free"], 1)
	for _, n := range got["free"] {
		require.EqualValues(t, 3, n)
	}
	got, err = cc.Drain(ctx, srv2.URL)
	require.NoError(t, err)
	require.Empty(t, got, "drained once")

	_, _, err = NewStandalone(StandaloneOptions{Policy: policy.Default(), Entry: entry, RedisAddr: rs.Addr, RegionMode: "sideways"})
	require.ErrorContains(t, err, `region mode "sideways"`)
}

func TestControlTokenIsRequiredWhenSet(t *testing.T) {
	ctl := &Control{Next: http.NotFoundHandler(), Rules: &RuleSource{}, Token: "s3cret"}
	srv := httptest.NewServer(ctl)
	defer srv.Close()
	ctx := context.Background()
	err := ControlClient{}.Fault(ctx, srv.URL, FaultRulesDown, "", true)
	require.ErrorContains(t, err, "401")
	require.False(t, ctl.Rules.Down())
	require.NoError(t, ControlClient{Token: "s3cret"}.Fault(ctx, srv.URL, FaultRulesDown, "", true))
	require.True(t, ctl.Rules.Down())
	require.ErrorContains(t, ControlClient{Token: "wrong"}.Fault(ctx, srv.URL, FaultRulesDown, "", false), "401")
}

// TestControlLimitChange: limit-change through the control endpoint applies
// a change the instance's policy declares, by name, to its limiter and its
// headers; DELETE gives the declared limits back; a change not declared, or
// none named, is refused; an instance whose policy declares none takes none.
func TestControlLimitChange(t *testing.T) {
	pol, err := policy.Parse("p.yaml", []byte(`name: p
tiers:
  - name: free
    key_prefix: "free-"
    limits:
      - capacity: 10
        rate: 5/s
default_tier: free
headers:
  x_ratelimit: true
changes:
  - name: double
    tier: free
    limits:
      - capacity: 20
        rate: 10/s
`))
	require.NoError(t, err)
	entry, err := catalog.Lookup("token-bucket", catalog.Memory)
	require.NoError(t, err)
	lims, err := BuildLimiters(pol, entry, catalog.Env{}, nil)
	require.NoError(t, err)
	svc := &Service{Policy: pol, Limiters: lims}
	ctl := &Control{Next: svc, Limits: svc}
	limitOf := func(key string) string {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("X-API-Key", key)
		ctl.ServeHTTP(w, r)
		return w.Header().Get("X-RateLimit-Limit")
	}
	for _, tc := range []struct {
		name, method, target string
		wantStatus           int
		wantBody, wantLimit  string
	}{
		{"raise", http.MethodPost, ControlFaultPath + "?kind=limit-change&param=double", http.StatusNoContent, "", "20"},
		{"a change not declared", http.MethodPost, ControlFaultPath + "?kind=limit-change&param=triple", http.StatusBadRequest, `no limit change "triple" (it declares: double)`, "20"},
		{"no change named", http.MethodPost, ControlFaultPath + "?kind=limit-change", http.StatusBadRequest, "param needs the name", "20"},
		{"undo", http.MethodDelete, ControlFaultPath + "?kind=limit-change", http.StatusNoContent, "", "10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			ctl.ServeHTTP(w, httptest.NewRequest(tc.method, tc.target, nil))
			require.Equal(t, tc.wantStatus, w.Code, w.Body.String())
			require.Contains(t, w.Body.String(), tc.wantBody)
			require.Equal(t, tc.wantLimit, limitOf("free-"+strings.ReplaceAll(tc.name, " ", "-")))
		})
	}
	bare := &Control{Next: svc, Limits: &Service{Policy: policy.Default(), Limiters: lims}}
	w := httptest.NewRecorder()
	bare.ServeHTTP(w, httptest.NewRequest(http.MethodPost, ControlFaultPath+"?kind=limit-change&param=double", nil))
	require.Equal(t, http.StatusBadRequest, w.Code)
	require.Contains(t, w.Body.String(), "takes no faults")
}
