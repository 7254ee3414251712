package doctor

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

// ICMPv6 neighbour discovery (RFC 4861) message types and options.
const (
	ndSolicit     = 135
	ndAdvert      = 136
	ndOptSourceLL = 1
	ndOptTargetLL = 2
)

// ndProbe sends neighbour solicitations for ip on iface, three over wait,
// and returns the link-layer addresses that advertised it. Linux answers a
// solicitation only for an address on the interface it came in by, so on
// the VRRP interface only the master (keepalived put the VIP there)
// answers, as with arp_ignore=1 for IPv4.
func ndProbe(ctx context.Context, iface string, ip netip.Addr, wait time.Duration) ([]string, error) {
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMPV6)
	if err != nil {
		return nil, fmt.Errorf("open an ICMPv6 socket (needs CAP_NET_RAW): %w", err)
	}
	defer unix.Close(fd)
	// Neighbour discovery is only taken with hop limit 255 (RFC 4861 7.1.1).
	for _, opt := range []int{unix.IPV6_MULTICAST_HOPS, unix.IPV6_UNICAST_HOPS} {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, opt, 255); err != nil {
			return nil, fmt.Errorf("set the hop limit: %w", err)
		}
	}
	if err := unix.SetsockoptString(fd, unix.SOL_SOCKET, unix.SO_BINDTODEVICE, iface); err != nil {
		return nil, fmt.Errorf("bind to %s: %w", iface, err)
	}
	dst := &unix.SockaddrInet6{Addr: solicitedNode(ip), ZoneId: uint32(ifi.Index)}
	msg := ndSolicitation(ip, ifi.HardwareAddr)
	macs, err := askThreeTimes(ctx, fd, msg, dst, wait, ndAdvertSender(ip))
	if err != nil {
		return nil, fmt.Errorf("send a neighbour solicitation on %s: %w", iface, err)
	}
	return macs, nil
}

// solicitedNode is ip's solicited-node multicast address ff02::1:ffXX:XXXX.
func solicitedNode(ip netip.Addr) [16]byte {
	a := ip.As16()
	return [16]byte{0xff, 0x02, 10: 0, 11: 0x01, 12: 0xff, 13: a[13], 14: a[14], 15: a[15]}
}

// ndSolicitation is a neighbour solicitation for ip with our link-layer
// address; the kernel fills the checksum of an ICMPv6 raw socket.
func ndSolicitation(ip netip.Addr, mac net.HardwareAddr) []byte {
	b := make([]byte, 24, 32)
	b[0] = ndSolicit
	t := ip.As16()
	copy(b[8:24], t[:])
	if len(mac) == 6 {
		b = append(b, ndOptSourceLL, 1)
		b = append(b, mac...)
	}
	return b
}

// ndAdvertSender answers with the link-layer address of a neighbour
// advertisement for ip.
func ndAdvertSender(ip netip.Addr) answerer {
	want := ip.As16()
	return func(pkt []byte, from unix.Sockaddr) string {
		if len(pkt) < 24 || pkt[0] != ndAdvert || [16]byte(pkt[8:24]) != want {
			return ""
		}
		return advertSender(pkt[24:], from)
	}
}

// advertSender is the target link-layer address option of an
// advertisement, else its source address.
func advertSender(opts []byte, from unix.Sockaddr) string {
	for len(opts) >= 8 && opts[1] > 0 && int(opts[1])*8 <= len(opts) {
		if opts[0] == ndOptTargetLL && opts[1] == 1 {
			return net.HardwareAddr(opts[2:8]).String()
		}
		opts = opts[int(opts[1])*8:]
	}
	if sa, ok := from.(*unix.SockaddrInet6); ok {
		return netip.AddrFrom16(sa.Addr).String()
	}
	return ""
}
