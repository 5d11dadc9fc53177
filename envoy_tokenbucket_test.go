package rlverify_test

import (
	"context"
	"fmt"
	"math"
	"net"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/attacks"
	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/envoyrls"
	"github.com/rlverify/rlverify/internal/envtest"
	"github.com/rlverify/rlverify/policy"
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

// TestServiceTargetOptions: what a grpc:// target needs is an option error
// (exit 2) before anything starts.
func TestServiceTargetOptions(t *testing.T) {
	plan, err := attacks.Load("concurrent-burst")
	require.NoError(t, err)
	svc := envoyPolicyAs(t, "fixed-window", "")
	plain := policy.Default()
	for _, c := range []struct {
		name    string
		targets []string
		pol     *policy.Policy
		field   string
		want    string
	}{
		{"no ratelimit_service", []string{"grpc://127.0.0.1:1"}, plain, "Policy", "declares no ratelimit_service"},
		{"a mix", []string{"grpc://127.0.0.1:1", "http://127.0.0.1:2"}, svc, "Targets", "mixes grpc:// rate-limit services with HTTP services"},
		{"a path", []string{"grpc://127.0.0.1:1/v1"}, svc, "Targets", "without a path"},
		{"no port", []string{"grpc://127.0.0.1"}, svc, "Targets", "want grpc://HOST:PORT"},
		{"remote", []string{"grpc://192.0.2.1:8081"}, svc, "Targets", "192.0.2.1"},
		{"a request shape", []string{"grpc://127.0.0.1:1"}, svc, "Request", "method, path, headers and body do not apply to a rate-limit service"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := rlverify.AttackOptions{Plan: plan, Targets: c.targets, Policy: c.pol}
			if c.field == "Request" {
				o.Request.Method = "POST"
			}
			_, err := rlverify.Prepare(o)
			var oe *rlverify.OptionError
			require.ErrorAs(t, err, &oe)
			assert.Equal(t, c.field, oe.Field)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

// TestTokenBucketRateLimitService: the plans that judge envoyproxy/ratelimit
// judge a rate-limit service built otherwise: its token bucket passes a
// burst and the retry-after plan, whose Retry-After reaches the checks from
// the service's response_headers_to_add.
func TestTokenBucketRateLimitService(t *testing.T) {
	target := startBucketRLS(t)
	pol, err := policy.Parse("bucket-rls.yaml", []byte(bucketPolicy))
	require.NoError(t, err)
	a, err := rlverify.Audit(context.Background(), rlverify.AuditOptions{
		Attack: rlverify.AttackOptions{Targets: []string{target}, Policy: pol, MaxDuration: time.Minute},
		Plans:  []string{"concurrent-burst", "retry-after"},
	})
	require.NoError(t, err)
	text := auditText(t, a)
	require.Equal(t, checks.Pass, a.Verdict, text)
	for _, name := range []string{"oversell", "under-admission", "retry-after", "headers"} {
		assert.Equal(t, checks.Pass, property(a, name).Verdict, "%s\n%s", name, text)
	}
}

// TestServiceUnfit: a target no run could judge ends before any load with
// the reason, never a PASS: descriptors no rule matches (the service
// answers OK with no limit), an unknown domain (answered so by
// envoyproxy/ratelimit, refused by another service), a target that is not
// a rate-limit service (HTTP, or gRPC without the service). An audit stops
// at the first plan.
func TestServiceUnfit(t *testing.T) {
	rl := envtest.StartEnvoyRateLimit(t, envoyConfig, 1)
	bucket := startBucketRLS(t)
	healthOnly := serveGRPC(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, health.NewServer()) })
	unmatched := "ratelimit_service:\n  domain: rlverify\n  descriptors:\n    - {key: user, value: \"{key}\"}\n"
	otherDomain := "ratelimit_service:\n  domain: rlverify-typo\n  descriptors:\n    - {key: tenant, value: \"{key}\"}\n    - {key: plan, value: \"{tier}\"}\n"
	bucketDomain := "ratelimit_service:\n  domain: payments\n  descriptors:\n    - {key: api_key, value: \"{key}\"}\n"
	for _, c := range []struct {
		name, target, svc string
		want              []string
		notRLS            bool
	}{
		{"descriptors match no rule", rl.Targets[0], unmatched, []string{"unlimited: no descriptor matched", `domain "rlverify"`, "user=free-rlverify-probe-"}, false},
		{"unknown domain, answered OK", rl.Targets[0], otherDomain, []string{"unlimited: no descriptor matched", `domain "rlverify-typo"`}, false},
		{"unknown domain, refused", bucket, bucketDomain, []string{"NOT_FOUND", `no such domain "payments"`, `domain "payments"`}, false},
		{"gRPC without the service", healthOnly, "", []string{"not an Envoy rate-limit service", "UNIMPLEMENTED"}, true},
		{"an HTTP service", "grpc://" + rl.HTTP[0], "", []string{"not an Envoy rate-limit service", "does not speak HTTP/2"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := rlverify.Audit(context.Background(), rlverify.AuditOptions{
				Attack: rlverify.AttackOptions{Targets: []string{c.target}, Policy: envoyPolicyAs(t, "fixed-window", c.svc), MaxDuration: time.Minute},
				Plans:  []string{"concurrent-burst", "idle-refill"},
			})
			require.ErrorIs(t, err, rlverify.ErrServiceUnfit)
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Contains(t, err.Error(), "no further plan was run")
			if c.notRLS {
				assert.ErrorIs(t, err, envoyrls.ErrNotRateLimitService)
			}
		})
	}
}
