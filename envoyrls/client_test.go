package envoyrls_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rlverify/rlverify/envoyrls"
)

// fakeRLS answers every call with answer (a grpc-go server: the other
// side of our hand-written client).
type fakeRLS struct {
	rlsv3.UnimplementedRateLimitServiceServer
	answer func(*rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error)
}

func (f *fakeRLS) ShouldRateLimit(_ context.Context, r *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return f.answer(r)
}

func serve(t testing.TB, answer func(*rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error)) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(s, &fakeRLS{answer: answer})
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return l.Addr().String()
}

func TestClientAgainstGRPCGo(t *testing.T) {
	seen := make(chan *rlsv3.RateLimitRequest, 1)
	addr := serve(t, func(r *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
		seen <- r
		return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OVER_LIMIT}, nil
	})
	c := envoyrls.NewClient(5 * time.Second)
	defer c.CloseIdleConnections()
	resp, err := c.ShouldRateLimit(context.Background(), addr, &envoyrls.Request{Domain: "api", Descriptors: [][]envoyrls.Entry{{{Key: "k", Value: "v"}}}})
	require.NoError(t, err)
	assert.Equal(t, envoyrls.CodeOverLimit, resp.Overall)
	r := <-seen
	assert.Equal(t, "api", r.GetDomain())
	assert.Equal(t, "v", r.GetDescriptors()[0].GetEntries()[0].GetValue())
}

func TestClientErrors(t *testing.T) {
	for _, c := range []struct {
		name   string
		answer func(*rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error)
		want   string
	}{
		{"a status", func(*rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
			return nil, status.Error(codes.Unavailable, "redis is down: dial 127.0.0.1:6379")
		}, "gRPC UNAVAILABLE: redis is down: dial 127.0.0.1:6379"},
		{"a deadline", func(*rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
			time.Sleep(time.Second)
			return &rlsv3.RateLimitResponse{}, nil
		}, "DEADLINE_EXCEEDED"},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr := serve(t, c.answer)
			cl := envoyrls.NewClient(100 * time.Millisecond)
			defer cl.CloseIdleConnections()
			_, err := cl.ShouldRateLimit(context.Background(), addr, &envoyrls.Request{Domain: "api"})
			require.Error(t, err)
			if c.name == "a deadline" {
				// grpc-go may answer DEADLINE_EXCEEDED itself (grpc-timeout)
				// or the client's own deadline ends the call first.
				assert.Regexp(t, "DEADLINE_EXCEEDED|deadline", err.Error())
				return
			}
			assert.Contains(t, err.Error(), c.want)
			var se *envoyrls.StatusError
			require.ErrorAs(t, err, &se)
			assert.NotErrorIs(t, err, envoyrls.ErrNotRateLimitService)
		})
	}
}

// ExampleClient_ShouldRateLimit asks a rate-limit service for one decision.
func ExampleClient_ShouldRateLimit() {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	s := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(s, &fakeRLS{answer: func(*rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
		return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{
			{Code: rlsv3.RateLimitResponse_OK, CurrentLimit: &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: 5, Unit: rlsv3.RateLimitResponse_RateLimit_SECOND}, LimitRemaining: 4}}}, nil
	}})
	go func() { _ = s.Serve(l) }()
	defer s.Stop()

	c := envoyrls.NewClient(5 * time.Second)
	defer c.CloseIdleConnections()
	resp, err := c.ShouldRateLimit(context.Background(), l.Addr().String(), &envoyrls.Request{
		Domain:      "api",
		Descriptors: [][]envoyrls.Entry{{{Key: "tenant", Value: "acme"}}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	st := resp.Statuses[0]
	fmt.Println(resp.Overall, st.Limit.RequestsPerUnit, "per", envoyrls.UnitDuration(st.Limit.Unit), "remaining", st.LimitRemaining)
	// Output: OK 5 per 1s remaining 4
}

// TestNotARateLimitService: an HTTP/1 server, and an HTTP/2 one that does
// not answer gRPC, are ErrNotRateLimitService with what they answered.
func TestNotARateLimitService(t *testing.T) {
	h1 := httptest.NewServer(http.NotFoundHandler())
	defer h1.Close()
	h2 := httptest.NewUnstartedServer(http.NotFoundHandler())
	h2.Config.Protocols = new(http.Protocols)
	h2.Config.Protocols.SetUnencryptedHTTP2(true)
	h2.Start()
	defer h2.Close()
	for _, c := range []struct {
		name, addr, want string
	}{
		{"HTTP/1", h1.Listener.Addr().String(), "it does not speak HTTP/2"},
		{"HTTP/2, not gRPC", h2.Listener.Addr().String(), `answered HTTP 404, content type "text/plain; charset=utf-8", not gRPC`},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := envoyrls.NewClient(2 * time.Second)
			defer cl.CloseIdleConnections()
			_, err := cl.Probe(context.Background(), c.addr, &envoyrls.Request{Domain: "api"})
			require.ErrorIs(t, err, envoyrls.ErrNotRateLimitService)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}
