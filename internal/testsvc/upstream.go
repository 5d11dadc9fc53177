package testsvc

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Where a service exposes what reached its upstream, and how.
const (
	// UpstreamPath serves the JSON counters:
	// {"forwarded": {"total": N, "by_key": {"k1": n1, …}}}.
	UpstreamPath = "/internal/upstream"
	// TotalJSONPath and ByKeyJSONPath locate the total and the per-key
	// counts in that document (dotted object paths).
	TotalJSONPath = "forwarded.total"
	ByKeyJSONPath = "forwarded.by_key"

	// MetricsPath serves the Prometheus text exposition.
	MetricsPath = "/metrics"
	// ForwardedMetric counts requests forwarded upstream, labelled by
	// KeyLabel with the caller's key.
	ForwardedMetric = "upstream_forwarded_total"
	KeyLabel        = "api_key"
	// ResponsesMetric counts every answer of the service by status code
	// (label "code"). It is there so that naming the wrong metric is
	// detectable: it counts refusals too, and has no key label.
	ResponsesMetric = "gateway_responses_total"
)

// Upstream stands for what a service protects: it counts the requests a
// service forwarded to it, per key, and the service's answers by status.
// Give every instance of one deployment the same Upstream (they protect one
// upstream), whether or not they share limiter state. Safe for concurrent
// use; build it with NewUpstream.
type Upstream struct {
	mu    sync.Mutex
	total int64
	byKey map[string]int64

	reg       *prometheus.Registry
	forwarded *prometheus.CounterVec
	responses *prometheus.CounterVec
	metrics   http.Handler
}

// NewUpstream returns an upstream that has received nothing.
func NewUpstream() *Upstream {
	u := &Upstream{
		byKey: map[string]int64{},
		reg:   prometheus.NewRegistry(),
		forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: ForwardedMetric,
			Help: "Requests forwarded to the upstream, by the caller's API key.",
		}, []string{KeyLabel}),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: ResponsesMetric,
			Help: "Responses of the gateway, by HTTP status code.",
		}, []string{"code"}),
	}
	u.reg.MustRegister(u.forwarded, u.responses)
	u.metrics = promhttp.HandlerFor(u.reg, promhttp.HandlerOpts{})
	return u
}

// Forward records one request for key reaching the upstream. Keys are valid
// UTF-8 (the services refuse others), as Prometheus label values must be.
func (u *Upstream) Forward(key string) {
	u.mu.Lock()
	u.total++
	u.byKey[key]++
	u.mu.Unlock()
	u.forwarded.WithLabelValues(key).Inc()
}

// responded records one answer of the service.
func (u *Upstream) responded(status int) {
	u.responses.WithLabelValues(strconv.Itoa(status)).Inc()
}

// Total returns how many requests reached the upstream.
func (u *Upstream) Total() int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.total
}

// Count returns how many requests for key reached the upstream.
func (u *Upstream) Count(key string) int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.byKey[key]
}

// ByKey returns a copy of the per-key counts.
func (u *Upstream) ByKey() map[string]int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	m := make(map[string]int64, len(u.byKey))
	for k, n := range u.byKey {
		m[k] = n
	}
	return m
}

// upstreamDoc is the JSON shape served at UpstreamPath.
type upstreamDoc struct {
	Forwarded struct {
		Total int64            `json:"total"`
		ByKey map[string]int64 `json:"by_key"`
	} `json:"forwarded"`
}

// ServeJSON writes the counters in the shape UpstreamPath documents.
func (u *Upstream) ServeJSON(w http.ResponseWriter, _ *http.Request) {
	var doc upstreamDoc
	u.mu.Lock()
	doc.Forwarded.Total = u.total
	doc.Forwarded.ByKey = make(map[string]int64, len(u.byKey))
	for k, n := range u.byKey {
		doc.Forwarded.ByKey[k] = n
	}
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(doc)
}

// MetricsHandler serves the Prometheus text exposition of the counters.
func (u *Upstream) MetricsHandler() http.Handler { return u.metrics }
