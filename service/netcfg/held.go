package netcfg

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// HeldVIPs reports, for each VIP, the link on which this node holds it,
// or "" when it does not: a link other than dummy (network.interface),
// where every node keeps the VIP to serve it locally. On an uplink it was
// put by keepalived, so this node is the one the network sends the VIP's
// traffic to. It is the one answer to "does this node hold the VIP", for
// vipproxy_vip_held and `vipproxy status` alike.
func HeldVIPs(h *netlink.Handle, dummy string, vips []netip.Addr) (map[netip.Addr]string, error) {
	addrs, err := h.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, err
	}
	dummyIndex := -1
	if l, err := h.LinkByName(dummy); err == nil {
		dummyIndex = l.Attrs().Index
	}
	held := make(map[netip.Addr]string, len(vips))
	for _, v := range vips {
		held[v] = ""
	}
	for _, a := range addrs {
		ip := AddrPrefix(a).Addr()
		if link, vip := held[ip]; !vip || link != "" || a.LinkIndex == dummyIndex {
			continue
		}
		held[ip] = linkName(h, a.LinkIndex)
	}
	return held, nil
}

// HeldVIPsHere is HeldVIPs in this process's network namespace.
func HeldVIPsHere(dummy string, vips []netip.Addr) (map[netip.Addr]string, error) {
	h, err := OpenNetlink()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	return HeldVIPs(h, dummy, vips)
}

// linkName names the link with index i; a link gone meanwhile keeps its
// number, so that the VIP still counts as held.
func linkName(h *netlink.Handle, i int) string {
	if l, err := h.LinkByIndex(i); err == nil {
		return l.Attrs().Name
	}
	return fmt.Sprintf("link#%d", i)
}
