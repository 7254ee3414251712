package netcfg

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// netlinkTimeout bounds the wait for the kernel's answer to one request:
// it answers at once, so a request that waits this long has gone wrong,
// and the caller gets an error instead of a hang.
const netlinkTimeout = 10 * time.Second

// OpenNetlink opens a route-netlink handle (github.com/vishvananda/netlink)
// in this process's network namespace.
func OpenNetlink() (*netlink.Handle, error) {
	return withTimeout(netlink.NewHandle(unix.NETLINK_ROUTE))
}

// OpenNetlinkAt opens a route-netlink handle in the network namespace that
// the descriptor ns refers to (a /proc/<pid>/ns/net or /run/netns/<name>
// file); its socket stays in that namespace for its life.
func OpenNetlinkAt(ns int) (*netlink.Handle, error) {
	return withTimeout(netlink.NewHandleAt(netns.NsHandle(ns), unix.NETLINK_ROUTE))
}

func withTimeout(h *netlink.Handle, err error) (*netlink.Handle, error) {
	if err != nil {
		return nil, fmt.Errorf("open netlink socket: %w", err)
	}
	if err := h.SetSocketTimeout(netlinkTimeout); err != nil {
		h.Close()
		return nil, fmt.Errorf("netlink socket timeout: %w", err)
	}
	return h, nil
}

// IsLinkNotFound reports whether err says no link has the name or index.
func IsLinkNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf)
}

// AddrPrefix is a's address with its prefix length.
func AddrPrefix(a netlink.Addr) netip.Prefix {
	ip, _ := netip.AddrFromSlice(a.IP)
	ones, _ := a.Mask.Size()
	if ip.Is4In6() && ones > 32 {
		ones -= 96
	}
	return netip.PrefixFrom(ip.Unmap(), ones)
}

// HostAddr is vip as a host prefix to add to a link: IPv6 without
// duplicate address detection (every node holds the VIP by design, and a
// tentative address is neither served nor exported).
func HostAddr(vip netip.Addr) *netlink.Addr {
	p := hostPrefix(vip)
	a := &netlink.Addr{IPNet: &net.IPNet{IP: vip.AsSlice(), Mask: net.CIDRMask(p.Bits(), vip.BitLen())}}
	if vip.Is6() {
		a.Flags = unix.IFA_F_NODAD
	}
	return a
}

// InNetNS runs fn on a thread in the network namespace ns (a descriptor of
// /proc/<pid>/ns/net or /run/netns/<name>). The thread goes back to its
// own namespace after; if it cannot, it is never reused (the goroutine
// ends locked to it, so the runtime ends the thread).
func InNetNS(ns int, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("open this thread's network namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(netns.NsHandle(ns)); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("enter network namespace: %w", err)
			return
		}
		fnErr := fn()
		if err := netns.Set(orig); err != nil {
			done <- errors.Join(fnErr, fmt.Errorf("return to this thread's network namespace: %w", err))
			return
		}
		runtime.UnlockOSThread()
		done <- fnErr
	}()
	return <-done
}
