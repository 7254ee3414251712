package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/vipproxy/vipproxy/service/admin"
	"github.com/vipproxy/vipproxy/service/config"
	"github.com/vipproxy/vipproxy/service/discovery"
	"github.com/vipproxy/vipproxy/service/health"
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
// /readyz on the probe socket beside it, for keepalived's script user (see
// admin.ControlSocketName); without systemd there are none.
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
	go d.serveAdmin(ctx, ln, h)
	go d.serveAdmin(ctx, probe, admin.ProbeHandler(d))
	return nil
}

func (d *Daemon) setAdminErr(s string) {
	d.mu.Lock()
	d.adminErr = s
	d.mu.Unlock()
}

// Status is the admin endpoint's view of the daemon (admin.Source).
func (d *Daemon) Status() admin.Status {
	cfg := d.cfg.Load()
	d.mu.Lock()
	st := admin.Status{
		Ready: d.ready.Load(), Version: d.version, ConfigPath: cfg.Path, ConfigError: d.reloadErr, LastReload: d.lastReload, Reloads: d.reloads,
		OpenConnections: d.proxy.Open(),
	}
	sources, f := d.sources, d.finder
	// Only an https check sees readiness; tcp and tls never verify it.
	seesReadiness := cfg.Health.Type == config.CheckHTTPS
	d.mu.Unlock()
	st.Panic, st.PanicSince = d.pool.Panic()
	if f != nil {
		ds := f.w.Status()
		st.Discovery = &ds
	}
	checks := map[string]health.Status{}
	for _, s := range d.checker.Snapshot() {
		checks[s.Name] = s
	}
	st.Backends = d.backends(sources)
	for i := range st.Backends {
		bs := &st.Backends[i]
		if s, ok := checks[bs.Name]; ok {
			bs.LastError, bs.LastCheck, bs.Unverified = s.LastError, s.LastCheck, s.Unverified
			bs.Verified = seesReadiness && !s.LastCheck.IsZero() && s.LastError == "" && s.Unverified == ""
		}
	}
	return st
}

// backends is the pool's backends as /status shows them, without their
// latest check. It takes no lock (atomic loads only): the pool's observer
// calls it under the pool's lock.
func (d *Daemon) backends(sources map[string]discovery.Source) []admin.BackendStatus {
	var out []admin.BackendStatus
	for _, b := range d.pool.Backends() {
		bs := admin.BackendStatus{Name: b.Name, Address: b.Address, Source: string(sources[b.Name]), State: b.State(), OpenConnections: b.Open(),
			Draining: b.Draining(), LastKnownGood: b.Good()}
		bs.Transitions, bs.LastChange = b.Transitions()
		out = append(out, bs)
	}
	return out
}

// serving counts the backends that take new connections, by the rule of
// /readyz (admin.Status.Readiness).
func (d *Daemon) serving() (healthy, total int) {
	_, healthy, total = admin.Status{Ready: true, Backends: d.backends(nil)}.Readiness()
	return healthy, total
}

// drainBackend takes a backend out of rotation (or back in) through the
// admin endpoint, when mutations are enabled. Open connections stay.
func (d *Daemon) drainBackend(name string, drain bool) error {
	b := d.pool.Lookup(name)
	if b == nil {
		return admin.ErrUnknownBackend
	}
	d.pool.SetDraining(b, drain)
	d.log.Info("backend rotation changed through the admin endpoint", "backend", name, "draining", drain)
	return nil
}
