package testsvc

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"mime"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.yaml.in/yaml/v3"
)

// OrdersPath is the only route of the orders service.
const OrdersPath = "/v1/orders"

// Bucket is a token bucket: Capacity K tokens, refilled at Rate r per
// second, starting full.
type Bucket struct {
	Capacity int64
	Rate     float64
}

func (b Bucket) validate(what string) error {
	if b.Capacity < 1 || b.Capacity > 1_000_000 {
		return fmt.Errorf("testsvc: %s: capacity %d: want 1 … 1000000", what, b.Capacity)
	}
	if !(b.Rate > 0) || b.Rate > 1_000_000 || math.IsInf(b.Rate, 0) {
		return fmt.Errorf("testsvc: %s: rate %g/s: want a positive rate up to 1000000/s", what, b.Rate)
	}
	return nil
}

// DefaultOrdersTiers are the tiers policies/orders.yaml declares.
func DefaultOrdersTiers() map[string]Bucket {
	return map[string]Bucket{"free": {Capacity: 5, Rate: 2.5}, "paid": {Capacity: 20, Rate: 12.5}}
}

// OrdersConfig configures the orders service: a JSON API behind a gateway
// that knows its callers from an allowlist of bearer tokens.
type OrdersConfig struct {
	Common
	// Keys maps every accepted API key to its tier (the allowlist); other
	// keys are answered 401. Required: DefaultOrdersKeys or LoadKeys.
	Keys map[string]string
	// Tiers gives each tier its bucket; DefaultOrdersTiers when nil.
	Tiers map[string]Bucket
	// Store holds the buckets; a store of its own when nil.
	Store *Store
}

// Orders is the orders service, an http.Handler. Only POST OrdersPath
// exists (404 elsewhere, 405 for other methods). A request needs
// Authorization: Bearer KEY with KEY in the allowlist (401), Content-Type
// application/json and a JSON object body with a non-empty "sku" (400);
// such requests are checked before any limiting and cost nothing. Each key
// has a token bucket of its tier (case-sensitive keys); admitted orders are
// answered 201, refused ones 429 with a JSON body and Retry-After
// (delay-seconds, rounded up). Every decision carries the split
// generation of rate-limit headers: RateLimit-Limit (K),
// RateLimit-Remaining (whole tokens left) and RateLimit-Reset (seconds
// until the bucket is full, rounded up).
type Orders struct {
	g     *gate
	keys  map[string]string
	tiers map[string]Bucket
	store *Store
	seq   atomic.Int64
}

// NewOrders builds an orders instance.
func NewOrders(cfg OrdersConfig) (*Orders, error) {
	g, err := newGate("orders", cfg.Common, QuirkFoldCase, QuirkDeductOnReject)
	if err != nil {
		return nil, err
	}
	tiers := cfg.Tiers
	if tiers == nil {
		tiers = DefaultOrdersTiers()
	}
	for name, b := range tiers {
		if err := b.validate("orders tier " + name); err != nil {
			return nil, err
		}
	}
	if len(cfg.Keys) == 0 {
		return nil, errors.New("testsvc: orders needs an allowlist of keys (OrdersConfig.Keys)")
	}
	for k, t := range cfg.Keys {
		if _, ok := tiers[t]; !ok {
			return nil, fmt.Errorf("testsvc: orders: key %q has tier %q, which is not one of the tiers (%s)", k, t, strings.Join(sortedKeys(tiers), ", "))
		}
	}
	st := cfg.Store
	if st == nil {
		st = NewStore()
	}
	return &Orders{g: g, keys: cfg.Keys, tiers: tiers, store: st}, nil
}

// ServeHTTP implements http.Handler.
func (o *Orders) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if o.g.internal(w, r) {
		return
	}
	jsonReply := func(status int, v any) {
		b, _ := json.Marshal(v)
		o.g.reply(w, status, "application/json", string(b)+"\n")
	}
	problem := func(status int, msg string) {
		jsonReply(status, map[string]string{"error": http.StatusText(status), "message": msg})
	}
	if r.URL.Path != OrdersPath {
		problem(http.StatusNotFound, "no route "+r.URL.Path+"; the API is POST "+OrdersPath)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		problem(http.StatusMethodNotAllowed, r.Method+" "+OrdersPath+" is not allowed; use POST")
		return
	}
	var tokens []string
	for _, v := range r.Header.Values("Authorization") {
		scheme, tok, _ := strings.Cut(strings.TrimSpace(v), " ")
		if !strings.EqualFold(scheme, "Bearer") {
			continue
		}
		tokens = append(tokens, tok)
	}
	id, ok := o.g.identify(r, tokens, true, false)
	tier, known := o.keys[id.declared]
	if !ok || !known {
		w.Header().Set("WWW-Authenticate", `Bearer realm="orders"`)
		problem(http.StatusUnauthorized, "want Authorization: Bearer KEY with a known API key")
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		problem(http.StatusBadRequest, "want Content-Type: application/json")
		return
	}
	var body struct {
		SKU any `json:"sku"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&body); err != nil {
		problem(http.StatusBadRequest, "the body is not a JSON object: "+err.Error())
		return
	}
	sku, _ := body.SKU.(string)
	if sku == "" {
		problem(http.StatusBadRequest, `the body needs a "sku" string`)
		return
	}

	b := o.tiers[tier]
	now := o.g.now()
	d := step(o.store, "orders:"+id.limiter, o.g.q.Racy, func(l tokenLevel, seen bool) (tokenLevel, decision) {
		return o.take(b, l, seen, now)
	})
	h := w.Header()
	h.Set("RateLimit-Limit", strconv.FormatInt(d.limit, 10))
	h.Set("RateLimit-Remaining", strconv.FormatInt(o.g.remaining(d), 10))
	h.Set("RateLimit-Reset", strconv.FormatInt(seconds(d.reset, false), 10))
	if !d.allowed {
		o.g.retryAfter(h, d.retry)
	}
	okBody, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("ord_%d", o.seq.Add(1)), "sku": sku, "status": "accepted"})
	refusedBody, _ := json.Marshal(map[string]any{
		"error":               "rate_limited",
		"message":             "too many orders for this API key",
		"retry_after_seconds": seconds(d.retry, o.g.q.RetryAfterDown),
	})
	o.g.settle(w, id, d,
		answer{http.StatusCreated, "application/json", string(okBody) + "\n"},
		answer{http.StatusTooManyRequests, "application/json", string(refusedBody) + "\n"})
}

// tokenLevel is a bucket's fill at an instant.
type tokenLevel struct {
	tokens float64
	at     time.Time
}

// levelSlack absorbs float rounding: a bucket refilled to exactly one
// token by the arithmetic (0.4s · 2.5/s) may compute as 0.9999999999.
const levelSlack = 1e-9

// take decides one request on bucket b at now.
func (o *Orders) take(b Bucket, l tokenLevel, seen bool, now time.Time) (tokenLevel, decision) {
	k := float64(o.g.q.capacity(b.Capacity))
	r := b.Rate * o.g.q.speed()
	if !seen {
		l = tokenLevel{tokens: k, at: now}
	}
	if dt := now.Sub(l.at); dt > 0 {
		l.tokens = math.Min(k, l.tokens+dt.Seconds()*r)
		l.at = now
	}
	d := decision{limit: b.Capacity}
	if l.tokens >= 1-levelSlack {
		d.allowed = true
		l.tokens = math.Max(l.tokens-1, 0)
	} else if o.g.q.DeductOnReject {
		l.tokens--
	}
	d.remaining = int64(math.Floor(l.tokens + levelSlack))
	if !d.allowed {
		d.retry = secondsDuration((1 - l.tokens) / r)
	}
	d.reset = secondsDuration((k - l.tokens) / r)
	return l, d
}

// secondsDuration converts seconds to a Duration, rounding up to the
// nanosecond so that a wait is never shorter than the arithmetic says.
func secondsDuration(s float64) time.Duration {
	if s <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(s * float64(time.Second)))
}

// ParseKeys reads an allowlist written as YAML: each tier name maps to the
// list of its keys ("paid: [pd_k1, pd_k2]"). It returns key → tier; name
// is the file in errors. A key listed twice, an empty key or tier, or an
// empty allowlist is an error.
func ParseKeys(name string, data []byte) (map[string]string, error) {
	var byTier map[string][]string
	if err := yaml.Unmarshal(data, &byTier); err != nil {
		return nil, fmt.Errorf("testsvc: keys %s: want a mapping of tier to a list of keys: %w", name, err)
	}
	keys := map[string]string{}
	for _, tier := range sortedKeys(byTier) {
		if strings.TrimSpace(tier) == "" {
			return nil, fmt.Errorf("testsvc: keys %s: an empty tier name", name)
		}
		for i, k := range byTier[tier] {
			if !validKey(k) || strings.TrimSpace(k) != k {
				return nil, fmt.Errorf("testsvc: keys %s: %s.%d: %q is not a usable key (non-empty, no surrounding spaces or control characters)", name, tier, i, k)
			}
			if prev, dup := keys[k]; dup {
				return nil, fmt.Errorf("testsvc: keys %s: key %q is listed under %s and %s", name, k, prev, tier)
			}
			keys[k] = tier
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("testsvc: keys %s: no keys", name)
	}
	return keys, nil
}

// LoadKeys reads the allowlist in file (see ParseKeys).
func LoadKeys(file string) (map[string]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("testsvc: keys: %w", err)
	}
	return ParseKeys(file, data)
}

func sortedKeys[V any](m map[string]V) []string {
	s := make([]string, 0, len(m))
	for k := range m {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}
