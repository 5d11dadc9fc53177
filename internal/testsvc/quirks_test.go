package testsvc

import (
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func quirks(t *testing.T, specs ...string) Quirks {
	var q Quirks
	for _, s := range specs {
		require.NoError(t, q.Set(s))
	}
	return q
}

// burst sends n requests to h at once, from n goroutines, and counts the
// statuses.
func burst(h http.Handler, q req, n int) map[int]int {
	var mu sync.Mutex
	got := map[int]int{}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			code := q.send(h).Code
			mu.Lock()
			got[code]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	return got
}

// count returns how many of statuses equal status.
func count(statuses []int, status int) int {
	n := 0
	for _, s := range statuses {
		if s == status {
			n++
		}
	}
	return n
}

// TestQuirkEffects runs one observation per quirk on the correct service
// and on the quirky one: the quirk changes it as documented.
func TestQuirkEffects(t *testing.T) {
	withXFF := func(q req, xff string) req {
		h := q.header.Clone()
		h.Set("X-Forwarded-For", xff)
		q.header = h
		return q
	}
	tests := []struct {
		quirk   string
		observe func(t *testing.T, q Quirks) any
		honest  any
		quirky  any
	}{
		{"cut-keys=12", func(t *testing.T, q Quirks) any {
			s := newWindowed(t, newClock(), q)
			search("tenant-long-key-1").statuses(s, 10)
			short := search("short").send(s).Code
			return []int{search("tenant-long-key-2").send(s).Code, short}
		}, []int{200, 200}, []int{429, 200}},
		{"shared-prefix=4", func(t *testing.T, q Quirks) any {
			s := newWindowed(t, newClock(), q)
			search("acme-eu").statuses(s, 10)
			return []int{search("acme-us").send(s).Code, search("zeta-us").send(s).Code}
		}, []int{200, 200}, []int{429, 200}},
		{"last-identity-wins", func(t *testing.T, q Quirks) any {
			s := newWindowed(t, newClock(), q)
			search("k").statuses(s, 10)
			code := req{target: "/search/x?api_key=k&api_key=fresh"}.send(s).Code
			return []any{code, s.g.up.Count("k"), s.g.up.Count("fresh")}
		}, []any{429, int64(10), int64(0)}, []any{200, int64(11), int64(0)}},
		{"last-identity-wins", func(t *testing.T, q Quirks) any {
			// orders authenticates the first token; the quirky limiter keys on the last.
			o := newOrders(t, newClock(), q)
			order("fr_alpha").statuses(o, 5)
			r := order("fr_alpha")
			r.header = r.header.Clone()
			r.header.Add("Authorization", "Bearer anything")
			return r.send(o).Code
		}, 429, 201},
		{"first-identity-wins", func(t *testing.T, q Quirks) any {
			// A service serving the last occurrence; the quirky limiter keys on the first.
			s := must[*Windowed](t)(NewWindowed(WindowedConfig{Common: Common{Now: newClock().Now, Quirks: q, ServeLast: true}}))
			search("k").statuses(s, 10)
			code := req{target: "/search/x?api_key=fresh&api_key=k"}.send(s).Code
			return []any{code, s.g.up.Count("k"), s.g.up.Count("fresh")}
		}, []any{429, int64(10), int64(0)}, []any{200, int64(11), int64(0)}},
		{"limit-skipped", func(t *testing.T, q Quirks) any {
			s := must[*Windowed](t)(NewWindowed(WindowedConfig{Common: Common{Now: newClock().Now, Quirks: q}, Skip: "int-"}))
			codes := search("int-1").statuses(s, 15)
			return []any{count(codes, http.StatusOK), s.g.up.Count("int-1"), search("k").statuses(s, 11)[10]}
		}, []any{15, int64(15), 429}, []any{10, int64(10), 429}},
		{"fold-case", func(t *testing.T, q Quirks) any {
			s := newWindowed(t, newClock(), q)
			search("Key").statuses(s, 10)
			return search("key").send(s).Code
		}, 200, 429},
		{"no-fold-case", func(t *testing.T, q Quirks) any {
			s := newSessions(t, newClock(), 0, q)
			session("key").statuses(s, 6)
			return []any{session("KEY").send(s).Code, s.g.up.Count("key")}
		}, []any{429, int64(6)}, []any{200, int64(7)}},
		{"trust-xff", func(t *testing.T, q Quirks) any {
			o := newOrders(t, newClock(), q)
			order("fr_alpha").statuses(o, 5)
			return withXFF(order("fr_alpha"), "203.0.113.9").send(o).Code
		}, 429, 201},
		{"deduct-on-reject", func(t *testing.T, q Quirks) any {
			c := newClock()
			o := newOrders(t, c, q)
			order("fr_alpha").statuses(o, 9) // 5 admitted, 4 refused
			c.At(400 * time.Millisecond)
			return order("fr_alpha").send(o).Code
		}, 201, 429},
		{"deduct-on-reject", func(t *testing.T, q Quirks) any {
			c := newClock()
			s := newSessions(t, c, 0, q)
			session("s").statuses(s, 6)
			c.At(time.Second)
			session("s").statuses(s, 2) // refused, and logged under the quirk
			c.At(2 * time.Second)
			return count(session("s").statuses(s, 6), http.StatusOK)
		}, 6, 4},
		{"racy=5ms", func(t *testing.T, q Quirks) any {
			got := burst(newWindowed(t, newClock(), q), search("k"), 30)
			return got[http.StatusOK] > 10
		}, false, true},
		{"forward-rejected", func(t *testing.T, q Quirks) any {
			s := newWindowed(t, newClock(), q)
			statuses := search("k").statuses(s, 15)
			return []int64{int64(count(statuses, http.StatusOK)), s.g.up.Count("k")}
		}, []int64{10, 10}, []int64{10, 15}},
		{"faster=2", func(t *testing.T, q Quirks) any {
			c := newClock()
			o := newOrders(t, c, q)
			order("fr_alpha").statuses(o, 5)
			c.At(200 * time.Millisecond)
			return order("fr_alpha").send(o).Code
		}, 429, 201},
		{"faster=2", func(t *testing.T, q Quirks) any {
			c := newClock()
			s := newWindowed(t, c, q)
			search("k").statuses(s, 10)
			c.At(time.Second)
			return search("k").send(s).Code
		}, 429, 200},
		{"capacity+1", func(t *testing.T, q Quirks) any {
			o := newOrders(t, newClock(), q)
			w := order("fr_alpha").send(o)
			return []any{1 + count(order("fr_alpha").statuses(o, 10), http.StatusCreated), w.Header().Get("RateLimit-Limit")}
		}, []any{5, "5"}, []any{6, "5"}},
		{"capacity+1", func(t *testing.T, q Quirks) any {
			return count(session("s").statuses(newSessions(t, newClock(), 0, q), 10), http.StatusOK)
		}, 6, 7},
		{"retry-after-down", func(t *testing.T, q Quirks) any {
			o := newOrders(t, newClock(), q)
			statuses := order("fr_alpha").statuses(o, 5)
			require.Equal(t, repeat(http.StatusCreated, 5), statuses)
			return order("fr_alpha").send(o).Header().Get("Retry-After")
		}, "1", "0"},
		{"retry-after-down", func(t *testing.T, q Quirks) any {
			s := newSessions(t, newClock(), 0, q)
			session("s").statuses(s, 6)
			ra, err := http.ParseTime(session("s").send(s).Header().Get("Retry-After"))
			require.NoError(t, err)
			return ra.Sub(t0)
		}, 2700 * time.Millisecond, 1700 * time.Millisecond},
		{"remaining-off-by-one", func(t *testing.T, q Quirks) any {
			w := order("fr_alpha").send(newOrders(t, newClock(), q))
			return w.Header().Get("RateLimit-Remaining")
		}, "4", "5"},
		{"remaining-off-by-one", func(t *testing.T, q Quirks) any {
			s := newWindowed(t, newClock(), q)
			search("k").statuses(s, 10)
			return search("k").send(s).Header().Get("RateLimit")
		}, "limit=10, remaining=0, reset=2", "limit=10, remaining=1, reset=2"},
	}
	for _, tt := range tests {
		t.Run(tt.quirk, func(t *testing.T) {
			assert.Equal(t, tt.honest, tt.observe(t, Quirks{}), "without the quirk")
			assert.Equal(t, tt.quirky, tt.observe(t, quirks(t, tt.quirk)), "with the quirk")
		})
	}
}

func TestQuirksSetAndString(t *testing.T) {
	q := quirks(t, "cut-keys=8", "racy", "faster=1.1", "capacity+1", "fail-open")
	assert.Equal(t, Quirks{CutKeys: 8, Racy: DefaultRacyPause, Faster: 1.1, CapacityPlusOne: true, FailOpen: true}, q)
	assert.Equal(t, "cut-keys=8,racy=2ms,faster=1.1,capacity+1,fail-open", q.String())
	assert.Equal(t, 10*time.Millisecond, quirks(t, "racy=10ms").Racy)

	for _, bad := range []struct{ spec, want string }{
		{"nope", "unknown quirk"},
		{"cut-keys", "needs a value"},
		{"cut-keys=0", "whole number"},
		{"cut-keys=x", "whole number"},
		{"shared-prefix=-2", "whole number"},
		{"faster=1", "other than 1"},
		{"faster=0", "factor"},
		{"faster=NaN", "factor"},
		{"racy=0s", "pause"},
		{"racy=2s", "pause"},
		{"fold-case=yes", "takes no value"},
	} {
		var q Quirks
		err := q.Set(bad.spec)
		require.Error(t, err, bad.spec)
		assert.Contains(t, err.Error(), bad.want, bad.spec)
	}
}

func TestQuirksApplyOnlyWhereTheyMean(t *testing.T) {
	for _, tt := range []struct {
		quirk string
		build func(Quirks) error
	}{
		{"no-fold-case", func(q Quirks) error {
			_, err := NewOrders(OrdersConfig{Common: Common{Quirks: q}, Keys: DefaultOrdersKeys()})
			return err
		}},
		{"no-fold-case", func(q Quirks) error { _, err := NewWindowed(WindowedConfig{Common: Common{Quirks: q}}); return err }},
		{"fold-case", func(q Quirks) error { _, err := NewSessions(SessionsConfig{Common: Common{Quirks: q}}); return err }},
		{"deduct-on-reject", func(q Quirks) error { _, err := NewWindowed(WindowedConfig{Common: Common{Quirks: q}}); return err }},
		{"fail-open", func(q Quirks) error { _, err := NewSessions(SessionsConfig{Common: Common{Quirks: q}}); return err }},
		{"no-fold-case", func(q Quirks) error {
			_, err := NewRedisBucket(RedisBucketConfig{Common: Common{Quirks: q}, Addr: "127.0.0.1:1"})
			return err
		}},
	} {
		err := tt.build(quirks(t, tt.quirk))
		require.Error(t, err, tt.quirk)
		assert.Contains(t, err.Error(), "does not have quirk "+tt.quirk)
	}
	// Which occurrence the limiter wrongly counts depends on which one the
	// service serves.
	_, err := NewWindowed(WindowedConfig{Common: Common{Quirks: quirks(t, "limit-skipped")}})
	require.ErrorContains(t, err, "needs a skip list")
	_, err = NewWindowed(WindowedConfig{Common: Common{Quirks: quirks(t, "first-identity-wins")}})
	require.ErrorContains(t, err, "needs a service that serves the last occurrence")
	_, err = NewWindowed(WindowedConfig{Common: Common{Quirks: quirks(t, "last-identity-wins"), ServeLast: true}})
	require.ErrorContains(t, err, "needs a service that serves the first occurrence")
}

// TestQuirkTableInPackageDoc keeps the package doc's table complete.
func TestQuirkTableInPackageDoc(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	for _, name := range QuirkNames() {
		found := false
		for _, line := range strings.Split(string(doc), "\n") {
			cell := strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(line, "//\t|"), " "))
			if strings.HasPrefix(line, "//\t| ") && (strings.HasPrefix(cell, name+" ") || strings.HasPrefix(cell, name+"=") || strings.HasPrefix(cell, name+"[")) {
				found = true
			}
		}
		assert.True(t, found, "quirk %s has no row in the package doc's table", name)
	}
}
