// Package listen provides the VIP listeners, one per VIP and port: the
// sockets systemd passes (socket activation, sorted into ports by the port
// they are bound to, and optionally one named "admin"), or, without
// systemd, sockets of our own bound with IP_FREEBIND so the VIP need not
// exist yet.
package listen

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"syscall"

	"github.com/coreos/go-systemd/v22/activation"
	"golang.org/x/sys/unix"

	"github.com/vipproxy/vipproxy/service/config"
)

// Names of the sockets systemd passes (FileDescriptorName= in the unit):
// vipproxy.socket's are named "vip" (the one-port form) or after the port
// they serve; vipproxy-port@NAME.socket's after their port.
const (
	NameVIP   = "vip"
	NameAdmin = "admin"
)

// Set is what the daemon listens on.
type Set struct {
	// Ports holds each served port's listeners (one per VIP), by port name.
	Ports map[string][]net.Listener
	Admin net.Listener // nil unless systemd passed one named "admin"
	// Activated is true when the sockets came from systemd: closing ours
	// then leaves the socket and its backlog with systemd for the next start.
	Activated bool
	// Notes say what did not match the config: a passed socket that serves
	// no configured port (closed), a port systemd passed no socket for
	// (bound by us), a socket whose name is another port's.
	Notes []string
}

// Close closes every listener in the set.
func (s *Set) Close() {
	for _, ls := range s.Ports {
		for _, l := range ls {
			l.Close()
		}
	}
	if s.Admin != nil {
		s.Admin.Close()
	}
}

// Open takes the systemd-passed sockets if there are any (LISTEN_FDS), and
// otherwise listens on each VIP at each port itself.
func Open(ctx context.Context, vip config.VIP, ports []config.Port) (*Set, error) {
	return OpenFiles(ctx, activation.Files(true), vip, ports)
}

// OpenFiles is Open on the descriptors systemd passed, taken from the
// environment by the caller (activation.Files): those that are not
// listening sockets are closed.
func OpenFiles(ctx context.Context, files []*os.File, vip config.VIP, ports []config.Port) (*Set, error) {
	named := map[string][]net.Listener{}
	for _, f := range files {
		if ln, err := net.FileListener(f); err == nil {
			named[f.Name()] = append(named[f.Name()], ln)
		}
		f.Close()
	}
	if len(named) > 0 {
		return fromActivation(ctx, named, vip, ports)
	}
	set := &Set{Ports: map[string][]net.Listener{}}
	for _, p := range ports {
		ls, err := OpenPort(ctx, vip, p.Port)
		if err != nil {
			set.Close()
			return nil, err
		}
		set.Ports[p.Name] = ls
	}
	return set, nil
}

// OpenPort listens on each VIP at port, with IP_FREEBIND, and with
// SO_REUSEPORT where vip.ReusePort says so.
func OpenPort(ctx context.Context, vip config.VIP, port uint16) ([]net.Listener, error) {
	var ls []net.Listener
	for _, a := range vip.Addresses {
		ln, err := freeBind(ctx, netip.AddrPortFrom(a, port), vip.ReusePort)
		if err != nil {
			for _, l := range ls {
				l.Close()
			}
			return nil, err
		}
		ls = append(ls, ln)
	}
	return ls, nil
}

// fromActivation sorts the passed sockets into ports by the port they are
// bound to, the one fact a socket cannot get wrong (FileDescriptorName= is
// per socket unit, and a unit edited by hand may carry another port's
// name). A socket for no configured port is closed; a port without a
// socket is bound here, so a port added before the socket units were
// rewritten serves anyway.
func fromActivation(ctx context.Context, named map[string][]net.Listener, vip config.VIP, ports []config.Port) (*Set, error) {
	set := &Set{Ports: map[string][]net.Listener{}, Activated: true}
	if admin := named[NameAdmin]; len(admin) > 0 {
		set.Admin = admin[0]
	}
	names := make([]string, 0, len(named))
	for n := range named {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		if name != NameAdmin {
			set.sort(name, named[name], ports, vip.ReusePort)
		}
	}
	if len(set.Ports) == 0 {
		set.Close()
		return nil, fmt.Errorf("socket activation: systemd passed sockets named %q but none on a VIP port: set FileDescriptorName=%s in vipproxy.socket and run `vipproxy units write`", names, NameVIP)
	}
	for _, p := range ports {
		if len(set.Ports[p.Name]) > 0 {
			continue
		}
		ls, err := OpenPort(ctx, vip, p.Port)
		if err != nil {
			set.Close()
			return nil, fmt.Errorf("port %s: systemd passed no socket for it and: %w", p.Name, err)
		}
		set.Ports[p.Name] = ls
		set.Notes = append(set.Notes, fmt.Sprintf("port %s (%d): systemd passed no socket for it; listening on our own until `vipproxy units write && %s`", p.Name, p.Port, RestartHint))
	}
	return set, nil
}

// RestartHint rebinds the activated sockets after their units changed:
// systemd binds a socket unit's listeners only when the unit starts, and
// neither daemon-reload nor a restart of vipproxy.service rebinds them.
const RestartHint = "systemctl daemon-reload && systemctl restart vipproxy.socket"

// sort files the listeners systemd passed under name into their ports,
// noting a socket bound otherwise than vip.reuse_port says: its unit was
// not rewritten, or not restarted, since the key changed.
func (s *Set) sort(name string, ls []net.Listener, ports []config.Port, reusePort bool) {
	for _, l := range ls {
		i := slices.IndexFunc(ports, func(p config.Port) bool { return p.Port == localPort(l) })
		if i < 0 {
			s.Notes = append(s.Notes, fmt.Sprintf("systemd passed a socket named %q on %s, which is no configured port: not served (stop its socket unit, or run `vipproxy units write && %s`)", name, l.Addr(), RestartHint))
			l.Close()
			continue
		}
		p := ports[i]
		if name != NameVIP && name != p.Name {
			s.Notes = append(s.Notes, fmt.Sprintf("systemd passed a socket named %q on %s: it serves port %s, whose number it has", name, l.Addr(), p.Name))
		}
		if shared, err := reusesPort(l); err == nil && shared != reusePort {
			s.Notes = append(s.Notes, reusePortNote(name, l, reusePort))
		}
		s.Ports[p.Name] = append(s.Ports[p.Name], l)
	}
}

// reusePortNote says what a passed socket bound otherwise than
// vip.reuse_port means, and how to bind it again.
func reusePortNote(name string, l net.Listener, reusePort bool) string {
	what := "without SO_REUSEPORT, but vip.reuse_port is true: a listener on every address that shares the port (RKE2's kube-apiserver on *:6443 with permit-port-sharing) cannot bind while it is held"
	if !reusePort {
		what = "with SO_REUSEPORT, but vip.reuse_port is false: another listener on the port that sets it too may share it"
	}
	return fmt.Sprintf("systemd passed a socket named %q on %s bound %s; run `vipproxy units write && %s` (ReusePort= in the socket units)", name, l.Addr(), what, RestartHint)
}

// reusesPort reports whether l was bound with SO_REUSEPORT.
func reusesPort(l net.Listener) (bool, error) {
	sc, ok := l.(syscall.Conn)
	if !ok {
		return false, errors.New("not a socket")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false, err
	}
	var v int
	var serr error
	if err := raw.Control(func(fd uintptr) { v, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT) }); err != nil {
		return false, err
	}
	return v != 0, serr
}

func localPort(l net.Listener) uint16 {
	if a, ok := l.Addr().(*net.TCPAddr); ok {
		return uint16(a.Port)
	}
	return 0
}

// freeBind listens on addr with IP_FREEBIND (IPV6_FREEBIND for IPv6), so
// the address need not be configured on this host yet.
func freeBind(ctx context.Context, addr netip.AddrPort, reusePort bool) (net.Listener, error) {
	// KeepAlive -1: Go's accept then sets no keepalive of its own on each
	// socket (4 system calls a connection); the proxy sets the configured
	// keepalive on the listener once, and Linux copies it to every socket
	// the listener accepts.
	lc := net.ListenConfig{KeepAlive: -1, Control: func(network, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = bindOptions(int(fd), addr.Addr(), reusePort) })
		if err != nil {
			return err
		}
		return serr
	}}
	// Go 1.24+ makes listeners MPTCP by default. Plain TCP is what systemd
	// hands over too, keeps accept cheap, and allows TCP_USER_TIMEOUT on
	// the listener (MPTCP refuses it) for every accepted socket to inherit.
	lc.SetMultipathTCP(false)
	network := "tcp4"
	if addr.Addr().Is6() {
		network = "tcp6"
	}
	ln, err := lc.Listen(ctx, network, net.JoinHostPort(addr.Addr().String(), strconv.Itoa(int(addr.Port()))))
	if err != nil {
		return nil, fmt.Errorf("listen on %s with IP_FREEBIND: %w", addr, err)
	}
	return ln, nil
}

// bindOptions sets what a VIP listener is bound with: IP_FREEBIND
// (IPV6_FREEBIND), and SO_REUSEPORT with vip.reuse_port.
func bindOptions(fd int, vip netip.Addr, reusePort bool) error {
	var err error
	if vip.Is4() {
		err = unix.SetsockoptInt(fd, unix.SOL_IP, unix.IP_FREEBIND, 1)
	} else {
		err = unix.SetsockoptInt(fd, unix.SOL_IPV6, unix.IPV6_FREEBIND, 1)
	}
	if err == nil && reusePort {
		err = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	}
	return err
}

// CanBind reports whether the listeners of port could bind every VIP now:
// it binds a socket with their options (Go's SO_REUSEADDR too) and closes
// it. It never listens: a listening socket would join a shared port's
// group and take connections.
func CanBind(vip config.VIP, port uint16) error {
	for _, a := range vip.Addresses {
		if err := bindOnly(netip.AddrPortFrom(a, port), vip.ReusePort); err != nil {
			return fmt.Errorf("bind %s: %w", netip.AddrPortFrom(a, port), err)
		}
	}
	return nil
}

func bindOnly(addr netip.AddrPort, reusePort bool) error {
	var family int
	var sa unix.Sockaddr
	if addr.Addr().Is4() {
		family, sa = unix.AF_INET, &unix.SockaddrInet4{Port: int(addr.Port()), Addr: addr.Addr().As4()}
	} else {
		family, sa = unix.AF_INET6, &unix.SockaddrInet6{Port: int(addr.Port()), Addr: addr.Addr().As16()}
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return err
	}
	if err := bindOptions(fd, addr.Addr(), reusePort); err != nil {
		return err
	}
	return unix.Bind(fd, sa)
}
