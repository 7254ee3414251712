// Package announce holds the VIPs on the announce link while the local
// proxy is ready, for BIRD to export by BGP (vip.mode = "bgp").
//
// The link is a TUN device without the persist flag: the kernel removes it,
// with its addresses, when the last descriptor of it closes, so when the
// process that holds it ends in any way, SIGKILL and OOM kill included.
// BIRD's direct protocol hears the link go by netlink and BGP withdraws
// the VIP at once; no stale announcement can outlive the holder. A route
// in a kernel table or a birdc command would stay behind a killed process
// until something else noticed.
package announce

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vipproxy/vipproxy/service/netcfg"
)

// Link is the announce link, present while it is open.
type Link struct {
	name  string
	file  *os.File
	index int // the kernel's index of the device Open made
}

// Open creates the TUN device name, sets it up and adds each VIP as a
// host prefix. On any error nothing is left behind. A device of that name
// that exists already is refused, never taken over: vipproxy's own goes
// with the process that holds it, so it is another program's (a persistent
// TUN device of someone's `ip tuntap add` was attached to, made
// non-persistent and so destroyed at the next withdrawal) or a second
// vipproxy announce's.
func Open(name string, vips []netip.Addr) (*Link, error) {
	if _, err := net.InterfaceByName(name); err == nil {
		return nil, fmt.Errorf("announce link %s: a device of that name exists and this process did not create it (another program's, or a second vipproxy announce's): choose another bgp.interface or remove that device", name)
	}
	f, err := createTUN(name)
	if err != nil {
		return nil, err
	}
	l := &Link{name: name, file: f}
	if err := l.configure(vips); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// createTUN opens /dev/net/tun as the IP-only device name. TUNSETPERSIST 0:
// a persistent device of that name (someone's `ip tuntap add`) would
// otherwise outlive us.
func createTUN(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("announce link %s: open /dev/net/tun: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), "/dev/net/tun")
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("announce link %s: %w", name, err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		f.Close()
		if errors.Is(err, unix.EBUSY) {
			err = fmt.Errorf("%w (another process holds it: is a second vipproxy announce running?)", err)
		}
		return nil, fmt.Errorf("announce link %s: create TUN device: %w", name, err)
	}
	if err := unix.IoctlSetInt(fd, unix.TUNSETPERSIST, 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("announce link %s: clear persist: %w", name, err)
	}
	return f, nil
}

// configure adds the VIPs and sets the link up. IPv6 addresses skip
// duplicate address detection: every node holds the VIP by design, and a
// tentative address is not exported.
func (l *Link) configure(vips []netip.Addr) error {
	h, err := netcfg.OpenNetlink()
	if err != nil {
		return fmt.Errorf("announce link %s: %w", l.name, err)
	}
	defer h.Close()
	link, err := h.LinkByName(l.name)
	if err != nil {
		return fmt.Errorf("announce link %s: %w", l.name, err)
	}
	l.index = link.Attrs().Index
	for _, vip := range vips {
		if err := h.AddrReplace(link, netcfg.HostAddr(vip)); err != nil {
			return fmt.Errorf("announce link %s: add %s: %w", l.name, vip, err)
		}
	}
	if err := h.LinkSetUp(link); err != nil {
		return fmt.Errorf("announce link %s: set up: %w", l.name, err)
	}
	return nil
}

// Close removes the link: it was the last descriptor.
func (l *Link) Close() error {
	if err := l.file.Close(); err != nil {
		return fmt.Errorf("announce link %s: close: %w", l.name, err)
	}
	return nil
}

// Announced reports whether the announce link name is up and holds every
// VIP: what BIRD exports now (vipproxy_bgp_announced, doctor). A missing
// link is no error: it is not announcing.
func Announced(name string, vips []netip.Addr) (bool, error) {
	why, err := linkDiffers(name, 0, vips)
	return why == "" && err == nil, err
}

// Changed says how the link differs from what Open made (gone, replaced
// by another device of its name, down, or without a VIP: someone's `ip
// link del` or `ip addr flush`), "" when it does not: then BIRD would
// export less than the proxy's readiness says.
func (l *Link) Changed(vips []netip.Addr) (string, error) {
	return linkDiffers(l.name, l.index, vips)
}

// linkDiffers is why the link name (of index index; 0: any) is not up
// with every VIP, "" when it is.
func linkDiffers(name string, index int, vips []netip.Addr) (string, error) {
	h, err := netcfg.OpenNetlink()
	if err != nil {
		return "", fmt.Errorf("announce link %s: %w", name, err)
	}
	defer h.Close()
	link, err := h.LinkByName(name)
	switch {
	case netcfg.IsLinkNotFound(err):
		return "the link is gone", nil
	case err != nil:
		return "", fmt.Errorf("announce link %s: %w", name, err)
	case index != 0 && link.Attrs().Index != index:
		return fmt.Sprintf("another device (index %d) took the name", link.Attrs().Index), nil
	case link.Attrs().Flags&net.FlagUp == 0:
		return "the link is down", nil
	}
	addrs, err := h.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		return "", fmt.Errorf("announce link %s: addresses: %w", name, err)
	}
	have := map[netip.Addr]bool{}
	for _, a := range addrs {
		have[netcfg.AddrPrefix(a).Addr()] = true
	}
	for _, vip := range vips {
		if !have[vip] {
			return fmt.Sprintf("the link lost %s", vip), nil
		}
	}
	return "", nil
}
