// Package admin serves vipproxy's admin HTTP endpoint: Prometheus
// metrics, liveness, readiness and a JSON status page. By default it only
// reads; endpoints that change state exist only with admin.enable_mutations.
package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/vipproxy/vipproxy/service/balance"
	"github.com/vipproxy/vipproxy/service/discovery"
	"github.com/vipproxy/vipproxy/service/metrics"
)

// Source is what the admin endpoint reports on: the daemon.
type Source interface {
	Status() Status
}

// Status is the daemon's state as /status shows it.
type Status struct {
	// Ready is false while the daemon starts (until a backend is healthy
	// or every backend has had a check) and once it stops; /readyz also
	// needs a healthy backend on every required port.
	Ready   bool   `json:"ready"`
	Version string `json:"version"`
	// Ports are the ports the VIP serves; Backends every port's backends,
	// each naming its port.
	Ports           []PortStatus    `json:"ports"`
	Backends        []BackendStatus `json:"backends"`
	OpenConnections int64           `json:"open_connections"`
	ConfigPath      string          `json:"config_path"`
	// ConfigError is why the last reload failed; empty if it did not.
	ConfigError string    `json:"config_error,omitempty"`
	LastReload  time.Time `json:"last_reload,omitzero"`
	// Panic is true while most backends went down at once (balance's
	// panic mode): open connections are kept, new ones balanced over the
	// last known good backends.
	Panic      bool      `json:"panic,omitempty"`
	PanicSince time.Time `json:"panic_since,omitzero"`
	// Reloads counts the reloads done, accepted or refused: `vipproxy
	// reload` waits for it to move, then reads ConfigError.
	Reloads uint64 `json:"reloads"`
	// Discovery is the EndpointSlice watch; nil when discovery is off.
	Discovery *discovery.Status `json:"discovery,omitempty"`
	// Handover is what this daemon took over at its start from the one
	// before it (a restart through the file descriptor store); nil when
	// it was handed nothing.
	Handover *HandoverStatus `json:"handover,omitempty"`
}

// HandoverStatus counts the connections a restart handed to this daemon.
type HandoverStatus struct {
	// Resumed are relayed on; Closed were not, by reason (backend_gone,
	// backend_down, port_gone, incomplete, socket_closed, store_error).
	Resumed int            `json:"resumed"`
	Closed  map[string]int `json:"closed,omitempty"`
}

// PortStatus is one port the VIP serves ([[port]]) in Status.
type PortStatus struct {
	Name string `json:"name"`
	Port uint16 `json:"port"`
	// Required: the node is ready only when this port has a healthy backend.
	Required bool   `json:"required"`
	Check    string `json:"check"`
	// Healthy counts the backends that take new connections (up, not
	// draining), of Backends.
	Healthy         int       `json:"healthy"`
	Backends        int       `json:"backends"`
	OpenConnections int64     `json:"open_connections"`
	Panic           bool      `json:"panic,omitempty"`
	PanicSince      time.Time `json:"panic_since,omitzero"`
}

// BackendStatus is one backend of one port in Status.
type BackendStatus struct {
	Name string `json:"name"`
	// Port is the name of the port whose pool this is.
	Port    string `json:"port,omitempty"`
	Address string `json:"address"`
	// Source is where the backend came from: static, discovered or remembered.
	Source string `json:"source,omitempty"`
	// State is written by name: "unknown", "starting", "up", "suspect",
	// "down" or "recovering".
	State     balance.State `json:"state"`
	LastError string        `json:"last_error,omitempty"`
	LastCheck time.Time     `json:"last_check,omitzero"`
	// Verified: the latest check proved the backend ready (an https check
	// answered health.expect_status). False while Unverified, down, or
	// with a tcp or tls check, which cannot see readiness.
	Verified bool `json:"verified"`
	// Unverified says why the latest check passed without verifying
	// readiness: the backend refused a check without credentials.
	Unverified      string `json:"unverified,omitempty"`
	OpenConnections int64  `json:"open_connections"`
	Draining        bool   `json:"draining,omitempty"`
	// LastKnownGood marks the backends panic mode balances over.
	LastKnownGood bool `json:"last_known_good,omitempty"`
	// Transitions counts the state changes; LastChange is the latest.
	Transitions uint64    `json:"transitions"`
	LastChange  time.Time `json:"last_change,omitzero"`
}

// Options tune the handler.
type Options struct {
	// EnableMutations serves the endpoints that change state; without it
	// they answer 403.
	EnableMutations bool
	// Drain takes a backend out of (drain=true) or back into (false) the
	// rotation: POST /backends/{name}/drain and /undrain. It returns
	// ErrUnknownBackend for a name it does not know. Nil leaves the
	// endpoints out even with EnableMutations.
	Drain func(name string, drain bool) error
}

// ErrUnknownBackend is what Options.Drain returns for a name it does not know.
var ErrUnknownBackend = errors.New("unknown backend")

// Handler returns the admin endpoint's routes. Only GET and HEAD are
// served (405 otherwise), except the mutations; unknown paths get 404.
func Handler(src Source, m *metrics.Metrics, opts Options) http.Handler {
	mux := http.NewServeMux()
	if m != nil {
		mux.Handle("GET /metrics", m.Handler())
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		// Answering at all is the proof of life.
		text(w, http.StatusOK, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		serveReadyz(w, src.Status())
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		serveStatus(w, src.Status())
	})
	if opts.Drain != nil {
		mux.Handle("POST /backends/{name}/drain", mutation(opts, true))
		mux.Handle("POST /backends/{name}/undrain", mutation(opts, false))
	}
	return withHeaders(mux)
}

// withHeaders marks every answer as live data, never to be cached or sniffed.
func withHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		next.ServeHTTP(w, r)
	})
}

// Readiness is the one readiness rule, for /readyz, keepalived's track
// script (`vipproxy probe`), the daemon's STATUS= line and the CLI: the
// daemon is ready (started, not stopping) and every required port has a
// backend that takes new connections (healthy, not draining). An optional
// port that fails on every node must not take the VIP off every node: the
// node still serves the API, which is what the VIP is for. healthy and
// total count every port's backends.
func (st Status) Readiness() (ready bool, healthy, total int) {
	ready = st.Ready
	for _, p := range st.ports() {
		healthy += p.Healthy
		total += p.Backends
		if p.Required && p.Healthy == 0 {
			ready = false
		}
	}
	return ready, healthy, total
}

// Summary says per port how many backends take new connections: "3/3"
// for the one-port form, "api 3/3, konnectivity 0/3 (optional)" with
// [[port]] tables.
func (st Status) Summary() string {
	ports := st.ports()
	var parts []string
	for _, p := range ports {
		part := fmt.Sprintf("%d/%d", p.Healthy, p.Backends)
		if len(ports) > 1 || p.Name != "api" {
			part = p.Name + " " + part
			if !p.Required {
				part += " (optional)"
			}
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ", ")
}

// ports are st.Ports, or for a Status without them (one pool, as before
// ports) one required port "api" counted from the backends.
func (st Status) ports() []PortStatus {
	if len(st.Ports) > 0 {
		return st.Ports
	}
	p := PortStatus{Name: "api", Required: true}
	for _, b := range st.Backends {
		p.Backends++
		if b.State.TakesConnections(b.rotation()) {
			p.Healthy++
		}
	}
	return []PortStatus{p}
}

// rotation is the backend's rotation as /status tells it.
func (b BackendStatus) rotation() balance.Rotation {
	if b.Draining {
		return balance.Draining
	}
	return balance.InRotation
}

func serveReadyz(w http.ResponseWriter, st Status) {
	code, body := readyzAnswer(st)
	text(w, code, body)
}

// readyzAnswer is /readyz's status code and body for st.
func readyzAnswer(st Status) (int, string) {
	ready, _, _ := st.Readiness()
	summary := st.Summary()
	switch {
	case ready:
		return http.StatusOK, fmt.Sprintf("ready: %s backends healthy\n", summary)
	case !st.Ready:
		return http.StatusServiceUnavailable, fmt.Sprintf("not ready: daemon starting or stopping; %s backends healthy\n", summary)
	default:
		return http.StatusServiceUnavailable, fmt.Sprintf("not ready: %s backends healthy\n", summary)
	}
}

func serveStatus(w http.ResponseWriter, st Status) {
	if st.Backends == nil {
		st.Backends = []BackendStatus{} // [] rather than null for consumers
	}
	body, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		text(w, http.StatusInternalServerError, fmt.Sprintf("encode status: %v\n", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(append(body, '\n'))
}

func mutation(opts Options, drain bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !opts.EnableMutations {
			text(w, http.StatusForbidden, "mutations are disabled (admin.enable_mutations = false)\n")
			return
		}
		// A browser sends Origin on cross-site POSTs; curl and scripts do
		// not. Refusing it keeps a web page from draining backends.
		if r.Header.Get("Origin") != "" {
			text(w, http.StatusForbidden, "cross-origin requests are refused\n")
			return
		}
		name := r.PathValue("name")
		err := opts.Drain(name, drain)
		switch {
		case errors.Is(err, ErrUnknownBackend):
			text(w, http.StatusNotFound, fmt.Sprintf("unknown backend %q\n", name))
		case err != nil:
			text(w, http.StatusInternalServerError, fmt.Sprintf("%v\n", err))
		case drain:
			text(w, http.StatusOK, fmt.Sprintf("draining %s\n", name))
		default:
			text(w, http.StatusOK, fmt.Sprintf("undrained %s\n", name))
		}
	})
}

func text(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	io.WriteString(w, body)
}
