package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"time"

	"github.com/vipproxy/vipproxy/service/balance"
	"github.com/vipproxy/vipproxy/service/config"
	"github.com/vipproxy/vipproxy/service/discovery"
	"github.com/vipproxy/vipproxy/service/health"
	"github.com/vipproxy/vipproxy/service/metrics"
	"github.com/vipproxy/vipproxy/service/proxy"
)

// portServer is one port the VIP serves ([[port]]): its listeners, and its
// own pool, health checker and proxy over the daemon's backends. Ports
// share the backend set (the nodes) and nothing else: a node whose
// konnectivity server is down still serves the API.
type portServer struct {
	d         *Daemon
	name      string
	log       *slog.Logger // the daemon's, with port=NAME
	pool      *balance.Pool
	checker   *health.Checker
	proxy     *proxy.Proxy
	listeners []net.Listener
	stop      context.CancelFunc // ends the checker, set by start

	// Under d.mu: the port's settings (a reload replaces them), the
	// backends a reload or discovery removed that still drain, and where
	// each backend came from.
	cfg     config.Port
	retired []*balance.Backend
	sources map[string]discovery.Source
	// Under d.setMu: the drains discovery started.
	drainedByDiscovery map[string]bool
}

// newPortServer builds port p's pool, checker and proxy over the backends
// list (as config.Backend: host or host:port, see config.Port.BackendAddress).
// Nothing runs until start.
func (d *Daemon) newPortServer(cfg *config.Valid, p config.Port, list []config.Backend, prober health.Prober, maxConns int) (*portServer, error) {
	ps := &portServer{d: d, name: p.Name, cfg: p, drainedByDiscovery: map[string]bool{}}
	d.metrics.AddPort(p.Name)
	pool, err := balance.NewPool(cfg.Balance.Algorithm, ps.addressed(list), ps.backendMetrics)
	if err != nil {
		return nil, err
	}
	ps.pool = pool
	pool.SetThresholds(thresholds(p.Health))
	pool.SetEvacuation(evacuation(cfg, p))
	pool.SetObserver(ps.onTransition)
	ps.log = d.log.With("port", p.Name)
	pool.SetEvacuated(ps.logEvacuated)
	ps.proxy = proxy.New(pool, proxyOptions(cfg, maxConns), ps.counters(), ps.log)
	ps.proxy.ShareCap(&d.open)
	ps.checker = health.New(p.Health, prober, ps.onHealth)
	ps.checker.SetLogger(ps.log)
	return ps, nil
}

// start runs the health checks (until the daemon ends or the port is
// removed) and serves the listeners.
func (ps *portServer) start(bg context.Context, listeners []net.Listener) error {
	ctx, stop := context.WithCancel(bg)
	ps.stop, ps.listeners = stop, listeners
	go ps.checker.Run(ctx)
	if err := ps.proxy.Start(listeners); err != nil {
		stop()
		return fmt.Errorf("port %s: %w", ps.name, err)
	}
	go ps.watchAccept(ctx)
	return nil
}

// watchAccept reports an accept loop that ended on its own (not by
// StopAccepting) to the daemon's loop, which ends the daemon.
func (ps *portServer) watchAccept(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-ps.proxy.Stopped():
		if !ps.closing() {
			select {
			case ps.d.acceptEnded <- fmt.Errorf("port %s: accept loop ended: %w", ps.name, ps.proxy.Err()):
			default: // one is enough to end the daemon
			}
		}
	}
}

func (ps *portServer) closing() bool {
	ps.d.mu.Lock()
	defer ps.d.mu.Unlock()
	return !slices.Contains(ps.d.ports, ps) || ps.d.stopping
}

// port returns the port's settings in force.
func (ps *portServer) port() config.Port {
	ps.d.mu.Lock()
	defer ps.d.mu.Unlock()
	return ps.cfg
}

// addressed gives each backend its address at this port.
func (ps *portServer) addressed(list []config.Backend) []config.Backend {
	out := make([]config.Backend, len(list))
	for i, b := range list {
		out[i] = config.Backend{Name: b.Name, Address: ps.cfg.BackendAddress(b)}
	}
	return out
}

// onHealth feeds a health check result to the pool's state machine (which
// counts rise and fall) and the metrics. A check that failed for a local
// reason is only counted.
func (ps *portServer) onHealth(r health.Result) {
	m := ps.d.metrics
	if r.Outcome == health.LocalFault {
		m.ObserveLocalCheck(ps.name, r.Target.Name)
		return
	}
	m.ObserveCheck(ps.name, r.Target.Name, r.Outcome == health.Pass, r.Latency)
	m.SetUnverified(ps.name, r.Target.Name, health.IsUnverified(r.Err))
	b := ps.pool.Lookup(r.Target.Name)
	if b == nil || b.Address != r.Target.Address {
		return
	}
	e, failure := balance.CheckPassed, error(nil)
	if r.Outcome == health.Fail {
		e, failure = balance.CheckFailed, r.Err
	}
	tr := ps.pool.Observe(b, e)
	logTransition(ps.log, tr, failure)
	if tr.Changed() || tr.PanicChanged {
		ps.d.notifier.Status(ps.d.statusLine())
	}
}

// evacuation is what port p's pool does with a down backend's connections
// (balance.close_on_down), one check interval after the mark-down.
func evacuation(cfg *config.Valid, p config.Port) balance.Evacuation {
	return balance.Evacuation{On: cfg.Balance.CloseOnDown, Grace: p.Health.Interval.Duration}
}

// logEvacuated says that the pool took connections off a down backend.
func (ps *portServer) logEvacuated(b *balance.Backend, n int) {
	ps.log.Warn("took connections off a down backend: unanswered ones replayed elsewhere, the others closed so clients reconnect",
		"backend", b.Name, "connections", n)
}

// backendMetrics makes a new backend's series, its state the pool's
// initial one (starting at the daemon's start, unknown when added later).
func (ps *portServer) backendMetrics(name string, initial balance.State) *metrics.BackendMetrics {
	m := ps.d.metrics.Backend(ps.name, name)
	ps.d.metrics.BackendChanged(ps.name, name, stateNames(), initial.String(), time.Now(), false)
	return m
}

// onTransition is the pool's observer: the per-backend gauge, and panic
// mode said loudly. It runs under the pool's lock.
func (ps *portServer) onTransition(tr balance.Transition) {
	m := ps.d.metrics
	if tr.Changed() {
		up := 0.0
		if tr.To.Healthy() {
			up = 1
		}
		tr.Backend.Stats.Up.Set(up)
		m.BackendChanged(ps.name, tr.Backend.Name, stateNames(), tr.To.String(), tr.At, true)
	}
	if !tr.PanicChanged {
		return
	}
	if tr.Panic {
		m.PanicMode.WithLabelValues(ps.name).Set(1)
		ps.d.log.Error("PANIC MODE: most backends went down at once, more likely a fault of this host than of every apiserver; open connections are kept and new ones balanced over the last known good backends",
			"port", ps.name, "last_down", tr.Backend.Name, "healthy", ps.healthyCount())
		return
	}
	m.PanicMode.WithLabelValues(ps.name).Set(0)
	ps.d.log.Warn("panic mode over: half of the backends or more are healthy again", "port", ps.name, "healthy", ps.healthyCount())
}

// healthy counts the backends that take new connections: up and not
// draining (what readiness asks of a required port).
func (ps *portServer) healthy() (healthy, total int) {
	for _, b := range ps.pool.Backends() {
		total++
		if b.TakesConnections() {
			healthy++
		}
	}
	return healthy, total
}

// healthyCount is "healthy/total" for the log and STATUS=, as /readyz
// counts them.
func (ps *portServer) healthyCount() string {
	h, t := ps.healthy()
	return fmt.Sprintf("%d/%d", h, t)
}

// anyServing says whether a backend takes new connections now.
func (ps *portServer) anyServing() bool {
	h, _ := ps.healthy()
	return h > 0
}

func (ps *portServer) counters() proxy.Counters {
	m := ps.d.metrics
	return proxy.Counters{
		Retries:           m.DialRetries.WithLabelValues(ps.name),
		RejectedNoBackend: m.Rejected.WithLabelValues(ps.name, metrics.RejectNoBackend),
		RejectedLimit:     m.Rejected.WithLabelValues(ps.name, metrics.RejectLimit),
		AcceptErrors:      func(reason string) { m.AcceptErrors.WithLabelValues(reason).Inc() },
	}
}

// retire closes a removed backend's connections after the drain timeout
// and forgets its metrics.
func (ps *portServer) retire(b *balance.Backend, drain time.Duration) {
	d := ps.d
	time.AfterFunc(drain, func() {
		if n := b.CloseAll(); n > 0 {
			d.log.Info("closed connections to a removed backend after the drain timeout", "port", ps.name, "backend", b.Name, "closed", n)
		}
		d.mu.Lock()
		ps.retired = slices.DeleteFunc(ps.retired, func(r *balance.Backend) bool { return r == b })
		d.mu.Unlock()
		if ps.pool.Lookup(b.Name) == nil {
			d.metrics.Forget(ps.name, b.Name)
		}
	})
}

// shutDown ends a port a reload removed: no new connections (apply has
// already stopped accepting; a second StopAccepting returns at once), its
// checks stop, open connections get the drain timeout, then close.
func (ps *portServer) shutDown(drain time.Duration) {
	ps.proxy.StopAccepting()
	ps.stop()
	ctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	if !ps.proxy.Drain(ctx) {
		closed := 0
		for _, b := range ps.pool.Backends() {
			closed += b.CloseAll()
		}
		ps.d.log.Warn("removed port: drain timeout, closed its remaining connections", "port", ps.name, "closed", closed)
	}
	ps.proxy.Close()
	if !ps.d.hasPort(ps.name) { // renumbered: the new one keeps the name's series
		ps.d.metrics.ForgetPort(ps.name)
	}
}

// hasPort says whether a port of that name is served now.
func (d *Daemon) hasPort(name string) bool {
	return slices.ContainsFunc(d.servers(), func(ps *portServer) bool { return ps.name == name })
}
