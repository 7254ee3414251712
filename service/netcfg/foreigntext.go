package netcfg

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// protocols are the route protocol names of iproute2's rt_protos.
var protocols = map[uint8]string{
	0: "unspec", 1: "redirect", 2: "kernel", 3: "boot", 4: "static", 8: "gated", 9: "ra",
	10: "mrt", 11: "zebra", 12: "bird", 13: "dnrouted", 14: "xorp", 15: "ntk", 16: "dhcp",
	42: "babel", 186: "bgp", 187: "isis", 188: "ospf", 189: "rip", 192: "eigrp",
}

func protocolName(p uint8) string {
	if s, ok := protocols[p]; ok {
		return s
	}
	return fmt.Sprint(p)
}

func tableName(t uint32) string {
	switch t {
	case unix.RT_TABLE_MAIN:
		return "main"
	case unix.RT_TABLE_LOCAL:
		return "local"
	case unix.RT_TABLE_DEFAULT:
		return "default"
	}
	return fmt.Sprint(t)
}

func familyName(f uint8) string {
	if f == unix.AF_INET6 {
		return "-6 "
	}
	return ""
}

// describeRule writes a rule as `ip rule` does, e.g.
// "ip rule 9: fwmark 0x200/0xf00 lookup 2004 (proto unspec)".
func describeRule(r Rule) string {
	parts := []string{fmt.Sprintf("ip %srule %d:", familyName(r.Family), r.Priority)}
	if r.Src.IsValid() {
		parts = append(parts, "from "+r.Src.String())
	}
	if r.Dst.IsValid() {
		parts = append(parts, "to "+r.Dst.String())
	}
	if r.HasMark {
		parts = append(parts, fmt.Sprintf("fwmark %#x/%#x", r.Mark, r.Mask))
	}
	if r.IifName != "" {
		parts = append(parts, "iif "+r.IifName)
	}
	if r.OifName != "" {
		parts = append(parts, "oif "+r.OifName)
	}
	parts = append(parts, "lookup "+tableName(r.Table), "proto "+protocolName(r.Protocol))
	return strings.Join(parts, " ")
}

// describeRoute writes a route as `ip route show table all` does, e.g.
// "ip route 10.244.1.0/24 via 192.168.1.3 dev eth1 table main proto bird".
func describeRoute(r Route, links []netlink.Link) string {
	parts := []string{fmt.Sprintf("ip %sroute", familyName(r.Family))}
	switch r.Type {
	case unix.RTN_BLACKHOLE:
		parts = append(parts, "blackhole")
	case unix.RTN_UNREACHABLE:
		parts = append(parts, "unreachable")
	case unix.RTN_LOCAL:
		parts = append(parts, "local")
	}
	parts = append(parts, r.Dst.String())
	if r.Gateway.IsValid() {
		parts = append(parts, "via "+r.Gateway.String())
	}
	for _, idx := range r.LinkIndexes {
		name := fmt.Sprint(idx)
		if i := slices.IndexFunc(links, func(l netlink.Link) bool { return l.Attrs().Index == idx }); i >= 0 {
			name = links[i].Attrs().Name
		}
		parts = append(parts, "dev "+name)
	}
	parts = append(parts, "table "+tableName(r.Table), "proto "+protocolName(r.Protocol))
	return strings.Join(parts, " ")
}
