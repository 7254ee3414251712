package doctor

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/vipproxy/vipproxy/service/config"
	"github.com/vipproxy/vipproxy/service/portowner"
	"github.com/vipproxy/vipproxy/service/units"
)

// checkListeners: every VIP of every configured port has a listening
// socket held by its socket unit (pid 1) or by the daemon, as the kernel
// shows it (/proc/net/tcp and tcp6, the holders from /proc/PID/fd): the
// drop-ins on disk say what should listen, this what does. One result a
// port.
func checkListeners(_ context.Context, h Host, cfg *config.Valid) []Result {
	var out []Result
	for i, p := range cfg.ServedPorts() {
		out = append(out, checkPortListener(h, cfg, i, p))
	}
	return out
}

func checkPortListener(h Host, cfg *config.Valid, i int, p config.Port) Result {
	unit := units.SocketUnit(cfg, i)
	ls, err := portowner.Listeners(h.Proc, p.Port)
	if err != nil {
		return fail("run as root on the node", "cannot read the listeners on port %d (%s): %v", p.Port, p.Name, err)
	}
	var held, missing []string
	for _, want := range units.ListenAddresses(cfg, p) {
		l, ok := listenerAt(ls, netip.MustParseAddrPort(want))
		switch {
		case !ok:
			missing = append(missing, want)
		case l.PID == 1:
			held = append(held, want+" by systemd ("+unit+")")
		case l.PID == 0 || portowner.Ours(l):
			held = append(held, l.String())
		default:
			return fail(portowner.Fix(l), "%s (port %s) is held by %s, not by %s or vipproxy", want, p.Name, l, unit)
		}
	}
	if len(missing) > 0 {
		return fail(listenerUnitFix(h, cfg, i), "nothing listens on %s (port %s): %s is not running or not listening there, and vipproxy serves no listener of its own",
			strings.Join(missing, ", "), p.Name, unit)
	}
	return pass("port %s (%d): %s", p.Name, p.Port, strings.Join(held, ", "))
}

// listenerAt finds the listening socket bound to addr itself.
func listenerAt(ls []portowner.Listener, addr netip.AddrPort) (portowner.Listener, bool) {
	for _, l := range ls {
		if l.Addr == addr {
			return l, true
		}
	}
	return portowner.Listener{}, false
}

// listenerUnitFix says how to get port i's socket unit listening.
func listenerUnitFix(h Host, cfg *config.Valid, i int) string {
	if h.Install.NixOS {
		return h.Install.fixes().socket
	}
	if i == 0 {
		return "vipproxy units write; systemctl daemon-reload; systemctl restart vipproxy.socket; journalctl -u vipproxy.socket"
	}
	return fmt.Sprintf("vipproxy units write (it installs the vipproxy-port@.socket template where none is); systemctl daemon-reload; "+
		"systemctl restart vipproxy.socket (its drop-in Wants= %s); journalctl -u %s", units.SocketUnit(cfg, i), units.SocketUnit(cfg, i))
}
