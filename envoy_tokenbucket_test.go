package rlverify_test

import (
	"context"
	"fmt"
	"math"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// bucketRLS is a rate-limit service written for the tests, unlike
// envoyproxy/ratelimit in every way the protocol leaves open: grpc-go and
// go-control-plane's generated types (not envoyproxy/ratelimit's server),
// a token bucket in memory (not fixed windows in Redis), one descriptor
// entry (api_key) rather than nested ones, an unknown domain refused with
// NOT_FOUND rather than answered OK, duration_until_reset the time until
// the bucket is full, and Retry-After among response_headers_to_add.
type bucketRLS struct {
	rlsv3.UnimplementedRateLimitServiceServer
	domain   string
	capacity float64
	rate     float64 // tokens per second
	now      func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func (s *bucketRLS) ShouldRateLimit(_ context.Context, r *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if r.GetDomain() != s.domain {
		return nil, status.Errorf(codes.NotFound, "no such domain %q", r.GetDomain())
	}
	if len(r.GetDescriptors()) != 1 || len(r.GetDescriptors()[0].GetEntries()) != 1 || r.GetDescriptors()[0].GetEntries()[0].GetKey() != "api_key" {
		return nil, status.Error(codes.InvalidArgument, "want one descriptor: api_key")
	}
	key := r.GetDescriptors()[0].GetEntries()[0].GetValue()
	now := s.now()
	s.mu.Lock()
	b := s.buckets[key]
	if b == nil {
		b = &bucket{tokens: s.capacity, at: now}
		s.buckets[key] = b
	}
	b.tokens = math.Min(s.capacity, b.tokens+now.Sub(b.at).Seconds()*s.rate)
	b.at = now
	code := rlsv3.RateLimitResponse_OK
	var hdrs []*corev3.HeaderValue
	if b.tokens >= 1 {
		b.tokens--
	} else {
		code = rlsv3.RateLimitResponse_OVER_LIMIT
		wait := math.Ceil((1 - b.tokens) / s.rate)
		hdrs = append(hdrs, &corev3.HeaderValue{Key: "retry-after", Value: fmt.Sprint(int(wait))})
	}
	full := time.Duration((s.capacity - b.tokens) / s.rate * float64(time.Second))
	st := &rlsv3.RateLimitResponse_DescriptorStatus{
		Code:               code,
		CurrentLimit:       &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: uint32(s.capacity), Unit: rlsv3.RateLimitResponse_RateLimit_SECOND},
		LimitRemaining:     uint32(b.tokens),
		DurationUntilReset: durationpb.New(full),
	}
	s.mu.Unlock()
	return &rlsv3.RateLimitResponse{OverallCode: code, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{st}, ResponseHeadersToAdd: hdrs}, nil
}

// serveGRPC serves srv's services on a loopback port until the test ends
// and returns grpc://ADDR.
func serveGRPC(t *testing.T, register func(*grpc.Server)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	register(s)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return "grpc://" + l.Addr().String()
}

// startBucketRLS serves a bucketRLS of 10 tokens refilled at 10/s for
// domain "orders".
func startBucketRLS(t *testing.T) string {
	return serveGRPC(t, func(s *grpc.Server) {
		rlsv3.RegisterRateLimitServiceServer(s, &bucketRLS{domain: "orders", capacity: 10, rate: 10, now: time.Now, buckets: map[string]*bucket{}})
	})
}

// bucketPolicy is the honest policy of startBucketRLS's service.
const bucketPolicy = `name: bucket-rls
tiers:
  - name: all
    key_prefix: ""
    limits:
      - algorithm: token-bucket
        capacity: 10
        rate: 10/s
default_tier: all
headers:
  retry_after: true
  x_ratelimit: true
  x_ratelimit_reset: relative
ratelimit_service:
  domain: orders
  descriptors:
    - {key: api_key, value: "{key}"}
`

var _ = strings.Contains
