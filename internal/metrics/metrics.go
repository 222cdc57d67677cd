// Package metrics owns what agentapi exports to Prometheus: request counts
// and latencies by route, method and status, rate-limit refusals, authentication
// failures by reason, and store latency. Every method is safe on a nil
// *Metrics, so code and tests that do not care need not wire one.
package metrics

import (
	"cmp"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is one registry of agentapi's instruments.
type Metrics struct {
	reg          *prometheus.Registry
	requests     *prometheus.CounterVec
	latency      *prometheus.HistogramVec
	rateLimited  *prometheus.CounterVec
	authFailures *prometheus.CounterVec
	store        *prometheus.HistogramVec
}

// New returns a registry with the Go runtime and process collectors.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentapi_http_requests_total",
			Help: "HTTP requests answered, by route pattern, method and status.",
		}, []string{"route", "method", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentapi_http_request_duration_seconds",
			Help:    "Time to answer HTTP requests, by route pattern, method and status.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route", "method", "status"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentapi_rate_limited_total",
			Help: "Requests refused with 429, by limiter (key or address).",
		}, []string{"limiter"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentapi_auth_failures_total",
			Help: "Requests refused by authentication, by reason (never told to the client).",
		}, []string{"reason"}),
		store: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentapi_store_duration_seconds",
			Help:    "Time spent in store operations, by operation.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}, []string{"op"}),
	}
	m.reg.MustRegister(m.requests, m.latency, m.rateLimited, m.authFailures, m.store,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Register adds another collector (for example a limiter's fallback count).
func (m *Metrics) Register(c prometheus.Collector) {
	if m != nil {
		m.reg.MustRegister(c)
	}
}

// Handler serves the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Request records one answered request. route is the matched pattern (a
// bounded set), never the raw path; the method is one of a fixed set, since
// a client may send any token as a method and must not be able to grow the
// number of series without bound.
func (m *Metrics) Request(route, method string, status int, d time.Duration) {
	if m != nil {
		method, code := cmp.Or(KnownMethod(method), "OTHER"), strconv.Itoa(status)
		m.requests.WithLabelValues(route, method, code).Inc()
		m.latency.WithLabelValues(route, method, code).Observe(d.Seconds())
	}
}

// KnownMethod is m when it is one of the methods RFC 9110 defines, or PATCH, else "":
// neither a metric label nor a response repeats a method it does not know,
// which may be a credential sent in its place.
func KnownMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return ""
}

// RateLimited counts a 429 from the named limiter ("key" or "address").
func (m *Metrics) RateLimited(limiter string) {
	if m != nil {
		m.rateLimited.WithLabelValues(limiter).Inc()
	}
}

// AuthFailure counts a refused credential by reason.
func (m *Metrics) AuthFailure(reason string) {
	if m != nil {
		m.authFailures.WithLabelValues(reason).Inc()
	}
}

// Store records the duration of one store operation.
func (m *Metrics) Store(op string, d time.Duration) {
	if m != nil {
		m.store.WithLabelValues(op).Observe(d.Seconds())
	}
}
