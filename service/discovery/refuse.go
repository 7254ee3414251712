package discovery

import (
	"net/netip"
	"slices"
)

// Reasons of refusal: constant strings, so that the refusals of one answer
// are summed up by reason.
const (
	refusedNoPort    = "no address or port"
	refusedLinkLocal = "link-local address (where the cloud metadata service lives)"
	refusedLoopback  = "loopback address: an apiserver never publishes one (discovery.allow_loopback is for stand-ins in tests)"
	refusedVIP       = "the VIP itself: the proxy would feed itself"
	refusedUnicast   = "not a unicast address"
	refusedMetadata  = "a cloud metadata service address"
	refusedEmbedded  = "an IPv6 form (NAT64, 6to4, Teredo or IPv4-compatible) of an IPv4 address that is refused"
	refusedOwn       = "one of vipproxy's own listeners"
)

// metadataAddrs are cloud metadata services outside link-local space
// (169.254.169.254 and fe80::/10 are refused as link-local), each with
// where it is documented:
var metadataAddrs = []netip.Addr{
	// AWS EC2's instance metadata service over IPv6 (EC2 User Guide,
	// "Access instance metadata": IMDS IPv6 endpoint).
	netip.MustParseAddr("fd00:ec2::254"),
	// Alibaba Cloud ECS's metadata service (ECS documentation, "Instance
	// metadata": http://100.100.100.200/latest/meta-data).
	netip.MustParseAddr("100.100.100.200"),
	// Azure's wire server, which hands out VM extension settings and the
	// guest agent's goal state (Azure docs, "What is IP address
	// 168.63.129.16?"); Azure IMDS itself is 169.254.169.254.
	netip.MustParseAddr("168.63.129.16"),
}

// refuse says why an endpoint may not be a backend, or "". Everything is
// decided on the address alone, before any dial: an answer of the cluster
// must not make this node connect to its own services, the metadata
// service or the VIP under another spelling.
func (p Policy) refuse(a netip.AddrPort) string {
	ip := a.Addr()
	if !a.IsValid() || a.Port() == 0 {
		return refusedNoPort
	}
	if ip.Zone() != "" {
		return refusedLinkLocal
	}
	if r := p.refuseIP(ip); r != "" {
		return r
	}
	for _, v4 := range embeddedIPv4(ip) {
		if p.refuseIP(v4) != "" {
			return refusedEmbedded
		}
	}
	if p.own(a) {
		return refusedOwn
	}
	return ""
}

func (p Policy) refuseIP(ip netip.Addr) string {
	switch {
	case slices.Contains(p.VIPs, ip):
		return refusedVIP
	case ip.IsLoopback():
		if p.AllowLoopback {
			return ""
		}
		return refusedLoopback
	case ip.IsLinkLocalUnicast():
		return refusedLinkLocal
	case !ip.IsGlobalUnicast():
		return refusedUnicast
	case slices.Contains(metadataAddrs, ip):
		return refusedMetadata
	}
	return ""
}

// own says whether a is one of our listeners.
func (p Policy) own(a netip.AddrPort) bool {
	for _, l := range p.Own {
		switch {
		case l == a:
			return true
		case l.Addr().IsUnspecified() && l.Port() == a.Port():
			if a.Addr().IsLoopback() || (p.IsLocal != nil && p.IsLocal(a.Addr())) {
				return true
			}
		}
	}
	return false
}

// The IPv6 prefixes that carry an IPv4 address a router or the kernel
// reaches: NAT64's well-known prefix (RFC 6052) and its local-use prefix
// (RFC 8215), 6to4 (RFC 3056), Teredo (RFC 4380) and the deprecated
// IPv4-compatible form.
var (
	nat64WKP   = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour  = netip.MustParsePrefix("2002::/16")
	teredo     = netip.MustParsePrefix("2001::/32")
	compatible = netip.MustParsePrefix("::/96")
)

// embeddedIPv4 returns the IPv4 addresses an IPv6 address may stand for.
// The local-use NAT64 prefix may be /48 to /96: every RFC 6052 position
// is tried (bits 64..71 are the reserved u octet).
func embeddedIPv4(ip netip.Addr) []netip.Addr {
	if !ip.Is6() || ip.Is4In6() {
		return nil
	}
	b := ip.As16()
	v4 := func(i, j, k, l int) netip.Addr { return netip.AddrFrom4([4]byte{b[i], b[j], b[k], b[l]}) }
	switch {
	case nat64WKP.Contains(ip), compatible.Contains(ip):
		return []netip.Addr{v4(12, 13, 14, 15)}
	case nat64Local.Contains(ip):
		return []netip.Addr{v4(6, 7, 9, 10), v4(7, 9, 10, 11), v4(9, 10, 11, 12), v4(12, 13, 14, 15)}
	case sixToFour.Contains(ip):
		return []netip.Addr{v4(2, 3, 4, 5)}
	case teredo.Contains(ip):
		return []netip.Addr{netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]})}
	}
	return nil
}
