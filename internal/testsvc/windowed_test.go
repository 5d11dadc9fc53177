package testsvc

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func search(key string) req {
	return req{target: WindowedPrefix + "items?q=shoes&" + WindowedParam + "=" + url.QueryEscape(key)}
}

func newWindowed(t *testing.T, c *fakeClock, q Quirks) *Windowed {
	return must[*Windowed](t)(NewWindowed(WindowedConfig{Common: Common{Now: c.Now, Quirks: q}}))
}

func TestWindowedRoutesAndIdentity(t *testing.T) {
	tests := []struct {
		name string
		req  req
		want int
	}{
		{"a search", search("k1"), http.StatusOK},
		{"any path under /search/", req{target: "/search/a/b/?api_key=k1"}, http.StatusOK},
		{"/search itself", req{target: "/search?api_key=k1"}, http.StatusNotFound},
		{"elsewhere", req{target: "/api?api_key=k1"}, http.StatusNotFound},
		{"POST", req{method: http.MethodPost, target: "/search/x?api_key=k1"}, http.StatusMethodNotAllowed},
		{"no key", req{target: "/search/x"}, http.StatusUnauthorized},
		{"empty key", req{target: "/search/x?api_key="}, http.StatusUnauthorized},
		{"key in a header is not read", req{target: "/search/x", header: hdr("X-API-Key", "k1")}, http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := tt.req.send(newWindowed(t, newClock(), Quirks{}))
			assert.Equal(t, tt.want, w.Code, w.Body.String())
		})
	}
}

func TestWindowedAnchoredAtFirstRequest(t *testing.T) {
	c := newClock()
	s := newWindowed(t, c, Quirks{})
	full := append(repeat(http.StatusOK, 10), http.StatusTooManyRequests)

	// Key a opens its window at t0, key b at t0+700ms: each resets 2s
	// after its own first request, not at an epoch-aligned instant.
	assert.Equal(t, full, search("a").statuses(s, 11))
	c.At(700 * time.Millisecond)
	assert.Equal(t, full, search("b").statuses(s, 11))

	c.At(2*time.Second - time.Nanosecond)
	assert.Equal(t, http.StatusTooManyRequests, search("a").send(s).Code)
	c.At(2 * time.Second)
	assert.Equal(t, full, search("a").statuses(s, 11), "a's window closed at t0+2s")
	assert.Equal(t, http.StatusTooManyRequests, search("b").send(s).Code, "b's window is open until t0+2.7s")
	c.At(2700 * time.Millisecond)
	assert.Equal(t, full, search("b").statuses(s, 11))

	// A key that was quiet opens its next window at its next request.
	c.At(5500 * time.Millisecond)
	assert.Equal(t, full, search("a").statuses(s, 11))
	c.At(7499 * time.Millisecond)
	assert.Equal(t, http.StatusTooManyRequests, search("a").send(s).Code)
	c.At(7500 * time.Millisecond)
	assert.Equal(t, http.StatusOK, search("a").send(s).Code)
}

func TestWindowedDictionaryAndEpochHeaders(t *testing.T) {
	c := newClock()
	s := newWindowed(t, c, Quirks{})
	closes := t0.Add(2 * time.Second) // x:x:11.3 → 12 in whole seconds, rounded up
	w := search("k").send(s)
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "limit=10, remaining=9, reset=2", w.Header().Get("RateLimit"))
	assert.Equal(t, "10", w.Header().Get("X-RateLimit-Limit"))
	assert.Equal(t, "9", w.Header().Get("X-RateLimit-Remaining"))
	assert.Equal(t, strconv.FormatInt(closes.Unix()+1, 10), w.Header().Get("X-RateLimit-Reset"))
	assert.Empty(t, w.Header().Get("Retry-After"))

	c.At(1500 * time.Millisecond)
	search("k").statuses(s, 9)
	w = search("k").send(s)
	require.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Equal(t, "limit=10, remaining=0, reset=1", w.Header().Get("RateLimit"), "0.5s rounded up")
	assert.Equal(t, "0", w.Header().Get("X-RateLimit-Remaining"))
	assert.Equal(t, strconv.FormatInt(closes.Unix()+1, 10), w.Header().Get("X-RateLimit-Reset"))
	assert.Equal(t, "1", w.Header().Get("Retry-After"))
}

func TestWindowedConfigErrors(t *testing.T) {
	for _, cfg := range []WindowedConfig{
		{Limit: -1}, {Window: time.Microsecond}, {Window: 48 * time.Hour},
		{Common: Common{Quirks: Quirks{DeductOnReject: true}}},
	} {
		_, err := NewWindowed(cfg)
		assert.Error(t, err, fmt.Sprintf("%+v", cfg))
	}
}
