package rtnl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// Link is what vipproxy reads of a network link.
type Link struct {
	Index     int
	Name      string
	Kind      string    // "dummy", "veth"...; empty for a device with no kind (lo, a NIC)
	Flags     net.Flags // FlagUp: administratively up
	OperState OperState
}

// OperState is a link's operational state (RFC 2863, IF_OPER_*).
type OperState uint8

// The operational states vipproxy's checks accept (IF_OPER_UNKNOWN and
// IF_OPER_UP in linux/if.h; x/sys/unix does not name them).
const (
	OperUnknown OperState = 0
	OperUp      OperState = 6
)

// String is the state's name as iproute2 prints it, lower-case.
func (s OperState) String() string {
	names := [...]string{"unknown", "not-present", "down", "lower-layer-down", "testing", "dormant", "up"}
	if int(s) < len(names) {
		return names[s]
	}
	return fmt.Sprintf("state-%d", s)
}

// ifInfo is a struct ifinfomsg: the link a request is about, and the
// flags it changes.
func ifInfo(index int, flags, change uint32) []byte {
	b := make([]byte, unix.SizeofIfInfomsg)
	b[0] = unix.AF_UNSPEC
	binary.NativeEndian.PutUint32(b[4:], uint32(index))
	binary.NativeEndian.PutUint32(b[8:], flags)
	binary.NativeEndian.PutUint32(b[12:], change)
	return b
}

// LinkByName returns the link called name; ErrLinkNotFound if none is.
func (h *Handle) LinkByName(name string) (Link, error) {
	body := attrs(ifInfo(0, 0, 0)).add(unix.IFLA_IFNAME, zeroTerminated(name))
	link, err := h.getLink(body)
	if err != nil {
		return Link{}, fmt.Errorf("look up link %s: %w", name, err)
	}
	return link, nil
}

// LinkByIndex returns the link with that index; ErrLinkNotFound if none has.
func (h *Handle) LinkByIndex(index int) (Link, error) {
	link, err := h.getLink(ifInfo(index, 0, 0))
	if err != nil {
		return Link{}, fmt.Errorf("look up link %d: %w", index, err)
	}
	return link, nil
}

func (h *Handle) getLink(body []byte) (Link, error) {
	msgs, err := h.request(unix.RTM_GETLINK, 0, body)
	if errors.Is(err, unix.ENODEV) {
		return Link{}, ErrLinkNotFound
	}
	if err != nil {
		return Link{}, err
	}
	for _, m := range msgs {
		if m.Header.Type == unix.RTM_NEWLINK {
			return parseLink(&m)
		}
	}
	return Link{}, errors.New("no link in the kernel's answer")
}

// LinkList returns every link in the namespace.
func (h *Handle) LinkList() ([]Link, error) {
	links, err := dump(h, unix.RTM_GETLINK, ifInfo(0, 0, 0), unix.RTM_NEWLINK, parseLink)
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	return links, nil
}

func parseLink(m *syscall.NetlinkMessage) (Link, error) {
	if len(m.Data) < unix.SizeofIfInfomsg {
		return Link{}, errors.New("short link message")
	}
	link := Link{
		Index: int(int32(binary.NativeEndian.Uint32(m.Data[4:]))),
		Flags: linkFlags(binary.NativeEndian.Uint32(m.Data[8:])),
	}
	as, err := syscall.ParseNetlinkRouteAttr(m)
	if err != nil {
		return Link{}, fmt.Errorf("parse link %d: %w", link.Index, err)
	}
	for _, a := range as {
		switch a.Attr.Type {
		case unix.IFLA_IFNAME:
			link.Name = cString(a.Value)
		case unix.IFLA_OPERSTATE:
			if len(a.Value) > 0 {
				link.OperState = OperState(a.Value[0])
			}
		case unix.IFLA_LINKINFO:
			for _, info := range nested(a.Value) {
				if info.typ == unix.IFLA_INFO_KIND {
					link.Kind = cString(info.value)
				}
			}
		}
	}
	return link, nil
}

// linkFlags maps the kernel's IFF_* flags to net.Flags, as package net does.
func linkFlags(raw uint32) net.Flags {
	var f net.Flags
	for _, m := range []struct {
		iff  uint32
		flag net.Flags
	}{
		{unix.IFF_UP, net.FlagUp},
		{unix.IFF_RUNNING, net.FlagRunning},
		{unix.IFF_BROADCAST, net.FlagBroadcast},
		{unix.IFF_LOOPBACK, net.FlagLoopback},
		{unix.IFF_POINTOPOINT, net.FlagPointToPoint},
		{unix.IFF_MULTICAST, net.FlagMulticast},
	} {
		if raw&m.iff != 0 {
			f |= m.flag
		}
	}
	return f
}

// LinkSetUp sets the link administratively up.
func (h *Handle) LinkSetUp(link Link) error {
	if _, err := h.request(unix.RTM_NEWLINK, unix.NLM_F_ACK, ifInfo(link.Index, unix.IFF_UP, unix.IFF_UP)); err != nil {
		return fmt.Errorf("set link %s up: %w", link.Name, err)
	}
	return nil
}

// LinkDel deletes the link.
func (h *Handle) LinkDel(link Link) error {
	if _, err := h.request(unix.RTM_DELLINK, unix.NLM_F_ACK, ifInfo(link.Index, 0, 0)); err != nil {
		return fmt.Errorf("delete link %s: %w", link.Name, err)
	}
	return nil
}

// AddDummy creates a dummy link called name (EEXIST if there is a link of
// that name already; EOPNOTSUPP if the kernel has no dummy module).
func (h *Handle) AddDummy(name string) error {
	info := attrs(nil).add(unix.IFLA_INFO_KIND, []byte("dummy"))
	body := attrs(ifInfo(0, 0, 0)).add(unix.IFLA_IFNAME, zeroTerminated(name)).add(unix.IFLA_LINKINFO, info)
	if _, err := h.request(unix.RTM_NEWLINK, unix.NLM_F_CREATE|unix.NLM_F_EXCL|unix.NLM_F_ACK, body); err != nil {
		return fmt.Errorf("create dummy link %s: %w", name, err)
	}
	return nil
}

// DisableIPv6AddrGen turns off IPv6 address generation on the link (no
// link-local address: systemd-networkd's LinkLocalAddressing=no).
func (h *Handle) DisableIPv6AddrGen(link Link) error {
	const in6AddrGenModeNone = 1 // IN6_ADDR_GEN_MODE_NONE, linux/if_link.h
	inet6 := attrs(nil).add(unix.IFLA_INET6_ADDR_GEN_MODE, []byte{in6AddrGenModeNone})
	spec := attrs(nil).add(unix.AF_INET6, inet6)
	body := attrs(ifInfo(link.Index, 0, 0)).add(unix.IFLA_AF_SPEC, spec)
	if _, err := h.request(unix.RTM_NEWLINK, unix.NLM_F_ACK, body); err != nil {
		return fmt.Errorf("turn off IPv6 address generation on %s: %w", link.Name, err)
	}
	return nil
}

// attr is one route attribute inside another.
type attr struct {
	typ   uint16
	value []byte
}

// nested splits the value of a nesting attribute into its attributes; a
// malformed tail is left out.
func nested(b []byte) []attr {
	var out []attr
	for len(b) >= unix.SizeofRtAttr {
		n := int(binary.NativeEndian.Uint16(b[0:]))
		if n < unix.SizeofRtAttr || n > len(b) {
			break
		}
		out = append(out, attr{typ: binary.NativeEndian.Uint16(b[2:]) &^ unix.NLA_F_NESTED, value: b[unix.SizeofRtAttr:n]})
		aligned := (n + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1)
		if aligned > len(b) {
			break
		}
		b = b[aligned:]
	}
	return out
}

func zeroTerminated(s string) []byte { return append([]byte(s), 0) }

func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
