package rtnl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// Addr is an address on a link.
type Addr struct {
	Prefix    netip.Prefix // the local address and its prefix length
	LinkIndex int          // set by the kernel (AddrList); AddrReplace uses its link argument
	Scope     uint8        // RT_SCOPE_*: 0, universe, for a VIP
	Flags     uint32       // IFA_F_*: IFA_F_NODAD puts an IPv6 address to use at once
}

// AddrList returns the IPv4 and IPv6 addresses of the link with index
// linkIndex, or of every link if linkIndex is 0.
func (h *Handle) AddrList(linkIndex int) ([]Addr, error) {
	all, err := dump(h, unix.RTM_GETADDR, ifAddr(unix.AF_UNSPEC, 0, 0, 0), unix.RTM_NEWADDR, parseAddr)
	if err != nil {
		return nil, fmt.Errorf("list addresses: %w", err)
	}
	if linkIndex == 0 {
		return all, nil
	}
	var addrs []Addr
	for _, a := range all {
		if a.LinkIndex == linkIndex {
			addrs = append(addrs, a)
		}
	}
	return addrs, nil
}

func parseAddr(m *syscall.NetlinkMessage) (Addr, error) {
	if len(m.Data) < unix.SizeofIfAddrmsg {
		return Addr{}, errors.New("short address message")
	}
	bits := int(m.Data[1])
	a := Addr{Flags: uint32(m.Data[2]), Scope: m.Data[3], LinkIndex: int(binary.NativeEndian.Uint32(m.Data[4:]))}
	as, err := syscall.ParseNetlinkRouteAttr(m)
	if err != nil {
		return Addr{}, fmt.Errorf("parse address on link %d: %w", a.LinkIndex, err)
	}
	// IFA_LOCAL is the address itself; IFA_ADDRESS is the same but for
	// the peer of a point-to-point link, and the only one IPv6 sends.
	var local, address []byte
	for _, at := range as {
		switch at.Attr.Type {
		case unix.IFA_LOCAL:
			local = at.Value
		case unix.IFA_ADDRESS:
			address = at.Value
		case unix.IFA_FLAGS: // all the flags; the header has the first eight
			if len(at.Value) >= 4 {
				a.Flags = binary.NativeEndian.Uint32(at.Value)
			}
		}
	}
	if local == nil {
		local = address
	}
	ip, ok := netip.AddrFromSlice(local)
	if !ok {
		return Addr{}, fmt.Errorf("address on link %d: %d bytes", a.LinkIndex, len(local))
	}
	// PrefixFrom keeps the host bits: this is an address, not a network.
	if a.Prefix = netip.PrefixFrom(ip, bits); !a.Prefix.IsValid() {
		return Addr{}, fmt.Errorf("address %s on link %d: prefix length %d", ip, a.LinkIndex, bits)
	}
	return a, nil
}

// AddrReplace puts a.Prefix on the link with a's scope and flags, or
// changes it there if it is already.
func (h *Handle) AddrReplace(link Link, a Addr) error {
	if _, err := h.request(unix.RTM_NEWADDR, unix.NLM_F_CREATE|unix.NLM_F_REPLACE|unix.NLM_F_ACK, addrBody(link, a)); err != nil {
		return fmt.Errorf("put %s on %s: %w", a.Prefix, link.Name, err)
	}
	return nil
}

// AddrDel takes p off the link.
func (h *Handle) AddrDel(link Link, p netip.Prefix) error {
	if _, err := h.request(unix.RTM_DELADDR, unix.NLM_F_ACK, addrBody(link, Addr{Prefix: p})); err != nil {
		return fmt.Errorf("take %s off %s: %w", p, link.Name, err)
	}
	return nil
}

func addrBody(link Link, a Addr) []byte {
	ip := a.Prefix.Addr().Unmap()
	family := uint8(unix.AF_INET6)
	if ip.Is4() {
		family = unix.AF_INET
	}
	raw := ip.AsSlice()
	flags := make([]byte, 4)
	binary.NativeEndian.PutUint32(flags, a.Flags)
	hdr := ifAddr(family, uint8(a.Prefix.Bits()), a.Scope, link.Index)
	hdr[2] = uint8(a.Flags)
	return attrs(hdr).add(unix.IFA_LOCAL, raw).add(unix.IFA_ADDRESS, raw).add(unix.IFA_FLAGS, flags)
}

// ifAddr is a struct ifaddrmsg.
func ifAddr(family, bits, scope uint8, index int) []byte {
	b := make([]byte, unix.SizeofIfAddrmsg)
	b[0], b[1], b[3] = family, bits, scope
	binary.NativeEndian.PutUint32(b[4:], uint32(index))
	return b
}
