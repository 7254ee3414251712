package netcfg

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/vipproxy/vipproxy/service/config"
)

// NodeLocalNote is what `network` says on a node whose mode needs no host
// network setup (vip.mode = "node-local"): nothing is rendered or applied.
func NodeLocalNote(cfg *config.Valid) string {
	return fmt.Sprintf("vip.mode = %q: the VIP %s is a loopback address of this node only; "+
		"there is no dummy link, VIP address or ARP sysctl to set up", cfg.VIP.Mode, joinAddrs(cfg))
}

// Leftovers lists what a vrrp setup leaves behind that a node-local node
// must not keep: vipproxy's networkd and sysctl drop-ins (networkd would
// bring the dummy link back at boot, with the old VIP on it) and the dummy
// link itself. h may be nil (files only).
func Leftovers(h *netlink.Handle, cfg *config.Valid, root string) []string {
	var out []string
	for _, f := range Render(cfg, root).List() {
		if _, err := os.Lstat(f.Path); err == nil {
			out = append(out, f.Path)
		}
	}
	if h != nil {
		if _, err := h.LinkByName(cfg.Network.Interface); err == nil {
			out = append(out, "link "+cfg.Network.Interface)
		}
	}
	return out
}

// LeftoversFix is the one command that removes Leftovers.
const LeftoversFix = "vipproxy network remove (it deletes vipproxy's networkd and sysctl drop-ins and the dummy link)"

// VerifyNodeLocal is Verify for a node-local node: lo is up and holds each
// VIP (127.0.0.0/8 as a whole, ::1 when IPv6 is on), and nothing of a vrrp
// setup is left.
func VerifyNodeLocal(h *netlink.Handle, cfg *config.Valid, root string) []string {
	var problems []string
	if left := Leftovers(h, cfg, root); len(left) > 0 {
		problems = append(problems, fmt.Sprintf("left from a vrrp setup: %s; remove them: %s", strings.Join(left, ", "), LeftoversFix))
	}
	lo, err := h.LinkByName("lo")
	if err != nil {
		return append(problems, err.Error())
	}
	if lo.Attrs().Flags&net.FlagUp == 0 {
		return append(problems, "link lo is down: no loopback VIP can answer")
	}
	addrs, err := h.AddrList(lo, netlink.FAMILY_ALL)
	if err != nil {
		return append(problems, fmt.Sprintf("list addresses of lo: %v", err))
	}
	for _, vip := range cfg.VIP.Addresses {
		if !onLink(addrs, vip) {
			problems = append(problems, fmt.Sprintf("lo holds no address covering the VIP %s (IPv6 off on lo?)", vip))
		}
	}
	return problems
}

// onLink: some address of the link has a prefix holding ip.
func onLink(addrs []netlink.Addr, ip netip.Addr) bool {
	for _, a := range addrs {
		if AddrPrefix(a).Contains(ip) {
			return true
		}
	}
	return false
}

func joinAddrs(cfg *config.Valid) string {
	var s []string
	for _, a := range cfg.VIP.Addresses {
		s = append(s, a.String())
	}
	return strings.Join(s, ", ")
}
