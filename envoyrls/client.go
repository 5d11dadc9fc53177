package envoyrls

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Method is the path of ShouldRateLimit.
const Method = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"

// maxMessage bounds a response message; a decision is a few hundred bytes.
const maxMessage = 1 << 20

// ErrNotRateLimitService is a target that does not answer the protocol: not
// gRPC at all, or a gRPC server without the RateLimitService.
var ErrNotRateLimitService = errors.New("not an Envoy rate-limit service")

// StatusError is a gRPC error status the service answered.
type StatusError struct {
	Code    int
	Message string
}

// gRPC codes named in messages.
var grpcCodes = map[int]string{1: "CANCELLED", 2: "UNKNOWN", 3: "INVALID_ARGUMENT", 4: "DEADLINE_EXCEEDED",
	5: "NOT_FOUND", 7: "PERMISSION_DENIED", 8: "RESOURCE_EXHAUSTED", 12: "UNIMPLEMENTED", 13: "INTERNAL",
	14: "UNAVAILABLE", 16: "UNAUTHENTICATED"}

func (e *StatusError) Error() string {
	name := grpcCodes[e.Code]
	if name == "" {
		name = "code " + strconv.Itoa(e.Code)
	}
	s := "gRPC " + name
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Code == 12 {
		s += " (" + ErrNotRateLimitService.Error() + ")"
	}
	return s
}

// Unwrap makes an UNIMPLEMENTED answer ErrNotRateLimitService: a gRPC
// server without the service.
func (e *StatusError) Unwrap() error {
	if e.Code == 12 {
		return ErrNotRateLimitService
	}
	return nil
}

// Client calls ShouldRateLimit on one address. The zero value is not
// useful; use NewClient. It is safe for concurrent use.
type Client struct {
	hc      *http.Client
	timeout time.Duration
}

// NewClient returns a client whose calls end after timeout (sent to the
// service as grpc-timeout too), over unencrypted HTTP/2 connections kept
// alive between calls.
func NewClient(timeout time.Duration) *Client {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{
		Proxy:              nil,
		DialContext:        (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext,
		Protocols:          p,
		DisableCompression: true,
		IdleConnTimeout:    90 * time.Second,
		// HTTP/2 multiplexes: a few connections carry a burst of
		// thousands of calls (the http2 package's stream limit per
		// connection is the service's).
		MaxIdleConnsPerHost: 16,
	}
	return &Client{hc: &http.Client{Transport: tr}, timeout: timeout}
}

// CloseIdleConnections closes the connections not in use.
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// ShouldRateLimit asks the service at addr (host:port) for a decision.
func (c *Client) ShouldRateLimit(ctx context.Context, addr string, r *Request) (*Response, error) {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	msg := r.Marshal()
	body := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(body[1:], uint32(len(msg)))
	body = append(body, msg...)
	u := url.URL{Scheme: "http", Host: addr, Path: Method}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/grpc")
	hr.Header.Set("Te", "trailers")
	if dl, ok := ctx.Deadline(); ok {
		// grpc-timeout in milliseconds (at most 8 digits).
		ms := max(time.Until(dl).Milliseconds(), 1)
		hr.Header.Set("Grpc-Timeout", strconv.FormatInt(min(ms, 99_999_999), 10)+"m")
	}
	resp, err := c.hc.Do(hr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("ShouldRateLimit at %s: deadline: %w", addr, err)
		}
		return nil, fmt.Errorf("ShouldRateLimit at %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "application/grpc") {
		return nil, fmt.Errorf("%s: %w (it answered HTTP %d, content type %q, not gRPC)", addr, ErrNotRateLimitService, resp.StatusCode, ct)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxMessage+5+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("ShouldRateLimit at %s: deadline: %w", addr, err)
		}
		return nil, fmt.Errorf("ShouldRateLimit at %s: read the answer: %w", addr, err)
	}
	// A trailers-only answer carries the status in the headers.
	st := resp.Trailer.Get("Grpc-Status")
	msgText := resp.Trailer.Get("Grpc-Message")
	if st == "" {
		st, msgText = resp.Header.Get("Grpc-Status"), resp.Header.Get("Grpc-Message")
	}
	if st != "" && st != "0" {
		code, _ := strconv.Atoi(st)
		if m, err := url.PathUnescape(msgText); err == nil {
			msgText = m
		}
		return nil, fmt.Errorf("ShouldRateLimit at %s: %w", addr, &StatusError{Code: code, Message: msgText})
	}
	if st == "" {
		return nil, fmt.Errorf("ShouldRateLimit at %s: the answer has no grpc-status", addr)
	}
	if len(data) < 5 {
		return nil, fmt.Errorf("ShouldRateLimit at %s: the answer has no message (%d bytes)", addr, len(data))
	}
	if data[0] != 0 {
		return nil, fmt.Errorf("ShouldRateLimit at %s: the answer is compressed (flag %d), which was not asked for", addr, data[0])
	}
	n := binary.BigEndian.Uint32(data[1:5])
	if n > maxMessage || int(n) != len(data)-5 {
		return nil, fmt.Errorf("ShouldRateLimit at %s: the answer's message is %d bytes, its frame says %d", addr, len(data)-5, n)
	}
	var out Response
	if err := out.Unmarshal(data[5:]); err != nil {
		return nil, fmt.Errorf("ShouldRateLimit at %s: %w", addr, err)
	}
	return &out, nil
}
