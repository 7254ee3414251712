package daemon

import (
	"fmt"
	"slices"
	"time"

	"github.com/vipproxy/vipproxy/service/balance"
	"github.com/vipproxy/vipproxy/service/config"
	"github.com/vipproxy/vipproxy/service/health"
)

// reload re-reads the config file and applies it live. An invalid file
// changes nothing: the old config keeps serving and the reason shows in
// the log, STATUS and /status. Connections to unchanged backends survive;
// removed backends get the drain timeout, then their connections close.
func (d *Daemon) reload() {
	d.notifier.Reloading()
	next, prober, err := loadForReload(d.cfg.Load().Path)
	if err != nil {
		d.mu.Lock()
		d.reloadErr = err.Error()
		d.reloads++
		d.mu.Unlock()
		d.metrics.ReloadDone(false, time.Now())
		d.log.Error("reload failed; keeping the running config", "err", err)
		d.notifier.Ready(d.statusLine())
		return
	}
	d.apply(next, prober)
	d.metrics.ReloadDone(true, time.Now())
	d.notifier.Ready(d.statusLine())
}

func loadForReload(path string) (*config.Valid, health.Prober, error) {
	next, err := config.Load(path)
	if err != nil {
		return nil, nil, err
	}
	prober, err := health.NewProber(next.Health, ownAddrs(next)...)
	if err != nil {
		return nil, nil, withFile(err, path)
	}
	return next, prober, nil
}

func (d *Daemon) apply(next *config.Valid, prober health.Prober) {
	prev := d.cfg.Load()
	if !slices.Equal(prev.VIP.Addresses, next.VIP.Addresses) || prev.VIP.Port != next.VIP.Port {
		d.log.Warn("VIP addresses or port changed: the listeners stay as they are; under systemd run `vipproxy units write && systemctl daemon-reload && systemctl restart vipproxy.socket` (the socket binds the VIP only when it starts)")
	}
	if prev.Admin != next.Admin {
		d.log.Warn("admin endpoint settings change on the next restart")
	}
	d.pool.SetAlgorithm(next.Balance.Algorithm)
	d.pool.SetThresholds(thresholds(next.Health))
	d.checker.SetConfig(next.Health, prober)
	d.proxy.SetOptions(proxyOptions(next, d.applyMaxConnections(next)))
	d.level.Set(next.Log.Level.Slog())
	d.cfg.Store(next)
	d.restartFinder(prev, next)
	added, removed := d.applyBackends()
	// The reload is counted (what `vipproxy reload` waits for in /status)
	// only once the new backend set is in the pool: counted before, it let
	// reload report the old set (under qemu-user, 3 runs in 10 of
	// TestReloadReportsTheDaemonsVerdict read "1/1 backends healthy").
	d.mu.Lock()
	d.retired = append(d.retired, removed...)
	d.reloadErr = ""
	d.reloads++
	d.lastReload = time.Now()
	d.mu.Unlock()
	for _, b := range removed {
		d.retire(b, next.Timeouts.Drain.Duration)
	}
	d.log.Info("reloaded", "backends", len(d.pool.Backends()), "added", names(added), "removed", names(removed),
		"algorithm", next.Balance.Algorithm)
}

// retire closes a removed backend's connections after the drain timeout
// and forgets its metrics.
func (d *Daemon) retire(b *balance.Backend, drain time.Duration) {
	time.AfterFunc(drain, func() {
		if n := b.CloseAll(); n > 0 {
			d.log.Info("closed connections to a removed backend after the drain timeout", "backend", b.Name, "closed", n)
		}
		d.mu.Lock()
		d.retired = slices.DeleteFunc(d.retired, func(r *balance.Backend) bool { return r == b })
		d.mu.Unlock()
		if d.pool.Lookup(b.Name) == nil {
			d.metrics.Forget(b.Name)
		}
	})
}

func names(bs []*balance.Backend) []string {
	out := make([]string, 0, len(bs))
	for _, b := range bs {
		out = append(out, b.Name)
	}
	return out
}

// statusLine is the one-line STATUS for systemctl status.
func (d *Daemon) statusLine() string {
	s := fmt.Sprintf("%s backends healthy, %d connections open", d.healthyCount(), d.proxy.Open())
	if on, since := d.pool.Panic(); on {
		s = fmt.Sprintf("PANIC MODE since %s (most backends down at once; open connections kept, balancing over the last known good); %s",
			since.UTC().Format(time.TimeOnly), s)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.adminErr != "" {
		s += "; admin endpoint down (retrying): " + d.adminErr
	}
	if d.reloadErr != "" {
		s += "; last reload failed: " + d.reloadErr
	}
	return s
}
