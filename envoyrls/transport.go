package envoyrls

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rlverify/rlverify/headers"
)

// Scheme is the URL scheme of a rate-limit service target: grpc://HOST:PORT.
const Scheme = "grpc"

// Transport is an http.RoundTripper that answers a request to
// grpc://HOST:PORT with the decision of the rate-limit service there: it
// builds the call with Call, and makes of the answer an HTTP response (see
// the package comment). A gRPC error, a deadline or an answer with the code
// UNKNOWN is an error, as no response is. Safe for concurrent use.
type Transport struct {
	Client *Client
	// Call builds the request for one HTTP request (its domain and
	// descriptors from the run's key and tier).
	Call func(*http.Request) (*Request, error)
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body.Close()
	}
	if r.URL.Scheme != Scheme {
		return nil, fmt.Errorf("envoyrls: %s is not a %s:// target", r.URL.Redacted(), Scheme)
	}
	call, err := t.Call(r)
	if err != nil {
		return nil, err
	}
	resp, err := t.Client.ShouldRateLimit(r.Context(), r.URL.Host, call)
	if err != nil {
		return nil, err
	}
	return Synthesize(resp, r)
}

// ErrUnknownCode is an answer whose overall code is UNKNOWN: no decision.
var ErrUnknownCode = errors.New("the rate-limit service answered overall code UNKNOWN (no decision)")

// Synthesize is the HTTP response Envoy's rate-limit filter would turn the
// decision into, as far as the checks read it: 200 for OK, 429 for
// OVER_LIMIT; X-RateLimit-Limit, -Remaining and -Reset (relative whole
// seconds, rounded up) from the deciding descriptor's status (the first
// over its limit, else the one with the least remaining); and the
// service's response_headers_to_add after them.
func Synthesize(resp *Response, req *http.Request) (*http.Response, error) {
	var status int
	switch resp.Overall {
	case CodeOK:
		status = http.StatusOK
	case CodeOverLimit:
		status = http.StatusTooManyRequests
	default:
		return nil, fmt.Errorf("%w: code %s", ErrUnknownCode, resp.Overall)
	}
	h := http.Header{}
	if s := Deciding(resp); s != nil && s.Limit != nil {
		h.Set(headers.XRateLimitLimit, strconv.FormatUint(uint64(s.Limit.RequestsPerUnit), 10))
		h.Set(headers.XRateLimitRemaining, strconv.FormatUint(uint64(s.LimitRemaining), 10))
		if s.HasReset {
			v, _ := headers.FormatXReset(s.UntilReset, headers.ResetRelative, time.Time{})
			h.Set(headers.XRateLimitReset, v)
		}
	}
	for _, x := range resp.Headers {
		if x.Key == "" || strings.ContainsAny(x.Key+x.Value, "\r\n") {
			continue // not a header a proxy could send
		}
		h.Add(x.Key, x.Value)
	}
	return &http.Response{
		Status: strconv.Itoa(status) + " " + http.StatusText(status), StatusCode: status,
		Proto: "HTTP/2.0", ProtoMajor: 2, Header: h, Body: io.NopCloser(strings.NewReader("")),
		ContentLength: 0, Request: req,
	}, nil
}

// Deciding is the status that decided resp: the first over its limit when
// refused, else the limited one with the least remaining (as Envoy's
// filter picks the headers it writes), else the first; nil when there is
// none.
func Deciding(resp *Response) *Status {
	var best *Status
	for i := range resp.Statuses {
		s := &resp.Statuses[i]
		if resp.Overall == CodeOverLimit {
			if s.Code == CodeOverLimit {
				return s
			}
			continue
		}
		if s.Limit != nil && (best == nil || best.Limit == nil || s.LimitRemaining < best.LimitRemaining) {
			best = s
		}
	}
	if best == nil && len(resp.Statuses) > 0 {
		best = &resp.Statuses[0]
	}
	return best
}

// Unlimited reports an OK whose descriptors no limit applied to: the
// service matched no rule (envoyproxy/ratelimit answers so for a
// descriptor its configuration does not know).
func (r *Response) Unlimited() bool {
	if r.Overall != CodeOK {
		return false
	}
	for _, s := range r.Statuses {
		if s.Limit != nil {
			return false
		}
	}
	return true
}

// Probe asks the service at addr for one decision on call and says what is
// wrong with the answer for a run: not the protocol, a gRPC error (an
// unknown domain), or an OK with no limit ("unlimited: no descriptor
// matched"). It counts one hit on call's descriptors.
func (c *Client) Probe(ctx context.Context, addr string, call *Request) (*Response, error) {
	resp, err := c.ShouldRateLimit(ctx, addr, call)
	if err != nil {
		var se *StatusError
		if !errors.As(err, &se) && !errors.Is(err, ErrNotRateLimitService) && ctx.Err() == nil {
			// A transport error: an HTTP/1 server closes or resets the
			// connection at the HTTP/2 preface as often as it answers it.
			if why := Sniff(ctx, addr); why != "" {
				return nil, fmt.Errorf("%s: %w (it does not speak HTTP/2: %s): %v", addr, ErrNotRateLimitService, why, err)
			}
		}
		return nil, err
	}
	if _, err := Synthesize(resp, nil); err != nil {
		return resp, fmt.Errorf("%s: %w", addr, err)
	}
	if resp.Unlimited() {
		return resp, fmt.Errorf("%s: %w: domain %q, descriptors %s: the service applies no limit to them (its configuration has no rule for these keys, or the domain is not the one it loaded)",
			addr, ErrUnlimited, call.Domain, FormatDescriptors(call.Descriptors))
	}
	return resp, nil
}

// ErrUnlimited is an OK with no limit on any descriptor.
var ErrUnlimited = errors.New("unlimited: no descriptor matched")

// FormatDescriptors writes descriptors as [(k=v, k=v), (k=v)], values quoted
// when they hold anything but plain characters.
func FormatDescriptors(ds [][]Entry) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range ds {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for j, e := range d {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString(quoteIfNeeded(e.Key) + "=" + quoteIfNeeded(e.Value))
		}
		b.WriteByte(')')
	}
	b.WriteByte(']')
	return b.String()
}

func quoteIfNeeded(s string) string {
	for _, r := range s {
		if !(r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return strconv.Quote(s)
		}
	}
	if s == "" {
		return `""`
	}
	return s
}

// Sniff says why addr is not an HTTP/2 server ("" when it answered the
// client preface with a SETTINGS frame, as every HTTP/2 server must): what
// an HTTP/1 server answered instead, or that it closed the connection.
func Sniff(ctx context.Context, addr string) string {
	d := net.Dialer{Timeout: 2 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return ""
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	// The client preface, then an empty SETTINGS frame.
	preface := append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0, 0, 0, 4, 0, 0, 0, 0, 0)
	if _, err := conn.Write(preface); err != nil {
		return "it closed the connection at the HTTP/2 preface"
	}
	b := make([]byte, 64)
	n, _ := io.ReadAtLeast(conn, b, 9)
	b = b[:n]
	switch {
	case n == 0:
		return "it closed the connection at the HTTP/2 preface"
	case bytes.HasPrefix(b, []byte("HTTP/")):
		line, _, _ := bytes.Cut(b, []byte("\r\n"))
		return fmt.Sprintf("it answered %q", line)
	case n >= 9 && b[3] == 4:
		return ""
	}
	return fmt.Sprintf("its first bytes %q are not an HTTP/2 frame", b)
}
