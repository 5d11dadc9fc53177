package testsvc

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The windowed service's routes, identity and defaults (policies/windowed.yaml).
const (
	WindowedPrefix        = "/search/"
	WindowedParam         = "api_key"
	DefaultWindowedLimit  = 10
	DefaultWindowedWindow = 2 * time.Second
)

// WindowedConfig configures the windowed service.
type WindowedConfig struct {
	Common
	// Limit is N requests per window; DefaultWindowedLimit when 0.
	Limit int64
	// Window is W; DefaultWindowedWindow when 0.
	Window time.Duration
	// Store holds the windows; a store of its own when nil.
	Store *Store
	// Epoch aligns the windows to Unix time (window k is [k·W, (k+1)·W))
	// instead of opening one at a key's first request.
	Epoch bool
	// Sliding makes it a sliding-window counter over epoch-aligned windows
	// (as Cloudflare describes theirs): a request is admitted while
	// prev·(1 − elapsed/W) + cur < N, the previous window's count fading.
	Sliding bool
	// Skip, when set, is a key prefix the service never limits (a skip
	// list, as middlewares offer for internal callers): such keys are
	// admitted without rate-limit headers. The honest policy then declares
	// them exempt.
	Skip string
}

// Windowed is the windowed service, an http.Handler in the manner of
// popular Node and Go middlewares: a fixed window anchored at the key's
// first request (it opens at a key's first hit and closes W later; the next
// opens at the first hit after that), N requests per window. GET on any
// path under WindowedPrefix (404 elsewhere, 405 for other methods); the key
// is the query parameter WindowedParam, as given (case-sensitive, not
// trimmed; 401 when missing). Admitted requests are answered 200, refused
// ones 429 with Retry-After (delay-seconds until the window closes,
// rounded up). Every decision carries the dictionary generation
// RateLimit: limit=N, remaining=R, reset=T (seconds until the window
// closes, rounded up) and X-RateLimit-Limit, -Remaining and -Reset, the
// reset as the Unix time (seconds, rounded up) at which the window closes.
type Windowed struct {
	g              *gate
	limit          int64
	window         time.Duration
	store          *Store
	epoch, sliding bool
	skip           string
}

// NewWindowed builds a windowed instance.
func NewWindowed(cfg WindowedConfig) (*Windowed, error) {
	g, err := newGate("windowed", cfg.Common, QuirkFoldCase, QuirkPerPath, QuirkLimitSkipped)
	if err != nil {
		return nil, err
	}
	if cfg.Quirks.LimitSkipped && cfg.Skip == "" {
		return nil, fmt.Errorf("testsvc: quirk %s needs a skip list (WindowedConfig.Skip)", QuirkLimitSkipped)
	}
	w := &Windowed{g: g, limit: cfg.Limit, window: cfg.Window, store: cfg.Store, epoch: cfg.Epoch || cfg.Sliding, sliding: cfg.Sliding, skip: cfg.Skip}
	if w.limit == 0 {
		w.limit = DefaultWindowedLimit
	}
	if w.window == 0 {
		w.window = DefaultWindowedWindow
	}
	if w.limit < 1 || w.limit > 1_000_000 {
		return nil, fmt.Errorf("testsvc: windowed: limit %d: want 1 … 1000000", w.limit)
	}
	if w.window < time.Millisecond || w.window > 24*time.Hour {
		return nil, fmt.Errorf("testsvc: windowed: window %s: want 1ms … 24h", w.window)
	}
	if w.store == nil {
		w.store = NewStore()
	}
	return w, nil
}

// ServeHTTP implements http.Handler.
func (s *Windowed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.g.internal(w, r) {
		return
	}
	if !strings.HasPrefix(r.URL.Path, WindowedPrefix) {
		s.g.reply(w, http.StatusNotFound, "text/plain; charset=utf-8", "Cannot "+r.Method+" "+r.URL.Path+"\n")
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		s.g.reply(w, http.StatusMethodNotAllowed, "text/plain; charset=utf-8", "Method Not Allowed\n")
		return
	}
	id, ok := s.g.identify(r, r.URL.Query()[WindowedParam], false, false)
	if !ok {
		s.g.reply(w, http.StatusUnauthorized, "text/plain; charset=utf-8", "missing ?"+WindowedParam+"=\n")
		return
	}
	okBody, _ := json.Marshal(map[string]any{"path": r.URL.Path, "results": []string{}})
	if s.skip != "" && strings.HasPrefix(id.declared, s.skip) && !s.g.q.LimitSkipped {
		s.g.settle(w, id, decision{allowed: true}, answer{http.StatusOK, "application/json", string(okBody) + "\n"}, answer{})
		return
	}
	now := s.g.now()
	var closes time.Time
	limKey := "windowed:" + id.limiter
	if s.g.q.PerPath {
		limKey += "|" + r.URL.Path // one window per route: the quirk
	}
	d := step(s.store, limKey, s.g.q.Racy, func(win fixedWindow, seen bool) (fixedWindow, decision) {
		win, d := s.hit(win, seen, now)
		closes = win.opened.Add(s.effectiveWindow())
		return win, d
	})
	h := w.Header()
	rem := s.g.remaining(d)
	h.Set("RateLimit", fmt.Sprintf("limit=%d, remaining=%d, reset=%d", d.limit, rem, seconds(d.reset, false)))
	h.Set("X-RateLimit-Limit", strconv.FormatInt(d.limit, 10))
	h.Set("X-RateLimit-Remaining", strconv.FormatInt(rem, 10))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(ceilUnix(closes), 10))
	if !d.allowed {
		s.g.retryAfter(h, d.retry)
	}
	s.g.settle(w, id, d,
		answer{http.StatusOK, "application/json", string(okBody) + "\n"},
		answer{http.StatusTooManyRequests, "text/plain; charset=utf-8", "Too many requests, please try again later.\n"})
}

// fixedWindow is one key's current window.
type fixedWindow struct {
	opened time.Time
	count  int64
	// prev is the previous window's count (sliding counter only).
	prev int64
}

func (s *Windowed) effectiveWindow() time.Duration {
	return time.Duration(float64(s.window) / s.g.q.speed())
}

// hit counts one request at now: a key's first request, or its first after
// its window closed, opens a new window.
func (s *Windowed) hit(win fixedWindow, seen bool, now time.Time) (fixedWindow, decision) {
	w := s.effectiveWindow()
	if s.epoch {
		return s.hitEpoch(win, seen, now, w)
	}
	if !seen || !now.Before(win.opened.Add(w)) {
		win = fixedWindow{opened: now}
	}
	d := decision{limit: s.limit}
	if win.count < s.g.q.capacity(s.limit) {
		win.count++
		d.allowed = true
	}
	d.remaining = s.g.q.capacity(s.limit) - win.count
	d.reset = win.opened.Add(w).Sub(now)
	if !d.allowed {
		d.retry = d.reset
	}
	return win, d
}

// hitEpoch counts one request at now in windows aligned to Unix time, as a
// fixed window or (sliding) a sliding-window counter.
func (s *Windowed) hitEpoch(win fixedWindow, seen bool, now time.Time, w time.Duration) (fixedWindow, decision) {
	start := time.Unix(0, now.UnixNano()-now.UnixNano()%int64(w))
	switch {
	case !seen:
		win = fixedWindow{opened: start}
	case start.Equal(win.opened.Add(w)):
		win = fixedWindow{opened: start, prev: win.count}
	case start.After(win.opened):
		win = fixedWindow{opened: start}
	}
	n := s.g.q.capacity(s.limit)
	end := win.opened.Add(w)
	frac := float64(now.Sub(win.opened)) / float64(w)
	est := float64(win.count)
	if s.sliding {
		est += float64(win.prev) * (1 - frac)
	}
	d := decision{limit: s.limit, reset: end.Sub(now)}
	if est+1 <= float64(n) {
		win.count++
		est++
		d.allowed = true
	}
	d.remaining = n - int64(math.Ceil(est))
	if !d.allowed {
		d.retry = d.reset
		if s.sliding && win.prev > 0 && win.count < n {
			// The previous window's weight falls below N − cur − 1 at x.
			x := 1 - float64(n-win.count-1)/float64(win.prev)
			d.retry = win.opened.Add(time.Duration(x * float64(w))).Sub(now)
		}
	}
	return win, d
}

// ceilUnix is t in Unix seconds, rounded up.
func ceilUnix(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}
