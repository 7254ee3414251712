package daemon

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/vipproxy/vipproxy/service/balance"
	"github.com/vipproxy/vipproxy/service/config"
	"github.com/vipproxy/vipproxy/service/discovery"
	"github.com/vipproxy/vipproxy/service/health"
)

// finder is a running discovery watcher and how to stop it.
type finder struct {
	w    *discovery.Watcher
	stop context.CancelFunc
	done chan struct{}
}

// newFinder builds the watcher for cfg (nil when discovery is off). Its
// members start as the last known set on disk; Run starts it.
func (d *Daemon) newFinder(cfg *config.Valid) *finder {
	dc := cfg.Discovery
	if !dc.Enable {
		return nil
	}
	// Discovery asks the apiservers themselves: each static backend at the
	// API port (config.Valid.DiscoveryPort).
	var seeds []string
	api := cfg.DiscoveryPort()
	for _, b := range cfg.Backends {
		seeds = append(seeds, api.BackendAddress(b))
	}
	f := &finder{done: make(chan struct{})}
	d.metrics.DiscoveryErrors.WithLabelValues() // the series start at 0
	d.metrics.DiscoveryWatching.WithLabelValues()
	f.w = discovery.New(discovery.Options{
		Credentials: discovery.Credentials{Kubeconfig: dc.Kubeconfig, CAFile: dc.CAFile, CertFile: dc.CertFile,
			KeyFile: dc.KeyFile, TokenFile: dc.TokenFile, ServerName: dc.ServerName},
		Policy: discovery.Policy{VIPs: cfg.VIP.Addresses, Own: ownListeners(cfg), IsLocal: isLocalAddr,
			AllowLoopback: dc.AllowLoopback, Max: dc.MaxBackends, Grace: dc.Grace.Duration},
		Seeds:     seeds,
		Resync:    dc.Resync.Duration,
		StatePath: statePath(dc.StateDir, os.Getenv),
		OnChange:  func(m []discovery.Member) { d.onDiscovered(f, m) },
		OnStatus:  d.onDiscoveryStatus,
		Logger:    d.log,
		Timeout:   cfg.Timeouts.Dial.Duration,
	})
	return f
}

// ownListeners are the addresses this process listens on, which no
// discovered endpoint may name: each served port on each VIP, the admin
// endpoint.
func ownListeners(cfg *config.Valid) []netip.AddrPort {
	var out []netip.AddrPort
	for _, a := range cfg.VIP.Addresses {
		for _, p := range cfg.ServedPorts() {
			out = append(out, netip.AddrPortFrom(a, p.Port))
		}
	}
	if a, err := netip.ParseAddrPort(cfg.Admin.Listen); err == nil {
		out = append(out, netip.AddrPortFrom(a.Addr().Unmap(), a.Port()))
	}
	return out
}

// isLocalAddr says whether an address is on one of this host's links.
func isLocalAddr(ip netip.Addr) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if local, ok := netip.AddrFromSlice(n.IP); ok && local.Unmap() == ip {
				return true
			}
		}
	}
	return false
}

// statePath is where the last known set lives: systemd's StateDirectory=
// ($STATE_DIRECTORY, the first of a colon-separated list) wins over
// discovery.state_dir; neither keeps nothing.
func statePath(dir string, getenv func(string) string) string {
	if s := getenv("STATE_DIRECTORY"); s != "" {
		dir, _, _ = strings.Cut(s, ":")
	}
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, discovery.StateFile)
}

// restartFinder replaces the watcher when a reload changed what it uses;
// the new one starts from the last known set on disk.
func (d *Daemon) restartFinder(prev, next *config.Valid) {
	if sameDiscovery(prev, next) {
		return
	}
	d.finder.close()
	f := d.newFinder(next)
	var members []discovery.Member
	if f != nil {
		members = f.w.Members()
	}
	d.mu.Lock()
	d.finder, d.members = f, members
	d.mu.Unlock()
	if f != nil {
		f.start(d.bg)
	}
}

func (f *finder) start(ctx context.Context) {
	ctx, f.stop = context.WithCancel(ctx)
	go func() {
		defer close(f.done)
		f.w.Run(ctx)
	}()
}

// finderStopWait bounds how long a stop or reload waits for the watcher
// to return. It returns at once (its requests end with its context, its
// files open without blocking); the bound keeps a watcher stuck anyway
// (a hung NFS read) from holding SIGTERM past the drain timeout.
const finderStopWait = 2 * time.Second

func (f *finder) close() {
	if f != nil && f.stop != nil {
		f.stop()
		select {
		case <-f.done:
		case <-time.After(finderStopWait):
		}
	}
}

// sameDiscovery says whether a reload leaves the watcher as it is.
func sameDiscovery(a, b *config.Valid) bool {
	return reflect.DeepEqual(a.Discovery, b.Discovery) && slices.Equal(a.VIP.Addresses, b.VIP.Addresses) &&
		reflect.DeepEqual(a.Backends, b.Backends) && a.Timeouts.Dial == b.Timeouts.Dial
}

// onDiscovered applies a new discovered set to every port's pool. A
// watcher that a reload replaced may still call (a drain's timer): it is
// not heard.
func (d *Daemon) onDiscovered(f *finder, members []discovery.Member) {
	d.mu.Lock()
	if d.finder != f {
		d.mu.Unlock()
		return
	}
	d.members = members
	d.mu.Unlock()
	for ps, removed := range d.applyBackends() {
		for _, b := range removed {
			// The grace is over (the member drained): close what is left now.
			if n := b.CloseAll(); n > 0 {
				d.log.Info("closed connections to a backend the cluster no longer lists, after its grace", "port", ps.name, "backend", b.Name, "closed", n)
			}
			d.metrics.Forget(ps.name, b.Name)
		}
	}
	d.notifier.Status(d.statusLine())
}

func (d *Daemon) onDiscoveryStatus(s discovery.Status) {
	watching := 0.0
	if s.State == discovery.StateWatching {
		watching = 1
	}
	d.metrics.DiscoveryWatching.WithLabelValues().Set(watching)
	if !s.LastSync.IsZero() {
		d.metrics.DiscoveryLastSync.WithLabelValues().Set(float64(s.LastSync.UnixMilli()) / 1000)
	}
	d.mu.Lock()
	seen := d.discoveryErrors
	d.discoveryErrors = s.Errors
	d.mu.Unlock()
	if s.Errors > seen {
		d.metrics.DiscoveryErrors.WithLabelValues().Add(s.Errors - seen)
	}
}

// backendCount is how many backends cfg's static list and the discovered
// members make, for the log. The discovery goroutine writes d.members
// (onDiscovered): read under d.mu, as the race detector found the
// "serving" line reading it bare while discovery's first list arrived.
func (d *Daemon) backendCount(cfg *config.Valid) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(cfg.Backends) + len(d.members)
}

// backendSet is the static list followed by the discovered members that
// are not already in it (same address or name), each with its source; a
// draining member stays in the set so its connections are kept. Each is
// as cfg writes backends (config.Valid.DiscoveredBackend): host:port in
// the one-port form, a host with [[port]] tables.
func backendSet(cfg *config.Valid, members []discovery.Member) (list []config.Backend, sources map[string]discovery.Source, draining map[string]bool) {
	sources = map[string]discovery.Source{}
	draining = map[string]bool{}
	list = slices.Clone(cfg.Backends)
	for _, b := range list {
		sources[b.Name] = discovery.Static
	}
	for _, m := range members {
		nb := cfg.DiscoveredBackend(m.Addr.String())
		if slices.ContainsFunc(list, func(b config.Backend) bool { return b.Address == nb.Address || b.Name == nb.Name }) {
			continue
		}
		list = append(list, nb)
		sources[nb.Name] = m.Source
		draining[nb.Name] = m.Draining()
	}
	return list, sources, draining
}

// applyBackends makes every port's pool and health checks follow the
// static list of the current config and the discovered members, and
// returns what each port removed. Reloads and discovery both come through
// here, one at a time, each reading both.
func (d *Daemon) applyBackends() (removed map[*portServer][]*balance.Backend) {
	d.setMu.Lock()
	defer d.setMu.Unlock()
	cfg := d.cfg.Load()
	d.mu.Lock()
	members := d.members
	d.mu.Unlock()
	list, sources, draining := backendSet(cfg, members)
	removed = map[*portServer][]*balance.Backend{}
	for _, ps := range d.servers() {
		removed[ps] = ps.apply(list, sources, draining)
	}
	return removed
}

// apply makes the port's pool and checks follow list; d.setMu is held.
func (ps *portServer) apply(list []config.Backend, sources map[string]discovery.Source, draining map[string]bool) (removed []*balance.Backend) {
	d := ps.d
	d.mu.Lock()
	old := ps.sources
	ps.sources = sources
	d.mu.Unlock()
	addressed := ps.addressed(list)
	_, removed = ps.pool.Update(addressed)
	for _, b := range ps.pool.Backends() {
		if src := sources[b.Name]; old[b.Name] != src {
			d.metrics.SetSource(ps.name, b.Name, string(src))
		}
		// Only the drains discovery started are ended by it: an operator's
		// drain through the admin endpoint stays.
		switch {
		case draining[b.Name] && !b.Draining():
			ps.pool.SetDraining(b, true)
			ps.drainedByDiscovery[b.Name] = true
		case !draining[b.Name] && ps.drainedByDiscovery[b.Name]:
			ps.pool.SetDraining(b, false)
			delete(ps.drainedByDiscovery, b.Name)
		}
	}
	for _, b := range removed {
		delete(ps.drainedByDiscovery, b.Name)
	}
	ps.checker.SetTargets(targetsOf(addressed))
	return removed
}

func targetsOf(list []config.Backend) []health.Target {
	ts := make([]health.Target, 0, len(list))
	for _, b := range list {
		ts = append(ts, health.Target{Name: b.Name, Address: b.Address})
	}
	return ts
}
