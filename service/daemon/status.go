package daemon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/vipproxy/vipproxy/service/admin"
	"github.com/vipproxy/vipproxy/service/config"
)

// startAdmin serves /metrics, /healthz, /readyz and /status on
// admin.listen (or the activated "admin" socket) and on the control socket.
// When admin.listen cannot bind, the proxy serves on without it, says so
// in the log and STATUS=, and retries, unless admin.strict asks to fail.
func (d *Daemon) startAdmin(ctx context.Context, cfg *config.Valid, activated net.Listener) error {
	h := admin.Handler(d, d.metrics, admin.Options{EnableMutations: cfg.Admin.EnableMutations, Drain: d.drainBackend})
	if err := d.startControl(ctx, h); err != nil {
		return err
	}
	if cfg.Admin.Listen == "" && activated == nil {
		return nil
	}
	ln, err := admin.Listen(cfg.Admin, activated)
	if err == nil {
		go d.serveAdmin(ctx, ln, h)
		return nil
	}
	if cfg.Admin.Strict || errors.As(err, new(*config.Error)) {
		return fmt.Errorf("%w (admin.strict = true: the admin endpoint must serve)", err)
	}
	d.setAdminErr(err.Error())
	d.log.Warn("admin endpoint cannot listen; the proxy serves without it and retries (set admin.strict = true to fail instead)",
		"listen", cfg.Admin.Listen, "err", err, "control_socket", d.control)
	go d.retryAdmin(ctx, cfg.Admin, h)
	return nil
}

// retryAdmin tries admin.listen again, from 1 s doubling to 30 s, until it
// binds or ctx ends.
func (d *Daemon) retryAdmin(ctx context.Context, cfg config.Admin, h http.Handler) {
	wait := time.Second
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		ln, err := admin.Listen(cfg, nil)
		if err == nil {
			d.setAdminErr("")
			d.log.Info("admin endpoint listening after all", "listen", cfg.Listen)
			d.notifier.Status(d.statusLine())
			d.serveAdmin(ctx, ln, h)
			return
		}
		d.log.Debug("admin endpoint still cannot listen", "listen", cfg.Listen, "err", err)
		wait = min(2*wait, 30*time.Second)
	}
}

func (d *Daemon) serveAdmin(ctx context.Context, ln net.Listener, h http.Handler) {
	if err := admin.Serve(ctx, ln, h, d.log); err != nil && !errors.Is(err, http.ErrServerClosed) {
		d.log.Error("admin endpoint stopped", "err", err)
	}
}

// startControl serves h on the control socket in $RUNTIME_DIRECTORY and
// readiness on the probe socket beside it, for keepalived's script user
// (see admin.ControlSocketName, admin.ServeProbe); without systemd there
// are none.
func (d *Daemon) startControl(ctx context.Context, h http.Handler) error {
	if d.control == "" {
		return nil
	}
	ln, err := admin.ListenUnix(d.control, 0o660)
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	probePath := filepath.Join(filepath.Dir(d.control), admin.ProbeSocketName)
	probe, err := admin.ListenUnix(probePath, 0o666)
	if err != nil {
		ln.Close()
		return fmt.Errorf("probe socket: %w", err)
	}
	go d.serveAdmin(ctx, ln, d.controlHandler(h))
	go admin.ServeProbe(ctx, probe, d, d.log)
	return nil
}

func (d *Daemon) setAdminErr(s string) {
	d.mu.Lock()
	d.adminErr = s
	d.mu.Unlock()
}

// Status is the admin endpoint's view of the daemon (admin.Source).
func (d *Daemon) Status() admin.Status {
	d.mu.Lock()
	st := admin.Status{
		Ready: d.ready.Load(), Version: d.version, ConfigPath: d.cfg.Load().Path, ConfigError: d.reloadErr, LastReload: d.lastReload, Reloads: d.reloads,
		OpenConnections: d.openConns(),
	}
	if resumed, closed := d.handover["resumed"], d.handover["closed"]; resumed != nil || closed != nil {
		st.Handover = &admin.HandoverStatus{Resumed: resumed[""], Closed: maps.Clone(closed)}
	}
	f := d.finder
	d.mu.Unlock()
	if f != nil {
		ds := f.w.Status()
		st.Discovery = &ds
	}
	for _, ps := range d.servers() {
		pst, backends := ps.status()
		st.Ports = append(st.Ports, pst)
		st.Backends = append(st.Backends, backends...)
		if pst.Panic && !st.Panic {
			st.Panic, st.PanicSince = true, pst.PanicSince
		}
	}
	return st
}

// status is the port's part of Status: the port, and its backends.
func (ps *portServer) status() (admin.PortStatus, []admin.BackendStatus) {
	p := ps.port()
	ps.d.mu.Lock()
	sources := ps.sources
	ps.d.mu.Unlock()
	st := admin.PortStatus{Name: p.Name, Port: p.Port, Required: p.IsRequired(), Check: string(p.Health.Type), OpenConnections: ps.proxy.Open()}
	// Only an https check sees readiness; tcp and tls never verify it.
	seesReadiness := p.Health.Type == config.CheckHTTPS
	st.Panic, st.PanicSince = ps.pool.Panic()
	checks := map[string]int{}
	snap := ps.checker.Snapshot()
	for i, s := range snap {
		checks[s.Name] = i
	}
	var out []admin.BackendStatus
	for _, b := range ps.pool.Backends() {
		bs := admin.BackendStatus{Name: b.Name, Port: p.Name, Address: b.Address, Source: string(sources[b.Name]), State: b.State(), OpenConnections: b.Open(),
			Draining: b.Draining(), LastKnownGood: b.Good()}
		bs.Transitions, bs.LastChange = b.Transitions()
		if i, ok := checks[b.Name]; ok {
			s := snap[i]
			bs.LastError, bs.LastCheck, bs.Unverified = s.LastError, s.LastCheck, s.Unverified
			bs.Verified = seesReadiness && !s.LastCheck.IsZero() && s.LastError == "" && s.Unverified == ""
		}
		out = append(out, bs)
	}
	st.Healthy, st.Backends = ps.healthy()
	return st, out
}

// drainBackend takes a backend out of rotation (or back in) on every port
// through the admin endpoint, when mutations are enabled: draining is for
// a node's maintenance, and the node serves every port. Open connections
// stay.
func (d *Daemon) drainBackend(name string, drain bool) error {
	found := false
	for _, ps := range d.servers() {
		if b := ps.pool.Lookup(name); b != nil {
			ps.pool.SetDraining(b, drain)
			found = true
		}
	}
	if !found {
		return admin.ErrUnknownBackend
	}
	d.log.Info("backend rotation changed through the admin endpoint", "backend", name, "draining", drain)
	return nil
}
