package testsvc

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// The sessions service's routes, identity and defaults (policies/sessions.yaml).
const (
	SessionsPrefix        = "/app/"
	SessionCookie         = "session"
	SessionsPolicyName    = "session"
	DefaultSessionsLimit  = 6
	DefaultSessionsWindow = 2 * time.Second
)

// SessionsConfig configures the sessions service.
type SessionsConfig struct {
	Common
	// Limit is N requests per rolling window; DefaultSessionsLimit when 0.
	Limit int64
	// Window is W; DefaultSessionsWindow when 0.
	Window time.Duration
	// Guard is a conservative guard: a slot the window has freed is used
	// again only Guard later (0: none). Real implementations have one
	// (timer or eviction granularity); the honest policy does not mention
	// it, and its advice (Retry-After, t=) is computed without it.
	Guard time.Duration
	// Store holds the logs; a store of its own when nil.
	Store *Store
}

// Sessions is the sessions service, an http.Handler: a sliding log of N
// requests per rolling W for each session. Any method on any path under
// SessionsPrefix (404 elsewhere); the key is the cookie SessionCookie,
// case-insensitive (folded to lower case, as the policy declares; 401
// when missing). Admitted requests are answered 200, refused ones 429 with
// Retry-After as an HTTP-date (rounded up to the second). Every decision
// carries the structured generation: RateLimit: "session";r=R;t=T (T
// seconds until the log is empty, rounded up) and RateLimit-Policy:
// "session";q=N;w=W (W in seconds, rounded up).
type Sessions struct {
	g      *gate
	limit  int64
	window time.Duration
	guard  time.Duration
	store  *Store
}

// NewSessions builds a sessions instance.
func NewSessions(cfg SessionsConfig) (*Sessions, error) {
	g, err := newGate("sessions", cfg.Common, QuirkNoFoldCase, QuirkDeductOnReject)
	if err != nil {
		return nil, err
	}
	s := &Sessions{g: g, limit: cfg.Limit, window: cfg.Window, guard: cfg.Guard, store: cfg.Store}
	if s.limit == 0 {
		s.limit = DefaultSessionsLimit
	}
	if s.window == 0 {
		s.window = DefaultSessionsWindow
	}
	if s.limit < 1 || s.limit > 100_000 {
		return nil, fmt.Errorf("testsvc: sessions: limit %d: want 1 … 100000 (the log holds every request)", s.limit)
	}
	if s.window < time.Millisecond || s.window > 24*time.Hour {
		return nil, fmt.Errorf("testsvc: sessions: window %s: want 1ms … 24h", s.window)
	}
	if s.guard < 0 || s.guard > s.window {
		return nil, fmt.Errorf("testsvc: sessions: guard %s: want 0 … the window (%s)", s.guard, s.window)
	}
	if s.store == nil {
		s.store = NewStore()
	}
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Sessions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.g.internal(w, r) {
		return
	}
	if !strings.HasPrefix(r.URL.Path, SessionsPrefix) {
		s.g.reply(w, http.StatusNotFound, "text/html; charset=utf-8", "<h1>Not Found</h1>\n")
		return
	}
	var vals []string
	for _, c := range r.Cookies() {
		if c.Name == SessionCookie {
			vals = append(vals, c.Value)
		}
	}
	id, ok := s.g.identify(r, vals, true, true)
	if !ok {
		s.g.reply(w, http.StatusUnauthorized, "text/html; charset=utf-8", "<h1>Please sign in</h1>\n")
		return
	}
	now := s.g.now()
	d := step(s.store, "sessions:"+id.limiter, s.g.q.Racy, func(log []time.Time, _ bool) ([]time.Time, decision) {
		return s.record(log, now)
	})
	h := w.Header()
	h.Set("RateLimit", fmt.Sprintf("%q;r=%d;t=%d", SessionsPolicyName, s.g.remaining(d), seconds(d.reset, false)))
	h.Set("RateLimit-Policy", fmt.Sprintf("%q;q=%d;w=%d", SessionsPolicyName, d.limit, seconds(s.window, false)))
	if !d.allowed {
		h.Set("Retry-After", s.retryDate(now, d.retry))
	}
	s.g.settle(w, id, d,
		answer{http.StatusOK, "text/html; charset=utf-8", "<p>ok</p>\n"},
		answer{http.StatusTooManyRequests, "text/html; charset=utf-8", "<h1>Slow down</h1>\n"})
}

// record decides one request at now on a session's log (admission times,
// oldest first) and returns the new log; it never changes the one given.
// An entry counts while now < entry + W (+ the guard).
func (s *Sessions) record(log []time.Time, now time.Time) ([]time.Time, decision) {
	w := time.Duration(float64(s.window) / s.g.q.speed())
	live := make([]time.Time, 0, len(log)+1)
	for _, t := range log {
		if now.Before(t.Add(w + s.guard)) {
			live = append(live, t)
		}
	}
	n := s.g.q.capacity(s.limit)
	d := decision{limit: s.limit, allowed: int64(len(live)) < n}
	if d.allowed || s.g.q.DeductOnReject {
		live = append(live, now)
	}
	d.remaining = n - int64(len(live))
	if !d.allowed {
		// A slot frees when the log is back below n: at the (len-n+1)-th
		// oldest entry's expiry.
		d.retry = live[int64(len(live))-n].Add(w).Sub(now)
	}
	if len(live) > 0 {
		d.reset = live[len(live)-1].Add(w).Sub(now)
	}
	return live, d
}

// retryDate is Retry-After as an HTTP-date wait after now: rounded up to
// the second (never earlier than the wait), or down under retry-after-down.
func (s *Sessions) retryDate(now time.Time, wait time.Duration) string {
	at := now.Add(max(wait, 0))
	sec := at.Unix()
	if at.Nanosecond() > 0 && !s.g.q.RetryAfterDown {
		sec++
	}
	return time.Unix(sec, 0).UTC().Format(http.TimeFormat)
}
