// Package listen provides the VIP listeners: the sockets systemd passes
// (socket activation, named "vip" and optionally "admin"), or, without
// systemd, sockets of our own bound with IP_FREEBIND so the VIP need not
// exist yet.
package listen

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"syscall"

	"github.com/coreos/go-systemd/v22/activation"
	"golang.org/x/sys/unix"
)

// Names of the sockets systemd passes (FileDescriptorName= in the unit).
const (
	NameVIP   = "vip"
	NameAdmin = "admin"
)

// Set is what the daemon listens on.
type Set struct {
	VIP   []net.Listener
	Admin net.Listener // nil unless systemd passed one named "admin"
	// Activated is true when the sockets came from systemd: closing ours
	// then leaves the socket and its backlog with systemd for the next start.
	Activated bool
}

// Close closes every listener in the set.
func (s *Set) Close() {
	for _, l := range s.VIP {
		l.Close()
	}
	if s.Admin != nil {
		s.Admin.Close()
	}
}

// Open takes the systemd-passed sockets if there are any (LISTEN_FDS), and
// otherwise listens on each VIP at port itself.
func Open(ctx context.Context, vips []netip.Addr, port uint16) (*Set, error) {
	named, err := activation.ListenersWithNames()
	if err != nil {
		return nil, fmt.Errorf("socket activation: %w", err)
	}
	if len(named) > 0 {
		return fromActivation(named)
	}
	set := &Set{}
	for _, vip := range vips {
		ln, err := freeBind(ctx, netip.AddrPortFrom(vip, port))
		if err != nil {
			set.Close()
			return nil, err
		}
		set.VIP = append(set.VIP, ln)
	}
	return set, nil
}

func fromActivation(named map[string][]net.Listener) (*Set, error) {
	set := &Set{VIP: named[NameVIP], Activated: true}
	if admin := named[NameAdmin]; len(admin) > 0 {
		set.Admin = admin[0]
	}
	if len(set.VIP) == 0 {
		names := make([]string, 0, len(named))
		for n, ls := range named {
			for _, l := range ls {
				l.Close()
			}
			names = append(names, n)
		}
		slices.Sort(names)
		return nil, fmt.Errorf("socket activation: systemd passed sockets named %q but none named %q: set FileDescriptorName=%s in vipproxy.socket", names, NameVIP, NameVIP)
	}
	return set, nil
}

// freeBind listens on addr with IP_FREEBIND (IPV6_FREEBIND for IPv6), so
// the address need not be configured on this host yet.
func freeBind(ctx context.Context, addr netip.AddrPort) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(network, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			if addr.Addr().Is4() {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_FREEBIND, 1)
			} else {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_IPV6, unix.IPV6_FREEBIND, 1)
			}
		})
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
