package daemon

import (
	"syscall"

	"github.com/vipproxy/vipproxy/service/admin"
	"github.com/vipproxy/vipproxy/service/config"
	"github.com/vipproxy/vipproxy/service/proxy"
)

// maxConnections is the connection cap in force, on every port together
// (the proxies share one count, proxy.ShareCap): limits.max_connections
// when set, else derived from RLIMIT_NOFILE (proxy.DerivedMaxConnections),
// so that a client flood is refused before it takes the descriptors of
// the health checks and the admin endpoint. derived tells which, and
// fits is the derived value (for a warning when the configured one is
// larger).
func maxConnections(cfg *config.Valid) (limit int, derived bool, fits int) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil {
		// Discovery may add up to max_backends more, each with its checks;
		// each port checks and dials every backend.
		backends := len(cfg.Backends)
		if cfg.Discovery.Enable {
			backends += cfg.Discovery.MaxBackends
		}
		backends *= len(cfg.ServedPorts())
		fits = proxy.DerivedMaxConnections(rl.Cur, backends, admin.MaxConns)
	}
	if cfg.Limits.MaxConnections > 0 || fits == 0 {
		return cfg.Limits.MaxConnections, false, fits
	}
	return fits, true, fits
}

// applyMaxConnections logs and exports the cap for cfg and returns it.
func (d *Daemon) applyMaxConnections(cfg *config.Valid) int {
	limit, derived, fits := maxConnections(cfg)
	d.metrics.MaxConnections.Set(float64(limit))
	switch {
	case derived:
		d.log.Info("connection cap derived from the descriptor limit (set limits.max_connections to choose one)", "max_connections", limit)
	case fits > 0 && limit > fits:
		d.log.Warn("limits.max_connections is more than the descriptor limit holds: a flood would exhaust descriptors before the cap, and health checks fail for a local reason",
			"max_connections", limit, "fits", fits)
	}
	return limit
}
