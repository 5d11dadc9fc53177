package testsvc

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const skuBody = `{"sku": "SKU-1", "qty": 2}`

func order(key string) req {
	return req{method: http.MethodPost, target: OrdersPath, body: skuBody,
		header: hdr("Authorization", "Bearer "+key, "Content-Type", "application/json")}
}

func newOrders(t *testing.T, c *fakeClock, q Quirks) *Orders {
	return must[*Orders](t)(NewOrders(OrdersConfig{Common: Common{Now: c.Now, Quirks: q}, Keys: DefaultOrdersKeys()}))
}

func TestOrdersRoutesAuthAndBody(t *testing.T) {
	json := hdr("Content-Type", "application/json")
	withAuth := func(h map[string][]string, auth ...string) map[string][]string {
		out := hdr()
		for k, v := range h {
			out[k] = v
		}
		for _, a := range auth {
			out.Add("Authorization", a)
		}
		return out
	}
	tests := []struct {
		name string
		req  req
		want int
	}{
		{"the order", order("fr_alpha"), http.StatusCreated},
		{"paid key", order("pd_alpha"), http.StatusCreated},
		{"media type with parameters", req{http.MethodPost, OrdersPath, withAuth(hdr("Content-Type", "application/json; charset=utf-8"), "Bearer fr_alpha"), skuBody}, http.StatusCreated},
		{"scheme in any case, padded token", req{http.MethodPost, OrdersPath, withAuth(json, "bearer   fr_alpha  "), skuBody}, http.StatusCreated},
		{"other path", req{http.MethodPost, "/v1/order", withAuth(json, "Bearer fr_alpha"), skuBody}, http.StatusNotFound},
		{"trailing slash", req{http.MethodPost, OrdersPath + "/", withAuth(json, "Bearer fr_alpha"), skuBody}, http.StatusNotFound},
		{"root", req{http.MethodGet, "/", nil, ""}, http.StatusNotFound},
		{"GET", req{http.MethodGet, OrdersPath, withAuth(json, "Bearer fr_alpha"), ""}, http.StatusMethodNotAllowed},
		{"no Authorization", req{http.MethodPost, OrdersPath, json, skuBody}, http.StatusUnauthorized},
		{"Basic scheme", req{http.MethodPost, OrdersPath, withAuth(json, "Basic YTpi"), skuBody}, http.StatusUnauthorized},
		{"unknown key", order("fr_zulu"), http.StatusUnauthorized},
		{"key in another case", order("FR_alpha"), http.StatusUnauthorized},
		{"no Content-Type", req{http.MethodPost, OrdersPath, withAuth(nil, "Bearer fr_alpha"), skuBody}, http.StatusBadRequest},
		{"text/plain", req{http.MethodPost, OrdersPath, withAuth(hdr("Content-Type", "text/plain"), "Bearer fr_alpha"), skuBody}, http.StatusBadRequest},
		{"not JSON", req{http.MethodPost, OrdersPath, withAuth(json, "Bearer fr_alpha"), "sku=1"}, http.StatusBadRequest},
		{"no sku", req{http.MethodPost, OrdersPath, withAuth(json, "Bearer fr_alpha"), `{"qty": 1}`}, http.StatusBadRequest},
		{"sku not a string", req{http.MethodPost, OrdersPath, withAuth(json, "Bearer fr_alpha"), `{"sku": 7}`}, http.StatusBadRequest},
		{"empty body", req{http.MethodPost, OrdersPath, withAuth(json, "Bearer fr_alpha"), ""}, http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := newOrders(t, newClock(), Quirks{})
			w := tt.req.send(o)
			assert.Equal(t, tt.want, w.Code, w.Body.String())
			assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
			if tt.want == http.StatusMethodNotAllowed {
				assert.Equal(t, http.MethodPost, w.Header().Get("Allow"))
			}
		})
	}
}

func TestOrdersInvalidRequestsCostNothing(t *testing.T) {
	o := newOrders(t, newClock(), Quirks{})
	bad := order("fr_alpha")
	bad.body = `{"qty": 1}`
	assert.Equal(t, repeat(http.StatusBadRequest, 20), bad.statuses(o, 20))
	assert.Equal(t, append(repeat(http.StatusCreated, 5), http.StatusTooManyRequests), order("fr_alpha").statuses(o, 6))
	assert.Zero(t, o.g.up.Count("fr_zulu"))
}

func TestOrdersTokenBucketAndSplitHeaders(t *testing.T) {
	c := newClock()
	o := newOrders(t, c, Quirks{})
	// free: K=5, r=2.5/s, so a token every 400ms and full after 2s.
	for i := 0; i < 5; i++ {
		w := order("fr_alpha").send(o)
		require.Equal(t, http.StatusCreated, w.Code, "order %d", i+1)
		assert.Equal(t, "5", w.Header().Get("RateLimit-Limit"))
		assert.Equal(t, []string{string(rune('4' - i))}, w.Header().Values("RateLimit-Remaining"), "order %d", i+1)
		// (i+1) tokens missing at 2.5/s: 0.4s, 0.8s, … rounded up.
		assert.Equal(t, []string{[]string{"1", "1", "2", "2", "2"}[i]}, w.Header().Values("RateLimit-Reset"), "order %d", i+1)
		assert.Empty(t, w.Header().Get("Retry-After"))
		var body map[string]any
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
		assert.Equal(t, "SKU-1", body["sku"])
	}
	w := order("fr_alpha").send(o)
	require.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Equal(t, "1", w.Header().Get("Retry-After"), "0.4s rounded up")
	assert.Equal(t, "0", w.Header().Get("RateLimit-Remaining"))
	assert.Equal(t, "2", w.Header().Get("RateLimit-Reset"))
	var problem map[string]any
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &problem))
	assert.Equal(t, map[string]any{"error": "rate_limited", "message": "too many orders for this API key", "retry_after_seconds": 1.0}, problem)

	c.At(399 * time.Millisecond)
	assert.Equal(t, http.StatusTooManyRequests, order("fr_alpha").send(o).Code, "the first token is due at 400ms")
	c.At(400 * time.Millisecond)
	assert.Equal(t, http.StatusCreated, order("fr_alpha").send(o).Code)
	assert.Equal(t, http.StatusTooManyRequests, order("fr_alpha").send(o).Code)
	c.At(400*time.Millisecond + 2*time.Second)
	assert.Equal(t, append(repeat(http.StatusCreated, 5), http.StatusTooManyRequests), order("fr_alpha").statuses(o, 6), "full again after 2s, never more than K")

	assert.Equal(t, append(repeat(http.StatusCreated, 20), http.StatusTooManyRequests), order("pd_alpha").statuses(o, 21), "paid: K=20")
	assert.Equal(t, append(repeat(http.StatusCreated, 5), http.StatusTooManyRequests), order("fr_bravo").statuses(o, 6), "every key has its own bucket")
	assert.Equal(t, int64(5+1+5+20+5), o.g.up.Total())
	assert.Equal(t, int64(11), o.g.up.Count("fr_alpha"))
}

func TestOrdersConfigErrors(t *testing.T) {
	keys := DefaultOrdersKeys()
	tests := []struct {
		name string
		cfg  OrdersConfig
		want string
	}{
		{"no keys", OrdersConfig{}, "allowlist"},
		{"key of an unknown tier", OrdersConfig{Keys: map[string]string{"k": "gold"}}, `tier "gold"`},
		{"zero rate", OrdersConfig{Keys: keys, Tiers: map[string]Bucket{"free": {5, 0}, "paid": {1, 1}}}, "rate 0/s"},
		{"zero capacity", OrdersConfig{Keys: keys, Tiers: map[string]Bucket{"free": {0, 1}, "paid": {1, 1}}}, "capacity 0"},
		{"quirk of another service", OrdersConfig{Keys: keys, Common: Common{Quirks: Quirks{NoFoldCase: true}}}, "no-fold-case"},
		{"fail-open without a store", OrdersConfig{Keys: keys, Common: Common{Quirks: Quirks{FailOpen: true}}}, "fail-open"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewOrders(tt.cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestParseKeys(t *testing.T) {
	keys, err := ParseKeys("k.yaml", []byte("gold: [g1, g2]\nfree: [f1]\n"))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"g1": "gold", "g2": "gold", "f1": "free"}, keys)
	for _, bad := range []struct{ text, want string }{
		{"", "no keys"},
		{"gold: []\n", "no keys"},
		{"gold: [a]\nfree: [a]\n", `"a" is listed under free and gold`},
		{"gold: [' a']\n", "not a usable key"},
		{"gold: ['']\n", "not a usable key"},
		{"- a\n- b\n", "want a mapping of tier to a list of keys"},
	} {
		_, err := ParseKeys("k.yaml", []byte(bad.text))
		require.Error(t, err, bad.text)
		assert.Contains(t, err.Error(), bad.want)
		assert.Contains(t, err.Error(), "k.yaml")
	}
	_, err = LoadKeys("testdata/does-not-exist.yaml")
	assert.ErrorContains(t, err, "does-not-exist.yaml")
}
