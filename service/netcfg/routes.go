package netcfg

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Rule is a routing policy rule, as much of it as vipproxy reads: who
// made it (Protocol) and enough to name it.
type Rule struct {
	Family   uint8
	Priority uint32
	Table    uint32
	Protocol uint8 // RTPROT_*: kernel for the kernel's own, 0 for a plain `ip rule add`
	Mark     uint32
	Mask     uint32
	HasMark  bool
	Src, Dst netip.Prefix
	IifName  string
	OifName  string
}

// Rules returns every IPv4 and IPv6 routing policy rule.
func Rules(h *netlink.Handle) ([]Rule, error) {
	var out []Rule
	for _, family := range []int{unix.AF_INET, unix.AF_INET6} {
		rs, err := h.RuleList(family)
		if errors.Is(err, unix.EAFNOSUPPORT) {
			continue // no IPv6 in this kernel
		}
		if err != nil {
			return nil, fmt.Errorf("list routing policy rules: %w", err)
		}
		for _, r := range rs {
			out = append(out, ruleOf(r))
		}
	}
	return out, nil
}

func ruleOf(r netlink.Rule) Rule {
	out := Rule{
		Family: uint8(r.Family), Priority: uint32(max(r.Priority, 0)), Table: uint32(max(r.Table, 0)),
		Protocol: r.Protocol, Mark: r.Mark, HasMark: r.Mark != 0 || r.Mask != nil,
		Src: ipNetPrefix(r.Src), Dst: ipNetPrefix(r.Dst), IifName: r.IifName, OifName: r.OifName,
	}
	if r.Mask != nil {
		out.Mask = *r.Mask
	}
	return out
}

// Route is a route in any table, as much of it as vipproxy reads.
type Route struct {
	Family   uint8
	Table    uint32
	Protocol uint8 // RTPROT_*
	Type     uint8 // RTN_*
	Dst      netip.Prefix
	Gateway  netip.Addr
	// LinkIndexes are the links the route leaves by: its RTA_OIF, or each
	// next hop's of a multipath route.
	LinkIndexes []int
}

// Routes returns every IPv4 and IPv6 route of every table.
func Routes(h *netlink.Handle) ([]Route, error) {
	rs, err := h.RouteListFiltered(unix.AF_UNSPEC, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("list routes: %w", err)
	}
	out := make([]Route, 0, len(rs))
	for _, r := range rs {
		out = append(out, routeOf(r))
	}
	return out, nil
}

func routeOf(r netlink.Route) Route {
	out := Route{
		Family: uint8(r.Family), Table: uint32(r.Table), Protocol: uint8(r.Protocol), Type: uint8(r.Type),
		Dst: ipNetPrefix(r.Dst),
	}
	out.Gateway, _ = netip.AddrFromSlice(r.Gw)
	if r.LinkIndex > 0 {
		out.LinkIndexes = append(out.LinkIndexes, r.LinkIndex)
	}
	for _, nh := range r.MultiPath {
		out.LinkIndexes = append(out.LinkIndexes, nh.LinkIndex)
	}
	if !out.Dst.IsValid() { // no RTA_DST: the default route of its family
		zero := netip.IPv4Unspecified()
		if r.Family == unix.AF_INET6 {
			zero = netip.IPv6Unspecified()
		}
		out.Dst = netip.PrefixFrom(zero, 0)
	}
	return out
}

// ipNetPrefix is n as a prefix; the zero Prefix for nil.
func ipNetPrefix(n *net.IPNet) netip.Prefix {
	if n == nil {
		return netip.Prefix{}
	}
	ip, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}
	}
	ones, bits := n.Mask.Size()
	if bits == 32 { // the library writes 0.0.0.0/0 with a 16-byte IPv4zero
		ip = ip.Unmap()
	}
	return netip.PrefixFrom(ip, ones)
}
