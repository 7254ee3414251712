package netcfg

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/vipproxy/vipproxy/service/config"
)

// Verify checks the live state against cfg and returns one line per
// problem; none means the host is set up. h selects the network namespace
// (OpenNetlinkAt), sys the /proc/sys view of the same namespace.
//
// Checked: the VIP link exists, is administratively up and not
// operationally down (a dummy link reports "unknown", which is fine), holds
// each VIP; each uplink exists and has arp_ignore=1, arp_announce=2; and
// all/default arp_ignore are 0, since the kernel uses the maximum of "all"
// and the interface value, which breaks pod -> VIP hairpin traffic.
func Verify(h *netlink.Handle, sys Sysctl, cfg *config.Valid) []string {
	return append(VerifyLink(h, cfg), VerifyARP(sys, cfg)...)
}

// VerifyLink is Verify's part about the VIP link and its addresses.
func VerifyLink(h *netlink.Handle, cfg *config.Valid) []string { return verifyLink(h, cfg) }

// VerifyARP is Verify's part about the ARP sysctls: per uplink, and
// all/default untouched.
func VerifyARP(sys Sysctl, cfg *config.Valid) []string {
	var problems []string
	for _, up := range cfg.Network.Uplinks {
		problems = append(problems, verifyUplink(sys, up)...)
	}
	for _, scope := range []string{"all", "default"} {
		v, err := sys.Get(scope, "arp_ignore")
		if err != nil {
			problems = append(problems, err.Error())
		} else if v != 0 {
			problems = append(problems, fmt.Sprintf("net.ipv4.conf.%s.arp_ignore is %d, want 0: it reaches pod veths and breaks pod -> VIP hairpin; set ARP per uplink only", scope, v))
		}
	}
	return problems
}

func verifyLink(h *netlink.Handle, cfg *config.Valid) []string {
	name := cfg.Network.Interface
	link, err := h.LinkByName(name)
	if err != nil {
		if IsLinkNotFound(err) {
			return []string{fmt.Sprintf("link %s does not exist", name)}
		}
		return []string{err.Error()}
	}
	var problems []string
	if link.Attrs().Flags&net.FlagUp == 0 {
		problems = append(problems, fmt.Sprintf("link %s is down (administratively)", name))
	} else if s := link.Attrs().OperState; s != netlink.OperUp && s != netlink.OperUnknown {
		problems = append(problems, fmt.Sprintf("link %s is up but its operational state is %s", name, s))
	}
	have, err := linkAddrs(h, link)
	if err != nil {
		return append(problems, err.Error())
	}
	for _, vip := range cfg.VIP.Addresses {
		if !have[vip] {
			problems = append(problems, fmt.Sprintf("link %s lacks VIP %s", name, hostPrefix(vip)))
		}
	}
	return problems
}

func verifyUplink(sys Sysctl, up string) []string {
	var problems []string
	for _, want := range UplinkSettings {
		v, err := sys.Get(up, want.Name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return []string{fmt.Sprintf("uplink %s does not exist", up)}
		case err != nil:
			problems = append(problems, err.Error())
		case v != want.Value:
			problems = append(problems, fmt.Sprintf("net.ipv4.conf.%s.%s is %d, want %d", up, want.Name, v, want.Value))
		}
	}
	return problems
}

// linkAddrs returns the addresses on link, IPv4 and IPv6.
func linkAddrs(h *netlink.Handle, link netlink.Link) (map[netip.Addr]bool, error) {
	addrs, err := h.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("list addresses of %s: %w", link.Attrs().Name, err)
	}
	have := map[netip.Addr]bool{}
	for _, a := range addrs {
		have[AddrPrefix(a).Addr()] = true
	}
	return have, nil
}
