package daemon

import (
	"context"
	"errors"
	"net"
	"net/http"

	"github.com/vipproxy/vipproxy/service/admin"
	"github.com/vipproxy/vipproxy/service/config"
)

// startAdmin serves /metrics, /healthz, /readyz and /status.
func (d *Daemon) startAdmin(ctx context.Context, cfg *config.Config, activated net.Listener) error {
	if cfg.Admin.Listen == "" && activated == nil {
		return nil
	}
	ln, err := admin.Listen(cfg.Admin, activated)
	if err != nil {
		return err
	}
	h := admin.Handler(d, d.metrics, admin.Options{EnableMutations: cfg.Admin.EnableMutations, Drain: d.drainBackend})
	go func() {
		if err := admin.Serve(ctx, ln, h); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("admin endpoint stopped", "err", err)
		}
	}()
	return nil
}

// Status is the admin endpoint's view of the daemon (admin.Source).
func (d *Daemon) Status() admin.Status {
	d.mu.Lock()
	st := admin.Status{
		Ready: d.ready.Load(), Version: d.version, ConfigPath: d.cfg.Path, ConfigError: d.reloadErr, LastReload: d.lastReload,
		OpenConnections: d.proxy.Open(),
	}
	d.mu.Unlock()
	checks := map[string]int{}
	snap := d.checker.Snapshot()
	for i, s := range snap {
		checks[s.Name] = i
	}
	for _, b := range d.pool.Backends() {
		bs := admin.BackendStatus{Name: b.Name, Address: b.Address, State: "unknown", OpenConnections: b.Open(), Draining: b.Draining()}
		if i, ok := checks[b.Name]; ok {
			s := snap[i]
			bs.State, bs.LastError, bs.LastCheck = s.State.String(), s.LastError, s.LastCheck
		}
		st.Backends = append(st.Backends, bs)
	}
	return st
}

// drainBackend takes a backend out of rotation (or back in) through the
// admin endpoint, when mutations are enabled. Open connections stay.
func (d *Daemon) drainBackend(name string, drain bool) error {
	b := d.pool.Lookup(name)
	if b == nil {
		return admin.ErrUnknownBackend
	}
	b.SetDraining(drain)
	d.log.Info("backend rotation changed through the admin endpoint", "backend", name, "draining", drain)
	return nil
}
