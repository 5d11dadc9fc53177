package service

import (
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rlverify/rlverify/limiters"
)

// Metrics is the reference service's Prometheus telemetry: decisions by tier
// and outcome, limiter (store) latency, store errors, fallback decisions.
// Each instance has its own registry so several instances can live in one
// process. A nil *Metrics records nothing.
type Metrics struct {
	reg       *prometheus.Registry
	decisions *prometheus.CounterVec
	latency   prometheus.Histogram
	errors    prometheus.Counter
	fallbacks *prometheus.CounterVec
	storeLat  prometheus.Histogram
	circuit   *prometheus.GaugeVec
	handler   http.Handler
	// Logf, when set, receives a line per circuit-breaker transition (a
	// standalone service logs them: they say when the store was given up
	// and when it was trusted again).
	Logf func(format string, args ...any)
}

// NewMetrics registers the service metrics in a new registry.
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rlverify_decisions_total",
		Help: "Rate-limit decisions by tier and outcome (allowed, denied, error).",
	}, []string{"tier", "outcome"})
	m.latency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "rlverify_limiter_latency_seconds",
		Help:    "Time the limiter (and its store) took to decide.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
	})
	m.errors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "rlverify_store_errors_total",
		Help: "Decisions that failed because the state store was unavailable.",
	})
	m.fallbacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rlverify_fallback_decisions_total",
		Help: "Decisions made by the declared failure mode instead of the store.",
	}, []string{"mode"})
	m.storeLat = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "rlverify_store_latency_seconds",
		Help:    "Latency of calls to the limiter's state store, failed or not.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
	})
	m.circuit = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rlverify_circuit_state",
		Help: "1 for the circuit breaker's current state (closed, open, half-open), 0 for the others.",
	}, []string{"state"})
	m.circuit.WithLabelValues(limiters.CircuitClosed).Set(1)
	m.reg.MustRegister(m.decisions, m.latency, m.errors, m.fallbacks, m.storeLat, m.circuit,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

// Registry exposes the registry so wrappers can add their own collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// ServeHTTP serves the metrics in the Prometheus text format.
func (m *Metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.handler.ServeHTTP(w, r) }

func (m *Metrics) observe(tier string, d limiters.Decision, err error, took time.Duration) {
	if m == nil {
		return
	}
	m.latency.Observe(took.Seconds())
	switch {
	case err != nil:
		m.decisions.WithLabelValues(tier, "error").Inc()
		if errors.Is(err, limiters.ErrStore) {
			m.errors.Inc()
		}
		return
	case d.Allowed:
		m.decisions.WithLabelValues(tier, "allowed").Inc()
	default:
		m.decisions.WithLabelValues(tier, "denied").Inc()
	}
	if d.Fallback != "" {
		m.fallbacks.WithLabelValues(d.Fallback).Inc()
	}
}

// observer adapts m to limiters.Observer for the resilience wrapper.
// Decisions themselves are counted by the service.
func (m *Metrics) observer() limiters.Observer {
	if m == nil {
		return nil
	}
	return metricsObserver{m}
}

type metricsObserver struct{ m *Metrics }

func (o metricsObserver) OnDecision(string, string, string) {}

func (o metricsObserver) OnStoreLatency(d time.Duration) { o.m.storeLat.Observe(d.Seconds()) }

func (o metricsObserver) OnStoreError(error) { o.m.errors.Inc() }

func (o metricsObserver) OnCircuit(state string) {
	if o.m.Logf != nil {
		o.m.Logf("store circuit %s", state)
	}
	for _, s := range []string{limiters.CircuitClosed, limiters.CircuitOpen, limiters.CircuitHalfOpen} {
		v := 0.0
		if s == state {
			v = 1
		}
		o.m.circuit.WithLabelValues(s).Set(v)
	}
}
