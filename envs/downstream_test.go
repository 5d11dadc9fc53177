package envs

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/internal/testsvc"
)

// The downstream readers are tested against a service we did not write:
// testsvc's upstream counters, in its JSON and Prometheus formats.
func TestDownstreamReadersOnAServicesOwnCounters(t *testing.T) {
	up := testsvc.NewUpstream()
	w, err := testsvc.NewWindowed(testsvc.WindowedConfig{Common: testsvc.Common{Upstream: up}})
	require.NoError(t, err)
	url, stop := testsvc.Serve(w)
	defer stop()
	for i := 0; i < 3; i++ {
		resp, err := http.Get(url + "/search/x?api_key=k1")
		require.NoError(t, err)
		resp.Body.Close()
	}
	resp, err := http.Get(url + "/search/x?api_key=k2")
	require.NoError(t, err)
	resp.Body.Close()
	want := []history.Sink{{Key: "k1", Arrivals: 3}, {Key: "k2", Arrivals: 1}, {Key: "*", Arrivals: 4}}

	ctx := context.Background()
	got, err := (&JSONCounter{URL: url + testsvc.UpstreamPath, TotalPath: testsvc.TotalJSONPath, ByKeyPath: testsvc.ByKeyJSONPath}).Read(ctx, time.Now())
	require.NoError(t, err)
	require.Equal(t, want, got)
	got, err = (&JSONCounter{URL: url + testsvc.UpstreamPath, ByKeyPath: testsvc.ByKeyJSONPath}).Read(ctx, time.Now())
	require.NoError(t, err)
	require.Equal(t, want, got, "the total is the sum when no total path is given")
	got, err = (&PromCounter{URL: url + testsvc.MetricsPath, Metric: "upstream_forwarded_total", Label: "api_key"}).Read(ctx, time.Now())
	require.NoError(t, err)
	require.Equal(t, want, got)
}

func TestDownstreamReadersRefuseWhatTheyCannotRead(t *testing.T) {
	up := testsvc.NewUpstream()
	w, err := testsvc.NewWindowed(testsvc.WindowedConfig{Common: testsvc.Common{Upstream: up}})
	require.NoError(t, err)
	url, stop := testsvc.Serve(w)
	defer stop()
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("<html>")) }))
	defer html.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		r    SinkReader
		want string
	}{
		{"unreachable", &JSONCounter{URL: deadURL, TotalPath: "a"}, "is unreachable"},
		{"not json", &JSONCounter{URL: html.URL, TotalPath: "a"}, "not JSON"},
		{"path matches nothing", &JSONCounter{URL: url + testsvc.UpstreamPath, TotalPath: "forwarded.sum"}, `path forwarded.sum matches nothing: no "sum" (there: by_key, total)`},
		{"path is not an object", &JSONCounter{URL: url + testsvc.UpstreamPath, ByKeyPath: "forwarded.total"}, "is a number, want an object"},
		{"no paths", &JSONCounter{URL: url + testsvc.UpstreamPath}, "give the path"},
		{"404", &JSONCounter{URL: url + "/nope", TotalPath: "a"}, "status 404"},
		{"metric absent", &PromCounter{URL: url + testsvc.MetricsPath, Metric: "upstream_total", Label: "api_key"}, "no metric upstream_total after requests were sent (there: gateway_responses_total"},
		{"label absent", &PromCounter{URL: url + testsvc.MetricsPath, Metric: "gateway_responses_total", Label: "api_key"}, "has no label api_key"},
		{"not prometheus", &PromCounter{URL: html.URL, Metric: "m", Label: "l"}, "not Prometheus text"},
		{"sink unreachable", &RemoteSink{URL: deadURL}, "is unreachable"},
		{"not a sink", &RemoteSink{URL: url + "/search"}, "sink"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if pc, ok := tc.r.(*PromCounter); ok {
				// The first reading may find no samples yet; a later one must.
				_, _ = pc.Read(ctx, time.Now())
			}
			if tc.name == "label absent" {
				// The unrelated metric exists only once something was answered.
				resp, err := http.Get(url + "/search/x?api_key=k")
				require.NoError(t, err)
				resp.Body.Close()
			}
			_, err := tc.r.Read(ctx, time.Now())
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}
