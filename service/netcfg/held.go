package netcfg

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// HeldVIPs reports, for each VIP, whether this node holds it on a link
// other than dummy (network.interface), where every node keeps it to
// serve locally: on an uplink it was put by keepalived, so this node is
// the one the network sends the VIP's traffic to.
func HeldVIPs(h *netlink.Handle, dummy string, vips []netip.Addr) (map[netip.Addr]bool, error) {
	addrs, err := h.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("list addresses: %w", err)
	}
	dummyIndex := -1
	if l, err := h.LinkByName(dummy); err == nil {
		dummyIndex = l.Attrs().Index
	}
	held := make(map[netip.Addr]bool, len(vips))
	for _, v := range vips {
		held[v] = false
	}
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if _, vip := held[ip.Unmap()]; ok && vip && a.LinkIndex != dummyIndex {
			held[ip.Unmap()] = true
		}
	}
	return held, nil
}
