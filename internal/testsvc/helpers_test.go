package testsvc

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeClock is a simulated clock for the services' Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

// t0 is 300ms past a whole second, so windows anchored at a first request
// differ from windows aligned to the epoch.
var t0 = time.Date(2031, 5, 6, 7, 8, 9, 300_000_000, time.UTC)

func newClock() *fakeClock { return &fakeClock{t: t0} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// At sets the clock to t0 + d.
func (c *fakeClock) At(d time.Duration) {
	c.mu.Lock()
	c.t = t0.Add(d)
	c.mu.Unlock()
}

// req is a request to send in process.
type req struct {
	method, target string
	header         http.Header
	body           string
}

func (q req) send(h http.Handler) *httptest.ResponseRecorder {
	method := q.method
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if q.body != "" {
		body = strings.NewReader(q.body)
	}
	r := httptest.NewRequest(method, q.target, body)
	for k, vs := range q.header {
		for _, v := range vs {
			r.Header.Add(k, v)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// statuses sends q n times and returns the statuses.
func (q req) statuses(h http.Handler, n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = q.send(h).Code
	}
	return s
}

// repeat returns n copies of status.
func repeat(status, n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = status
	}
	return s
}

// hdr builds a header from name, value pairs; a name may repeat.
func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// must fails the test on a constructor error.
func must[T any](t *testing.T) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		require.NoError(t, err)
		return v
	}
}
