package config

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
)

// A backend that is one of vipproxy's own listeners loops the proxy into
// itself: each client connection becomes a connection to the VIP, which
// becomes another, until the descriptors run out (measured: 1,012
// self-connections, the admin endpoint unreachable). These rules refuse
// such a backend, by IP at validation and by name once resolved.

// Listener is one address vipproxy listens on, with what it is for.
type Listener struct {
	Addr netip.AddrPort // an unspecified address listens on every local one
	What string         // "the VIP listener", adminListener
}

// Listeners returns the addresses vipproxy itself listens on: every VIP on
// every port it serves, and admin.listen when it is host:port with a fixed
// port.
func (c *Config) Listeners() []Listener {
	var ls []Listener
	for _, p := range c.servedPorts() {
		what := "the VIP listener"
		if len(c.Ports) > 0 {
			what += " of port " + p.Name
		}
		for _, a := range c.VIP.Addresses {
			ls = append(ls, Listener{netip.AddrPortFrom(a.Unmap().WithZone(""), p.Port), what})
		}
	}
	host, port, err := net.SplitHostPort(c.Admin.Listen)
	p, ok := parsePort(port)
	if err != nil || !ok || p == 0 || strings.HasPrefix(c.Admin.Listen, "unix:") {
		return ls
	}
	var addrs []netip.Addr
	switch ip, err := netip.ParseAddr(host); {
	case strings.EqualFold(host, "localhost"):
		addrs = []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}
	case host == "":
		addrs = []netip.Addr{netip.IPv6Unspecified()}
	case err == nil:
		addrs = []netip.Addr{ip.Unmap().WithZone("")}
	}
	for _, a := range addrs {
		ls = append(ls, Listener{netip.AddrPortFrom(a, p), adminListener})
	}
	return ls
}

// loopsInto reports which of our listeners a dial to dst reaches, if any.
// A dial to 0.0.0.0 or :: reaches the local host; a listener on the
// unspecified address takes dials to a loopback address or a VIP.
func (c *Config) loopsInto(dst netip.AddrPort) (string, bool) {
	ls := c.Listeners()
	d := dst.Addr().Unmap().WithZone("")
	for _, l := range ls {
		if l.Addr.Port() != dst.Port() {
			continue
		}
		a := l.Addr.Addr()
		if a == d || d.IsUnspecified() || a.IsUnspecified() && (d.IsLoopback() || c.isVIP(d)) {
			return fmt.Sprintf("%s (%s)", l.What, l.Addr), true
		}
	}
	return "", false
}

func (c *Config) isVIP(ip netip.Addr) bool {
	for _, a := range c.VIP.Addresses {
		if a.Unmap().WithZone("") == ip {
			return true
		}
	}
	return false
}

// lookupFunc resolves a host name to its addresses (net.Resolver.LookupNetIP
// with network "ip").
type lookupFunc func(ctx context.Context, host string) ([]netip.Addr, error)

// resolveTimeout bounds all the lookups of one checkNames.
const resolveTimeout = 3 * time.Second

// checkNames resolves the backend names whose port is one of our listeners'
// and refuses a name that resolves to such a listener. A name that does not
// resolve is not an error: it is a backend that is down until it does.
func (c *Valid) checkNames(ctx context.Context, lookup lookupFunc) error {
	ports := map[uint16]bool{}
	for _, l := range c.Listeners() {
		ports[l.Addr.Port()] = true
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	for i, b := range c.Backends {
		if err := c.checkName(ctx, lookup, i, b, ports); err != nil {
			return err
		}
	}
	return nil
}

// checkName resolves backend i at each port it is dialed on that is one of
// our listeners' ports.
func (c *Valid) checkName(ctx context.Context, lookup lookupFunc, i int, b Backend, ports map[uint16]bool) error {
	for _, sp := range c.ServedPorts() {
		addr := sp.BackendAddress(b)
		host, port, err := net.SplitHostPort(addr)
		p, ok := parsePort(port)
		if err != nil || !ok || !ports[p] {
			continue
		}
		if _, err := netip.ParseAddr(host); err == nil {
			continue // an IP: validation has judged it
		}
		addrs, err := lookup(ctx, host)
		if err != nil {
			continue
		}
		for _, a := range addrs {
			a = a.Unmap()
			if l, loops := c.loopsInto(netip.AddrPortFrom(a, p)); loops {
				return &Error{File: c.Path, Key: fmt.Sprintf("backend[%d].address", i),
					Reason: fmt.Sprintf("%q resolves to %s, which reaches %s: the proxy would connect to itself", addr, a, l)}
			}
		}
	}
	return nil
}

// systemLookup resolves with the host's resolver (/etc/hosts, DNS).
func systemLookup(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}
