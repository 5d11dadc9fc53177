package envoyrls_test

import (
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rlverify/rlverify/envoyrls"
	"github.com/rlverify/rlverify/headers"
)

// TestRequestMarshalsAsGoControlPlane: our encoding of a request is read by
// go-control-plane's generated type as the same request.
func TestRequestMarshalsAsGoControlPlane(t *testing.T) {
	for _, r := range []envoyrls.Request{
		{Domain: "api", Descriptors: [][]envoyrls.Entry{{{Key: "tenant", Value: "free-a"}, {Key: "plan", Value: "free"}}}},
		{Domain: "d", Descriptors: [][]envoyrls.Entry{{{Key: "k", Value: ""}}, {{Key: "remote_address", Value: "10.0.0.1"}}}, HitsAddend: 3},
		{Domain: "ünïcode", Descriptors: nil},
	} {
		var got rlsv3.RateLimitRequest
		require.NoError(t, proto.Unmarshal(r.Marshal(), &got))
		assert.Equal(t, r.Domain, got.GetDomain())
		assert.Equal(t, r.HitsAddend, got.GetHitsAddend())
		require.Len(t, got.GetDescriptors(), len(r.Descriptors))
		for i, d := range r.Descriptors {
			require.Len(t, got.GetDescriptors()[i].GetEntries(), len(d))
			for j, e := range d {
				assert.Equal(t, e.Key, got.GetDescriptors()[i].GetEntries()[j].GetKey())
				assert.Equal(t, e.Value, got.GetDescriptors()[i].GetEntries()[j].GetValue())
			}
		}
	}
}

// TestResponseUnmarshalsFromGoControlPlane: what go-control-plane's type
// encodes, we read, unknown fields (quota, dynamic metadata) skipped.
func TestResponseUnmarshalsFromGoControlPlane(t *testing.T) {
	limit := &rlsv3.RateLimitResponse_RateLimit{Name: "per-tenant", RequestsPerUnit: 5, Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE}
	for _, c := range []struct {
		name string
		in   *rlsv3.RateLimitResponse
		want envoyrls.Response
	}{
		{"ok", &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{
			{Code: rlsv3.RateLimitResponse_OK, CurrentLimit: limit, LimitRemaining: 4, DurationUntilReset: durationpb.New(1500 * time.Millisecond)}}},
			envoyrls.Response{Overall: envoyrls.CodeOK, Statuses: []envoyrls.Status{
				{Code: envoyrls.CodeOK, Limit: &envoyrls.Limit{Name: "per-tenant", RequestsPerUnit: 5, Unit: 2}, LimitRemaining: 4, UntilReset: 1500 * time.Millisecond, HasReset: true}}}},
		{"over, headers, raw value, quota", &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OVER_LIMIT,
			Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{Code: rlsv3.RateLimitResponse_OVER_LIMIT, CurrentLimit: limit,
				Quota: &rlsv3.RateLimitResponse_Quota{Requests: 3}}},
			ResponseHeadersToAdd: []*corev3.HeaderValue{{Key: "retry-after", Value: "7"}, {Key: "x-raw", RawValue: []byte("v")}},
			RawBody:              []byte("too many")},
			envoyrls.Response{Overall: envoyrls.CodeOverLimit, Statuses: []envoyrls.Status{
				{Code: envoyrls.CodeOverLimit, Limit: &envoyrls.Limit{Name: "per-tenant", RequestsPerUnit: 5, Unit: 2}}},
				Headers: []envoyrls.Header{{Key: "retry-after", Value: "7"}, {Key: "x-raw", Value: "v"}}}},
		{"no rule matched", &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{Code: rlsv3.RateLimitResponse_OK}}},
			envoyrls.Response{Overall: envoyrls.CodeOK, Statuses: []envoyrls.Status{{Code: envoyrls.CodeOK}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := proto.Marshal(c.in)
			require.NoError(t, err)
			var got envoyrls.Response
			require.NoError(t, got.Unmarshal(b))
			assert.Equal(t, c.want, got)
		})
	}
}

func TestResponseUnmarshalRefusesGarbage(t *testing.T) {
	for _, b := range [][]byte{{0x0a}, {0x12, 0x05, 0x08}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}} {
		var r envoyrls.Response
		assert.Error(t, r.Unmarshal(b), "%x", b)
	}
}

// TestSynthesize: the decision as the checks read it.
func TestSynthesize(t *testing.T) {
	lim := func(n uint32) *envoyrls.Limit { return &envoyrls.Limit{RequestsPerUnit: n, Unit: 1} }
	for _, c := range []struct {
		name   string
		in     envoyrls.Response
		status int
		want   headers.Fields
		err    string
	}{
		{"ok", envoyrls.Response{Overall: envoyrls.CodeOK, Statuses: []envoyrls.Status{{Code: envoyrls.CodeOK, Limit: lim(5), LimitRemaining: 3, UntilReset: 300 * time.Millisecond, HasReset: true}}},
			200, headers.Fields{XLimit: "5", XRemaining: "3", XReset: "1"}, ""},
		{"over: the refusing descriptor", envoyrls.Response{Overall: envoyrls.CodeOverLimit, Statuses: []envoyrls.Status{
			{Code: envoyrls.CodeOK, Limit: lim(100), LimitRemaining: 50},
			{Code: envoyrls.CodeOverLimit, Limit: lim(5), UntilReset: 2 * time.Second, HasReset: true}},
			Headers: []envoyrls.Header{{Key: "Retry-After", Value: "2"}}},
			429, headers.Fields{XLimit: "5", XRemaining: "0", XReset: "2", RetryAfter: "2"}, ""},
		{"ok: the least remaining", envoyrls.Response{Overall: envoyrls.CodeOK, Statuses: []envoyrls.Status{
			{Code: envoyrls.CodeOK, Limit: lim(100), LimitRemaining: 50}, {Code: envoyrls.CodeOK}, {Code: envoyrls.CodeOK, Limit: lim(5), LimitRemaining: 1}}},
			200, headers.Fields{XLimit: "5", XRemaining: "1"}, ""},
		{"no limit: no fields", envoyrls.Response{Overall: envoyrls.CodeOK, Statuses: []envoyrls.Status{{Code: envoyrls.CodeOK}}}, 200, headers.Fields{}, ""},
		{"a header with a line break is dropped", envoyrls.Response{Overall: envoyrls.CodeOK, Headers: []envoyrls.Header{{Key: "Retry-After", Value: "1\r\nX: y"}}}, 200, headers.Fields{}, ""},
		{"unknown", envoyrls.Response{}, 0, headers.Fields{}, "overall code UNKNOWN"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, err := envoyrls.Synthesize(&c.in, nil)
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.status, resp.StatusCode)
			assert.Equal(t, c.want, headers.FromHTTP(resp.Header))
		})
	}
}

func TestUnlimited(t *testing.T) {
	assert.True(t, (&envoyrls.Response{Overall: envoyrls.CodeOK, Statuses: []envoyrls.Status{{}}}).Unlimited())
	assert.True(t, (&envoyrls.Response{Overall: envoyrls.CodeOK}).Unlimited())
	assert.False(t, (&envoyrls.Response{Overall: envoyrls.CodeOK, Statuses: []envoyrls.Status{{}, {Limit: &envoyrls.Limit{}}}}).Unlimited())
	assert.False(t, (&envoyrls.Response{Overall: envoyrls.CodeOverLimit}).Unlimited())
}

func TestFormatDescriptors(t *testing.T) {
	assert.Equal(t, `[(tenant=free-a, plan=free), (x="a b\n", y="")]`, envoyrls.FormatDescriptors([][]envoyrls.Entry{
		{{Key: "tenant", Value: "free-a"}, {Key: "plan", Value: "free"}}, {{Key: "x", Value: "a b\n"}, {Key: "y"}}}))
}
