// Package metrics holds vipproxy's Prometheus collectors on a private
// registry: nothing is registered globally, so tests and reloads can make
// as many as they like.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics is every collector vipproxy exports.
type Metrics struct {
	registry *prometheus.Registry

	ConnectionsTotal    *prometheus.CounterVec   // vipproxy_connections_total{backend}
	ConnectionsOpen     *prometheus.GaugeVec     // vipproxy_connections_open{backend}
	DialErrors          *prometheus.CounterVec   // vipproxy_dial_errors_total{backend}
	DialRetries         prometheus.Counter       // vipproxy_dial_retries_total
	Rejected            *prometheus.CounterVec   // vipproxy_connections_rejected_total{reason}
	Bytes               *prometheus.CounterVec   // vipproxy_bytes_total{backend,direction}
	BackendUp           *prometheus.GaugeVec     // vipproxy_backend_up{backend}
	HealthChecks        *prometheus.CounterVec   // vipproxy_health_checks_total{backend,result}
	HealthCheckDuration *prometheus.HistogramVec // vipproxy_health_check_duration_seconds{backend}
	AcceptErrors        *prometheus.CounterVec   // vipproxy_accept_errors_total{reason}
	Reloads             *prometheus.CounterVec   // vipproxy_reloads_total{result}
	LastReloadSuccess   prometheus.Gauge         // vipproxy_config_last_reload_success
}

// Label values used across the daemon.
const (
	RejectNoBackend = "no_backend" // every backend down
	RejectLimit     = "limit"      // limits.max_connections reached
	ToBackend       = "to_backend"
	ToClient        = "to_client"
	ResultOK        = "ok"
	ResultError     = "error"
	checkSuccess    = "success"
	checkFailure    = "failure"
)

// New creates the collectors and registers them, with the Go runtime and
// process collectors, on a fresh registry.
func New() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		ConnectionsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vipproxy_connections_total", Help: "Client connections proxied to each backend.",
		}, []string{"backend"}),
		ConnectionsOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "vipproxy_connections_open", Help: "Client connections open to each backend now.",
		}, []string{"backend"}),
		DialErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vipproxy_dial_errors_total", Help: "Failed dials to each backend (the client was retried elsewhere if attempts remained).",
		}, []string{"backend"}),
		DialRetries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vipproxy_dial_retries_total", Help: "Client connections moved to another backend after a failed dial.",
		}),
		Rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vipproxy_connections_rejected_total", Help: "Client connections closed without a backend, by reason (no_backend, limit).",
		}, []string{"reason"}),
		Bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vipproxy_bytes_total", Help: "Bytes copied per backend and direction (to_backend, to_client).",
		}, []string{"backend", "direction"}),
		BackendUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "vipproxy_backend_up", Help: "1 if the backend passes its health checks, else 0.",
		}, []string{"backend"}),
		HealthChecks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vipproxy_health_checks_total", Help: "Health checks per backend and result (success, failure).",
		}, []string{"backend", "result"}),
		HealthCheckDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "vipproxy_health_check_duration_seconds", Help: "Health check latency per backend.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14), // 0.5 ms .. ~4 s
		}, []string{"backend"}),
		AcceptErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vipproxy_accept_errors_total", Help: "Errors accepting client connections, by reason (e.g. emfile).",
		}, []string{"reason"}),
		Reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vipproxy_reloads_total", Help: "Config reloads by result (ok, error).",
		}, []string{"result"}),
		LastReloadSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vipproxy_config_last_reload_success", Help: "1 if the last config reload succeeded (or none was tried), 0 if it failed.",
		}),
	}
	m.registry.MustRegister(
		m.ConnectionsTotal, m.ConnectionsOpen, m.DialErrors, m.DialRetries, m.Rejected, m.Bytes,
		m.BackendUp, m.HealthChecks, m.HealthCheckDuration, m.AcceptErrors, m.Reloads, m.LastReloadSuccess,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	// Known label values start at 0 so rate() and alerts see them at once.
	m.Rejected.WithLabelValues(RejectNoBackend)
	m.Rejected.WithLabelValues(RejectLimit)
	m.Reloads.WithLabelValues(ResultOK)
	m.Reloads.WithLabelValues(ResultError)
	m.LastReloadSuccess.Set(1) // the config the daemon started with loaded fine
	return m
}

// Registry is what /metrics serves.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// BackendMetrics are one backend's series, resolved once so the proxy's
// hot path does no label lookups.
type BackendMetrics struct {
	ConnectionsTotal prometheus.Counter
	ConnectionsOpen  prometheus.Gauge
	DialErrors       prometheus.Counter
	BytesToBackend   prometheus.Counter
	BytesToClient    prometheus.Counter
	Up               prometheus.Gauge
}

// Backend returns the series of the backend name, creating them at 0.
func (m *Metrics) Backend(name string) *BackendMetrics {
	return &BackendMetrics{
		ConnectionsTotal: m.ConnectionsTotal.WithLabelValues(name),
		ConnectionsOpen:  m.ConnectionsOpen.WithLabelValues(name),
		DialErrors:       m.DialErrors.WithLabelValues(name),
		BytesToBackend:   m.Bytes.WithLabelValues(name, ToBackend),
		BytesToClient:    m.Bytes.WithLabelValues(name, ToClient),
		Up:               m.BackendUp.WithLabelValues(name),
	}
}

// ObserveCheck counts one health check result of backend and its latency.
func (m *Metrics) ObserveCheck(backend string, ok bool, latency time.Duration) {
	result := checkFailure
	if ok {
		result = checkSuccess
	}
	m.HealthChecks.WithLabelValues(backend, result).Inc()
	m.HealthCheckDuration.WithLabelValues(backend).Observe(latency.Seconds())
}

// Forget deletes every series of a removed backend, so /metrics does not
// report backends that no longer exist.
func (m *Metrics) Forget(backend string) {
	labels := prometheus.Labels{"backend": backend}
	m.ConnectionsTotal.DeletePartialMatch(labels)
	m.ConnectionsOpen.DeletePartialMatch(labels)
	m.DialErrors.DeletePartialMatch(labels)
	m.Bytes.DeletePartialMatch(labels)
	m.BackendUp.DeletePartialMatch(labels)
	m.HealthChecks.DeletePartialMatch(labels)
	m.HealthCheckDuration.DeletePartialMatch(labels)
}
