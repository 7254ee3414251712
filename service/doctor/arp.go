package doctor

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

// arpProbe asks on iface who has ip, as an RFC 5227 ARP probe (sender
// address 0.0.0.0, so that no neighbour cache learns anything from it),
// three times over wait, and returns the MAC addresses that answered. A
// node answers only for an address on the interface the probe came in by
// once arp_ignore=1 is set on its uplinks: the VRRP master, whose
// keepalived put the VIP there.
func arpProbe(ctx context.Context, iface string, ip netip.Addr, wait time.Duration) ([]string, error) {
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, err
	}
	if len(ifi.HardwareAddr) != 6 {
		return nil, fmt.Errorf("%s has no Ethernet address", iface)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ARP)))
	if err != nil {
		return nil, fmt.Errorf("open a packet socket (needs CAP_NET_RAW): %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ARP), Ifindex: ifi.Index}); err != nil {
		return nil, fmt.Errorf("bind to %s: %w", iface, err)
	}
	request := arpRequest(ifi.HardwareAddr, ip)
	broadcast := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ARP), Ifindex: ifi.Index, Halen: 6, Addr: [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
	macs, err := askThreeTimes(ctx, fd, request, broadcast, wait, arpReplySender(ip))
	if err != nil {
		return nil, fmt.Errorf("send ARP on %s: %w", iface, err)
	}
	return macs, nil
}

// arpRequest is an ARP "who has ip" from mac with sender address 0.0.0.0.
func arpRequest(mac net.HardwareAddr, ip netip.Addr) []byte {
	b := make([]byte, 28)
	binary.BigEndian.PutUint16(b[0:], 1)      // Ethernet
	binary.BigEndian.PutUint16(b[2:], 0x0800) // IPv4
	b[4], b[5] = 6, 4
	binary.BigEndian.PutUint16(b[6:], 1) // request
	copy(b[8:14], mac)
	// b[14:18] sender IP 0.0.0.0, b[18:24] target MAC unknown
	tip := ip.As4()
	copy(b[24:28], tip[:])
	return b
}

// arpReplySender answers with the sender MAC of an ARP reply for ip.
func arpReplySender(ip netip.Addr) answerer {
	want := ip.As4()
	return func(pkt []byte, _ unix.Sockaddr) string {
		if len(pkt) < 28 || binary.BigEndian.Uint16(pkt[6:]) != 2 || [4]byte(pkt[14:18]) != want {
			return ""
		}
		return net.HardwareAddr(pkt[8:14]).String()
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
