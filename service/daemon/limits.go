package daemon

import (
	"syscall"

	"github.com/vipproxy/vipproxy/service/admin"
	"github.com/vipproxy/vipproxy/service/config"
	"github.com/vipproxy/vipproxy/service/proxy"
)

// minClientConnections is the least derived connection cap that is not
// logged as a warning: a control-plane node's own clients (the kubelet,
// kube-proxy, the CNI agent, the controller-manager and the scheduler)
// hold dozens of watches, and every other node's come too while this node
// holds the VIP. Measured: with `ulimit -n 1024` and 450 backends the
// derived cap was 1, logged at INFO, and 1 of 5 clients was served.
const minClientConnections = 64

// connCap is the connection cap in force, on every port together (the
// proxies share one count, proxy.ShareCap), and what it was derived from.
type connCap struct {
	limit   int    // in force: limits.max_connections, else fits
	derived bool   // limit is fits
	fits    int    // what the descriptor limit holds; 0 when unknown
	nofile  uint64 // RLIMIT_NOFILE's soft limit
	checked int    // backends checked and dialed, times the ports
}

// maxConnections is the connection cap for cfg: limits.max_connections
// when set, else derived from RLIMIT_NOFILE (proxy.DerivedMaxConnections),
// so that a client flood is refused before it takes the descriptors of
// the health checks and the admin endpoint.
func maxConnections(cfg *config.Valid) connCap {
	var c connCap
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil {
		// Discovery may add up to max_backends more, each with its checks;
		// each port checks and dials every backend.
		backends := len(cfg.Backends)
		if cfg.Discovery.Enable {
			backends += cfg.Discovery.MaxBackends
		}
		c.checked = backends * len(cfg.ServedPorts())
		c.nofile = rl.Cur
		c.fits = proxy.DerivedMaxConnections(rl.Cur, c.checked, admin.MaxConns)
	}
	c.limit = cfg.Limits.MaxConnections
	if c.limit == 0 && c.fits > 0 {
		c.limit, c.derived = c.fits, true
	}
	return c
}

// nofileFor is the least descriptor limit whose derived cap is at least
// want, for the warning to name.
func (c connCap) nofileFor(want int) uint64 {
	n := uint64(1024)
	for n < 1<<30 && proxy.DerivedMaxConnections(n, c.checked, admin.MaxConns) < want {
		n *= 2
	}
	return n
}

// applyMaxConnections logs and exports the cap for cfg and returns it.
func (d *Daemon) applyMaxConnections(cfg *config.Valid) int {
	c := maxConnections(cfg)
	d.metrics.MaxConnections.Set(float64(c.limit))
	switch {
	case c.derived && c.limit < minClientConnections:
		d.log.Warn("the descriptor limit leaves few client connections after the health checks and the admin endpoint: raise LimitNOFILE (ulimit -n) or check fewer backends",
			"max_connections", c.limit, "want_at_least", minClientConnections, "nofile", c.nofile, "checked_backends", c.checked, "nofile_for_it", c.nofileFor(minClientConnections))
	case c.derived:
		d.log.Info("connection cap derived from the descriptor limit (set limits.max_connections to choose one)", "max_connections", c.limit)
	case c.fits > 0 && c.limit > c.fits:
		d.log.Warn("limits.max_connections is more than the descriptor limit holds: a flood would exhaust descriptors before the cap, and health checks fail for a local reason",
			"max_connections", c.limit, "fits", c.fits)
	}
	return c.limit
}
