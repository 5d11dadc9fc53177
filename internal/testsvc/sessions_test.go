package testsvc

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func page(cookie string) req {
	return req{target: SessionsPrefix + "dashboard", header: hdr("Cookie", cookie)}
}

func session(key string) req { return page(SessionCookie + "=" + key) }

func newSessions(t *testing.T, c *fakeClock, guard time.Duration, q Quirks) *Sessions {
	return must[*Sessions](t)(NewSessions(SessionsConfig{Common: Common{Now: c.Now, Quirks: q}, Guard: guard}))
}

func TestSessionsRoutesAndIdentity(t *testing.T) {
	tests := []struct {
		name string
		req  req
		want int
	}{
		{"a page", session("s1"), http.StatusOK},
		{"any method", req{method: http.MethodDelete, target: "/app/items/7", header: hdr("Cookie", "session=s1")}, http.StatusOK},
		{"among other cookies", page("theme=dark; session=s1; lang=en"), http.StatusOK},
		{"elsewhere", req{target: "/api/x", header: hdr("Cookie", "session=s1")}, http.StatusNotFound},
		{"no cookie", req{target: "/app/x"}, http.StatusUnauthorized},
		{"another cookie only", page("sid=s1"), http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := tt.req.send(newSessions(t, newClock(), 0, Quirks{}))
			assert.Equal(t, tt.want, w.Code, w.Body.String())
		})
	}
}

func TestSessionsSlidingLogAndStructuredHeaders(t *testing.T) {
	c := newClock()
	s := newSessions(t, c, 0, Quirks{})
	// N=6 per rolling 2s: three at t0, three at t0+1s.
	assert.Equal(t, repeat(http.StatusOK, 3), session("s").statuses(s, 3))
	c.At(time.Second)
	assert.Equal(t, repeat(http.StatusOK, 2), session("s").statuses(s, 2))
	w := session("s").send(s)
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, `"session";r=0;t=2`, w.Header().Get("RateLimit"), "empty 2s after the newest entry")
	assert.Equal(t, `"session";q=6;w=2`, w.Header().Get("RateLimit-Policy"))

	c.At(1500 * time.Millisecond)
	w = session("s").send(s)
	require.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Equal(t, `"session";r=0;t=2`, w.Header().Get("RateLimit"), "1.5s rounded up")
	ra, err := http.ParseTime(w.Header().Get("Retry-After"))
	require.NoError(t, err, "Retry-After is an HTTP-date")
	assert.Equal(t, t0.Add(2*time.Second).Truncate(time.Second).Add(time.Second), ra, "the oldest entry expires at t0+2s (x.3s), rounded up")

	c.At(2*time.Second - time.Nanosecond)
	assert.Equal(t, http.StatusTooManyRequests, session("s").send(s).Code)
	c.At(2 * time.Second)
	assert.Equal(t, append(repeat(http.StatusOK, 3), http.StatusTooManyRequests), session("s").statuses(s, 4), "t0's three entries expired")
	c.At(3 * time.Second)
	assert.Equal(t, append(repeat(http.StatusOK, 3), http.StatusTooManyRequests), session("s").statuses(s, 4), "t0+1s's three expired")
}

func TestSessionsFoldCaseAndFirstCookie(t *testing.T) {
	s := newSessions(t, newClock(), 0, Quirks{})
	assert.Equal(t, repeat(http.StatusOK, 3), session("MiXeD").statuses(s, 3))
	assert.Equal(t, repeat(http.StatusOK, 3), session("mixed").statuses(s, 3))
	assert.Equal(t, http.StatusTooManyRequests, session("MIXED").send(s).Code, "one session whatever the case")
	assert.Equal(t, http.StatusTooManyRequests, page("session=mixed; session=other").send(s).Code, "the first cookie counts")
	assert.Equal(t, http.StatusOK, page("session=other; session=mixed").send(s).Code)
	assert.Equal(t, map[string]int64{"mixed": 6, "other": 1}, s.g.up.ByKey(), "the upstream sees the folded key")
}

func TestSessionsCookieValueIsTrimmed(t *testing.T) {
	// The policy declares trim: true because Go's cookie parser drops the
	// white space around a value; keep it honest.
	s := newSessions(t, newClock(), 0, Quirks{})
	assert.Equal(t, http.StatusOK, page("session=  padded  ").send(s).Code)
	assert.Equal(t, map[string]int64{"padded": 1}, s.g.up.ByKey())
}

func TestSessionsConservativeGuard(t *testing.T) {
	const guard = 30 * time.Millisecond
	for _, g := range []time.Duration{0, guard} {
		c := newClock()
		s := newSessions(t, c, g, Quirks{})
		assert.Equal(t, append(repeat(http.StatusOK, 6), http.StatusTooManyRequests), session("s").statuses(s, 7))
		c.At(2 * time.Second)
		if g == 0 {
			assert.Equal(t, http.StatusOK, session("s").send(s).Code, "no guard: the slot is free at t0+W")
			continue
		}
		w := session("s").send(s)
		assert.Equal(t, http.StatusTooManyRequests, w.Code, "guard: not yet at t0+W")
		ra, err := http.ParseTime(w.Header().Get("Retry-After"))
		require.NoError(t, err)
		assert.False(t, ra.Before(t0.Add(2*time.Second)), "the advice does not count the guard, rounded up it still covers it here")
		c.At(2*time.Second + guard - time.Nanosecond)
		assert.Equal(t, http.StatusTooManyRequests, session("s").send(s).Code)
		c.At(2*time.Second + guard)
		assert.Equal(t, append(repeat(http.StatusOK, 6), http.StatusTooManyRequests), session("s").statuses(s, 7), "all six freed G after W")
	}
}

func TestSessionsConfigErrors(t *testing.T) {
	for _, cfg := range []SessionsConfig{
		{Limit: -3}, {Window: time.Nanosecond}, {Guard: -time.Millisecond}, {Guard: 3 * time.Second},
		{Common: Common{Quirks: Quirks{FoldCase: true}}},
	} {
		_, err := NewSessions(cfg)
		assert.Error(t, err, "%+v", cfg)
	}
}
