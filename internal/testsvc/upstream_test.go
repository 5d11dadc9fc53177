package testsvc

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func get(t *testing.T, url string, header http.Header) (int, http.Header, string) {
	t.Helper()
	r, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	for k, vs := range header {
		r.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(r)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(b)
}

// TestInstancesSharedAndLocalState runs three windowed instances over HTTP,
// once on one Store and once each on its own, all reporting to one
// Upstream.
func TestInstancesSharedAndLocalState(t *testing.T) {
	for _, shared := range []bool{true, false} {
		c := newClock()
		up := NewUpstream()
		store := NewStore()
		var hs []http.Handler
		for i := 0; i < 3; i++ {
			cfg := WindowedConfig{Common: Common{Now: c.Now, Upstream: up, Instance: []string{"i0", "i1", "i2"}[i]}, Store: store}
			if !shared {
				cfg.Store = NewStore()
			}
			hs = append(hs, must[*Windowed](t)(NewWindowed(cfg)))
		}
		urls, stop := ServeN(hs...)
		t.Cleanup(stop)
		admitted := 0
		for i := 0; i < 60; i++ {
			code, h, _ := get(t, urls[i%3]+"/search/x?api_key=k", nil)
			assert.Equal(t, []string{"i0", "i1", "i2"}[i%3], h.Get(InstanceHeader))
			if code == http.StatusOK {
				admitted++
			}
		}
		want := 10
		if !shared {
			want = 30
		}
		assert.Equal(t, want, admitted, "shared=%v", shared)
		assert.Equal(t, int64(want), up.Total(), "one upstream behind every instance")
		for _, u := range urls {
			_, _, body := get(t, u+UpstreamPath, nil)
			assert.JSONEq(t, `{"forwarded": {"total": `+jsonInt(want)+`, "by_key": {"k": `+jsonInt(want)+`}}}`, body, "every instance shows the shared upstream")
		}
		stop()
	}
}

func jsonInt(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestUpstreamJSONAndPrometheus(t *testing.T) {
	o := newOrders(t, newClock(), Quirks{})
	url, stop := Serve(o)
	defer stop()
	o.g.up.Forward("ext")
	for _, k := range []string{"fr_alpha", "fr_alpha", "pd_alpha"} {
		order(k).send(o)
	}
	order("fr_zulu").send(o) // 401, not forwarded

	code, h, body := get(t, url+UpstreamPath, nil)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "application/json", h.Get("Content-Type"))
	var doc map[string]map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &doc))
	assert.Equal(t, map[string]any{"total": 4.0, "by_key": map[string]any{"fr_alpha": 2.0, "pd_alpha": 1.0, "ext": 1.0}}, doc["forwarded"])

	code, _, text := get(t, url+MetricsPath, nil)
	require.Equal(t, http.StatusOK, code)
	lines := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		lines[l] = true
	}
	for _, want := range []string{
		`upstream_forwarded_total{api_key="fr_alpha"} 2`,
		`upstream_forwarded_total{api_key="pd_alpha"} 1`,
		`upstream_forwarded_total{api_key="ext"} 1`,
		`gateway_responses_total{code="201"} 3`,
		`gateway_responses_total{code="401"} 1`,
		"# TYPE upstream_forwarded_total counter",
	} {
		assert.True(t, lines[want], "metrics lack %q:\n%s", want, text)
	}
	assert.NotContains(t, text, "fr_zulu")
}

func TestServeStopIsIdempotent(t *testing.T) {
	url, stop := Serve(http.NotFoundHandler())
	code, _, _ := get(t, url+"/x", nil)
	assert.Equal(t, http.StatusNotFound, code)
	stop()
	stop()
	_, err := http.Get(url + "/x")
	assert.Error(t, err, "stopped")
}
