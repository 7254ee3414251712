// Package metrics holds vipproxy's metrics and writes them in the
// Prometheus text format. Nothing is global, so tests and reloads can make
// as many sets as they like.
//
// It is a small hand-written exposition rather than client_golang, which
// cost 2.9 MB of the binary (a net/http program with it: 8.31 MB, without:
// 5.38 MB). vipproxy needs counters, gauges, fixed-bucket histograms,
// deleting a removed backend's series and the text format; all of that
// fits in a few hundred lines.
package metrics

import (
	"runtime"
	"slices"
	"strings"
	"time"
)

// Metrics is every series vipproxy exports.
type Metrics struct {
	families []*family

	ConnectionsTotal    CounterVec   // vipproxy_connections_total{backend,port}
	ConnectionsOpen     GaugeVec     // vipproxy_connections_open{backend,port}
	DialErrors          CounterVec   // vipproxy_dial_errors_total{backend,port}
	DialRetries         CounterVec   // vipproxy_dial_retries_total{port}
	Rejected            CounterVec   // vipproxy_connections_rejected_total{port,reason}
	Bytes               CounterVec   // vipproxy_bytes_total{backend,port,direction}
	BackendUp           GaugeVec     // vipproxy_backend_up{backend,port}
	HealthChecks        CounterVec   // vipproxy_health_checks_total{backend,port,result}
	HealthCheckDuration HistogramVec // vipproxy_health_check_duration_seconds{backend,port}
	AcceptErrors        CounterVec   // vipproxy_accept_errors_total{reason}
	HandoverPairs       CounterVec   // vipproxy_handover_pairs_total{outcome,reason}
	Reloads             CounterVec   // vipproxy_reloads_total{result}
	MaxConnections      *Gauge       // vipproxy_connections_max
	PanicMode           GaugeVec     // vipproxy_panic_mode{port}
	BackendSource       GaugeVec     // vipproxy_backend_source{backend,port,source}
	// The discovery series exist only once discovery runs (no labels:
	// WithLabelValues() makes the one series), so that a node without it
	// exports none and an alert on them cannot fire there.
	DiscoveryErrors   CounterVec // vipproxy_discovery_errors_total
	DiscoveryWatching GaugeVec   // vipproxy_discovery_watching
	DiscoveryLastSync GaugeVec   // vipproxy_discovery_last_sync_timestamp_seconds

	BuildInfo              GaugeVec     // vipproxy_build_info{version,goversion,revision}
	ReloadSuccessful       *Gauge       // vipproxy_config_last_reload_successful
	ReloadSuccessTimestamp *Gauge       // vipproxy_config_last_reload_success_timestamp_seconds
	BackendState           GaugeVec     // vipproxy_backend_state{backend,port,state}
	BackendTransitions     CounterVec   // vipproxy_backend_transitions_total{backend,port}
	BackendLastTransition  GaugeVec     // vipproxy_backend_last_transition_timestamp_seconds{backend,port}
	DialDuration           HistogramVec // vipproxy_dial_duration_seconds{backend,port}
	CheckUnverified        GaugeVec     // vipproxy_health_check_unverified{backend,port}
	vipHeld                *family      // vipproxy_vip_held{address}, read at scrape time
	bgpAnnounced           *family      // vipproxy_bgp_announced, read at scrape time
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
	checkLocal      = "local_error" // failed for a reason of this host: not counted against the backend
)

// checkBuckets are the health check latency bounds: 0.5 ms .. ~4 s.
var checkBuckets = ExponentialBuckets(0.0005, 2, 14)

// dialBuckets are the connect latency bounds: 0.1 ms (loopback) .. ~3.3 s
// (dial timeouts are seconds).
var dialBuckets = ExponentialBuckets(0.0001, 2, 16)

func (m *Metrics) add(name, kind, help string, labels ...string) *family {
	f := newFamily(name, kind, help, labels...)
	m.families = append(m.families, f)
	return f
}

func (m *Metrics) counters(name, help string, labels ...string) CounterVec {
	return CounterVec{f: m.add(name, "counter", help, labels...), mk: func() *Counter { return new(Counter) }}
}

func (m *Metrics) gauges(name, help string, labels ...string) GaugeVec {
	return GaugeVec{f: m.add(name, "gauge", help, labels...), mk: func() *Gauge { return new(Gauge) }}
}

func (m *Metrics) histograms(name, help string, buckets []float64, labels ...string) HistogramVec {
	return HistogramVec{f: m.add(name, "histogram", help, labels...), mk: func() *Histogram { return newHistogram(buckets) }}
}

// New creates the series. /metrics lists the families sorted by name.
func New() *Metrics {
	m := &Metrics{}
	m.AcceptErrors = m.counters("vipproxy_accept_errors_total", "Errors accepting client connections, by reason (e.g. emfile).", "reason")
	m.HandoverPairs = m.counters("vipproxy_handover_pairs_total", "Connections passed across a restart through systemd's file descriptor store: resumed from the previous daemon, or closed at the handover or the resumption, by reason (replay_window, busy, half_closed, backend_gone, ...).", "outcome", "reason")
	m.BackendSource = m.gauges("vipproxy_backend_source", "1 for where each backend came from: static ([[backend]]), discovered (the kubernetes EndpointSlices) or remembered (the last known set on disk).", "backend", "port", "source")
	m.BackendUp = m.gauges("vipproxy_backend_up", "1 if the backend passes its health checks, else 0.", "backend", "port")
	m.Bytes = m.counters("vipproxy_bytes_total", "Bytes copied per backend and direction (to_backend, to_client).", "backend", "port", "direction")
	m.MaxConnections = m.gauges("vipproxy_connections_max", "The cap on open client connections in force (limits.max_connections, or derived from RLIMIT_NOFILE).").WithLabelValues()
	m.ConnectionsOpen = m.gauges("vipproxy_connections_open", "Client connections open to each backend now.", "backend", "port")
	m.Rejected = m.counters("vipproxy_connections_rejected_total", "Client connections closed without a backend, by port and reason (no_backend, limit).", "port", "reason")
	m.ConnectionsTotal = m.counters("vipproxy_connections_total", "Client connections proxied to each backend.", "backend", "port")
	m.DialErrors = m.counters("vipproxy_dial_errors_total", "Failed dials to each backend (the client was retried elsewhere if attempts remained).", "backend", "port")
	m.DialRetries = m.counters("vipproxy_dial_retries_total", "Client connections moved to another backend after a failed dial.", "port")
	m.DiscoveryErrors = m.counters("vipproxy_discovery_errors_total", "Failed lists and watches of the kubernetes EndpointSlices (the backend set is kept).")
	m.DiscoveryLastSync = m.gauges("vipproxy_discovery_last_sync_timestamp_seconds", "Unix time of the last good list of the kubernetes EndpointSlices.")
	m.DiscoveryWatching = m.gauges("vipproxy_discovery_watching", "1 while a watch of the kubernetes EndpointSlices is open, else 0.")
	m.HealthCheckDuration = m.histograms("vipproxy_health_check_duration_seconds", "Health check latency per backend.", checkBuckets, "backend", "port")
	m.HealthChecks = m.counters("vipproxy_health_checks_total", "Health checks per backend and result (success, failure, local_error: failed for a reason of this host, not counted against the backend).", "backend", "port", "result")
	m.PanicMode = m.gauges("vipproxy_panic_mode", "1 while most of the port's backends went down at once: open connections are kept and new ones balanced over the last known good backends.", "port")
	m.Reloads = m.counters("vipproxy_reloads_total", "Config reloads by result (ok, error).", "result")
	m.newSeries()
	slices.SortFunc(m.families, func(a, b *family) int { return strings.Compare(a.name, b.name) })

	// Known label values start at 0 so rate() and alerts see them at once
	// (the port's series: AddPort).
	m.Reloads.WithLabelValues(ResultOK)
	m.Reloads.WithLabelValues(ResultError)
	m.ReloadSuccessful.Set(1) // the config the daemon started with loaded fine
	m.ReloadSuccessTimestamp.Set(float64(time.Now().UnixNano()) / 1e9)
	return m
}

// newSeries makes the series Prometheus users and the alert rules in
// monitoring/ look for, named as Prometheus' own exporters name them.
func (m *Metrics) newSeries() {
	m.BuildInfo = m.gauges("vipproxy_build_info", "Always 1; the labels say which vipproxy runs.", "version", "goversion", "revision")
	m.ReloadSuccessful = m.gauges("vipproxy_config_last_reload_successful", "1 if the last config reload succeeded (or none was tried), 0 if it failed (Prometheus' own name).").WithLabelValues()
	m.ReloadSuccessTimestamp = m.gauges("vipproxy_config_last_reload_success_timestamp_seconds", "When the config in force was loaded (start or last good reload), in seconds since the epoch.").WithLabelValues()
	m.BackendState = m.gauges("vipproxy_backend_state", "1 for the backend's current availability state, 0 for the others (unknown, starting, up, suspect, down, recovering).", "backend", "port", "state")
	m.BackendTransitions = m.counters("vipproxy_backend_transitions_total", "Changes of the backend's availability state.", "backend", "port")
	m.BackendLastTransition = m.gauges("vipproxy_backend_last_transition_timestamp_seconds", "When the backend's state last changed (or it was added), in seconds since the epoch.", "backend", "port")
	m.DialDuration = m.histograms("vipproxy_dial_duration_seconds", "Time to connect to the backend, successful dials only.", dialBuckets, "backend", "port")
	m.CheckUnverified = m.gauges("vipproxy_health_check_unverified", "1 if the backend's latest health check passed without verifying readiness: it refused a check without credentials (401/403, anonymous auth off), so the check only saw it answer HTTP over TLS; give [health] cert_file/key_file or token_file. Else 0.", "backend", "port")
	m.vipHeld = m.add("vipproxy_vip_held", "gauge", "1 if this node holds the VIP on an interface other than the dummy link (the VRRP master), else 0.", "address")
	m.bgpAnnounced = m.add("vipproxy_bgp_announced", "gauge", "vip.mode = bgp only: 1 if the announce link holds every VIP, so BIRD announces them (vipproxy-announce.service holds it while this proxy is ready), else 0.")
}

// SetBuild sets vipproxy_build_info from the version and the commit the
// binary was built from, as `vipproxy version` prints them (decided by
// cli.BuildVersion); a build that does not know its commit says
// "unknown".
func (m *Metrics) SetBuild(version, commit string) {
	if commit == "" {
		commit = "unknown"
	}
	m.BuildInfo.WithLabelValues(version, runtime.Version(), commit).Set(1)
}

// SetVIPHeld makes vipproxy_vip_held read held at every scrape: it
// returns whether this node holds each VIP address.
func (m *Metrics) SetVIPHeld(held func() map[string]bool) {
	m.vipHeld.mu.Lock()
	defer m.vipHeld.mu.Unlock()
	m.vipHeld.collect = func(emit func(v float64, values ...string)) {
		for addr, on := range held() {
			v := 0.0
			if on {
				v = 1
			}
			emit(v, addr)
		}
	}
}

// SetBGPAnnounced makes vipproxy_bgp_announced read announced at every
// scrape; applies false leaves the series out (not a bgp-mode node).
func (m *Metrics) SetBGPAnnounced(announced func() (on, applies bool)) {
	m.bgpAnnounced.mu.Lock()
	defer m.bgpAnnounced.mu.Unlock()
	m.bgpAnnounced.collect = func(emit func(v float64, values ...string)) {
		on, applies := announced()
		switch {
		case !applies:
		case on:
			emit(1)
		default:
			emit(0)
		}
	}
}

// ReloadDone records a reload's result.
func (m *Metrics) ReloadDone(ok bool, at time.Time) {
	result, v := ResultError, 0.0
	if ok {
		result, v = ResultOK, 1
		m.ReloadSuccessTimestamp.Set(float64(at.UnixNano()) / 1e9)
	}
	m.Reloads.WithLabelValues(result).Inc()
	m.ReloadSuccessful.Set(v)
}

// AddPort creates the series of a port the VIP serves at 0.
func (m *Metrics) AddPort(port string) {
	m.Rejected.WithLabelValues(port, RejectNoBackend)
	m.Rejected.WithLabelValues(port, RejectLimit)
	m.DialRetries.WithLabelValues(port)
	m.PanicMode.WithLabelValues(port)
}

// ForgetPort deletes every series of a port a reload removed.
func (m *Metrics) ForgetPort(port string) {
	for _, f := range m.families {
		f.deleteMatching("port", port)
	}
}

// BackendMetrics are one backend's series, resolved once so the proxy's
// hot path does no label lookups.
type BackendMetrics struct {
	ConnectionsTotal *Counter
	ConnectionsOpen  *Gauge
	DialErrors       *Counter
	BytesToBackend   *Counter
	BytesToClient    *Counter
	Up               *Gauge
	DialDuration     *Histogram
}

// Backend returns the series of the backend name at port, creating them
// at 0. Each port has its own pool, so a node is a backend per port.
func (m *Metrics) Backend(port, name string) *BackendMetrics {
	m.zeroBackend(port, name)
	return &BackendMetrics{
		ConnectionsTotal: m.ConnectionsTotal.WithLabelValues(name, port),
		ConnectionsOpen:  m.ConnectionsOpen.WithLabelValues(name, port),
		DialErrors:       m.DialErrors.WithLabelValues(name, port),
		BytesToBackend:   m.Bytes.WithLabelValues(name, port, ToBackend),
		BytesToClient:    m.Bytes.WithLabelValues(name, port, ToClient),
		Up:               m.BackendUp.WithLabelValues(name, port),
		DialDuration:     m.DialDuration.WithLabelValues(name, port),
	}
}

// zeroBackend creates a backend's check and state series at 0, so that
// rate() and alerts see the first failure.
func (m *Metrics) zeroBackend(port, name string) {
	for _, r := range []string{checkSuccess, checkFailure, checkLocal} {
		m.HealthChecks.WithLabelValues(name, port, r)
	}
	m.HealthCheckDuration.WithLabelValues(name, port)
	m.BackendTransitions.WithLabelValues(name, port)
	m.CheckUnverified.WithLabelValues(name, port)
}

// BackendChanged records that backend moved to state (one of states) at
// at. The first call for a backend (its initial state) is not counted as
// a transition.
func (m *Metrics) BackendChanged(port, backend string, states []string, state string, at time.Time, transition bool) {
	for _, s := range states {
		v := 0.0
		if s == state {
			v = 1
		}
		m.BackendState.WithLabelValues(backend, port, s).Set(v)
	}
	if transition {
		m.BackendTransitions.WithLabelValues(backend, port).Inc()
	}
	m.BackendLastTransition.WithLabelValues(backend, port).Set(float64(at.UnixNano()) / 1e9)
}

// ObserveCheck counts one health check result of backend and its latency.
func (m *Metrics) ObserveCheck(port, backend string, ok bool, latency time.Duration) {
	result := checkFailure
	if ok {
		result = checkSuccess
	}
	m.HealthChecks.WithLabelValues(backend, port, result).Inc()
	m.HealthCheckDuration.WithLabelValues(backend, port).Observe(latency.Seconds())
}

// SetUnverified records whether backend's latest check result at port was
// an unverified pass.
func (m *Metrics) SetUnverified(port, backend string, unverified bool) {
	v := 0.0
	if unverified {
		v = 1
	}
	m.CheckUnverified.WithLabelValues(backend, port).Set(v)
}

// ObserveLocalCheck counts a health check of backend that failed for a
// local reason (out of descriptors or memory): not a result about it.
func (m *Metrics) ObserveLocalCheck(port, backend string) {
	m.HealthChecks.WithLabelValues(backend, port, checkLocal).Inc()
}

// SetSource records where a backend came from, replacing the previous one.
func (m *Metrics) SetSource(port, backend, source string) {
	m.BackendSource.f.deleteMatching("backend", backend, "port", port)
	m.BackendSource.WithLabelValues(backend, port, source).Set(1)
}

// Forget deletes every series of a removed backend, so /metrics does not
// report backends that no longer exist.
func (m *Metrics) Forget(port, backend string) {
	for _, f := range m.families {
		f.deleteMatching("backend", backend, "port", port)
	}
}
