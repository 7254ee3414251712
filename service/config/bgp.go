package config

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// BGP is the [bgp] table, read only with vip.mode = "bgp": every ready node
// announces the VIPs to its routers (the top-of-rack switches) through
// BIRD, which `vipproxy bird` configures, and the fabric spreads clients
// over the nodes by ECMP. `vipproxy announce` holds the VIPs on Interface
// while the local proxy is ready; BIRD exports exactly what is there.
type BGP struct {
	// LocalAS is this node's AS number (RFC 6996 private: 64512-65534,
	// 4200000000-4294967294).
	LocalAS uint32 `toml:"local_as"`
	// RouterID is the BGP identifier, an IPv4 address of this node; unique
	// per node (BIRD would otherwise pick the lowest IPv4 address, maybe
	// the VIP, the same on every node).
	RouterID string `toml:"router_id"`
	// Interface is the announce link `vipproxy announce` creates: a TUN
	// device that exists only while that process holds it open, so not even
	// a SIGKILL leaves a stale announcement behind.
	Interface string `toml:"interface"`
	// HoldTime is the BGP hold time in seconds (keepalives every third of
	// it): how long a router keeps the routes of a node that went silent.
	HoldTime int `toml:"hold_time"`
	// Communities are added to the announcement: "ASN:VALUE" (RFC 1997) or
	// "ASN:X:Y" (RFC 8092 large communities).
	Communities []string `toml:"communities"`
	// Peers are the routers this node announces the VIPs to.
	Peers []BGPPeer `toml:"peers"`
}

// BGPPeer is one BGP neighbour.
type BGPPeer struct {
	// Name labels the BIRD protocol (vipproxy_NAME); default peerN.
	Name    string     `toml:"name"`
	Address netip.Addr `toml:"address"`
	AS      uint32     `toml:"as"`
	// BFD asks BIRD for a BFD session with the peer: a dead link or node is
	// noticed in under a second instead of after the hold time.
	BFD bool `toml:"bfd"`
	// Password is the TCP MD5 signature key (RFC 2385), if the peer wants one.
	Password string `toml:"password"`
}

// Bounds and defaults of the [bgp] table.
const (
	// DefaultBGPInterface is the announce link's name.
	DefaultBGPInterface = "vipbgp0"
	// defaultHoldTime: a node that dies with its BIRD is withdrawn by its
	// routers within 9 s (keepalives every 3 s), where BIRD's default of
	// 240 s would send clients to a dead node for 4 minutes. BFD does better.
	defaultHoldTime = 9
	asTrans         = 23456 // RFC 6793's placeholder, never a real AS
	maxPeerName     = 40
	maxMD5Key       = 80 // TCP_MD5SIG_MAXKEYLEN
)

// PeerProtocol is the BIRD protocol name of peer i, which `vipproxy bird`
// writes and doctor asks birdc about.
func (b BGP) PeerProtocol(i int) string { return "vipproxy_" + b.Peers[i].Name }

// deriveBGPDefaults names unnamed peers peer1, peer2 ...
func (c *Config) deriveBGPDefaults() {
	if len(c.BGP.Peers) == 0 {
		return
	}
	peers := make([]BGPPeer, len(c.BGP.Peers))
	copy(peers, c.BGP.Peers)
	for i := range peers {
		if peers[i].Name == "" {
			peers[i].Name = "peer" + strconv.Itoa(i+1)
		}
	}
	c.BGP.Peers = peers
}

// modeTables: a table the mode does not read is an error where it is
// written, so an operator who switches modes is not left believing that
// keepalived or BGP settings still apply.
func (v *validator) modeTables() {
	def := Default()
	for _, table := range v.c.VIP.Mode.refusedTables() {
		switch table {
		case "keepalived":
			for _, key := range writtenKeys(table, v.c.Keepalived, def.Keepalived) {
				v.bad(key, "vip.mode = %q runs no keepalived (BIRD announces the VIP): remove the [keepalived] table", v.c.VIP.Mode)
			}
		case "bgp":
			for _, key := range writtenKeys(table, v.c.BGP, def.BGP) {
				v.bad(key, "is read only with vip.mode = %q (this file has vip.mode = %q): remove the [bgp] table or set the mode", ModeBGP, v.c.VIP.Mode)
			}
		}
	}
}

// refusedTables are the tables the mode refuses when written: [keepalived]
// where BIRD announces the VIP, [bgp] where it does not. The effective
// config leaves them out too (Encode).
func (m VIPMode) refusedTables() []string {
	if !m.UsesBGP() {
		return []string{"bgp"}
	}
	if !m.UsesKeepalived() {
		return []string{"keepalived"}
	}
	return nil
}

// writtenKeys names the fields of table (a struct) that differ from def.
func writtenKeys(table string, got, def any) []string {
	g, d := reflect.ValueOf(got), reflect.ValueOf(def)
	var out []string
	for i := range g.NumField() {
		name, _, _ := strings.Cut(g.Type().Field(i).Tag.Get("toml"), ",")
		if !reflect.DeepEqual(g.Field(i).Interface(), d.Field(i).Interface()) {
			out = append(out, table+"."+name)
		}
	}
	return out
}

func (v *validator) bgp() {
	if !v.c.VIP.Mode.UsesBGP() {
		return
	}
	b := v.c.BGP
	if b.LocalAS == 0 || b.LocalAS == asTrans {
		v.bad("bgp.local_as", "%d is not an AS number (1..4294967295, not 23456): set this node's AS, e.g. a private one (64512-65534)", b.LocalAS)
	}
	if id, err := netip.ParseAddr(b.RouterID); err != nil || !id.Is4() || id.IsUnspecified() {
		v.bad("bgp.router_id", "%q is not an IPv4 address: set one of this node's own (unique per node; BIRD would otherwise pick the lowest, maybe the VIP, the same on every node)", b.RouterID)
	}
	// Names, addresses, communities and passwords have their field types
	// (fields.go).
	if b.Interface == "lo" {
		v.bad("bgp.interface", "%q is the loopback device: the announce link is a TUN device of its own, created and removed by vipproxy announce (default %q)", b.Interface, DefaultBGPInterface)
	} else if b.Interface == v.c.Network.Interface || slices.Contains(v.c.Network.Uplinks, b.Interface) {
		v.bad("bgp.interface", "%q is already network.interface or an uplink: the announce link is a device of its own, created and removed by vipproxy announce", b.Interface)
	}
	if b.HoldTime < 3 || b.HoldTime > 65535 {
		v.bad("bgp.hold_time", "%d is out of range (3..65535 seconds, RFC 4271)", b.HoldTime)
	}
	v.bgpPeers()
}

func (v *validator) bgpPeers() {
	b := v.c.BGP
	if len(b.Peers) == 0 {
		v.bad("bgp.peers", "at least one peer is required: the routers this node announces the VIP to")
		return
	}
	names, addrs := map[string]int{}, map[netip.Addr]int{}
	for i, p := range b.Peers {
		key := fmt.Sprintf("bgp.peers[%d]", i)
		if j, dup := names[p.Name]; dup {
			v.bad(key+".name", "%q is already the name of bgp.peers[%d]", p.Name, j)
		}
		names[p.Name] = i
		v.peerAddress(key+".address", p.Address, addrs, i)
		if p.AS == 0 || p.AS == asTrans {
			v.bad(key+".as", "%d is not an AS number (1..4294967295, not 23456)", p.AS)
		}
		if len(p.Password) > maxMD5Key {
			v.bad(key+".password", "must be at most %d characters (TCP_MD5SIG_MAXKEYLEN)", maxMD5Key)
		}
	}
	v.bgpFamilies()
}

func (v *validator) peerAddress(key string, a netip.Addr, seen map[netip.Addr]int, i int) {
	switch {
	case !a.IsValid():
		v.bad(key, "is required: the router's address")
		return
	case a.Is4In6() || a.Zone() != "" || a.IsLinkLocalUnicast() || !a.IsGlobalUnicast():
		v.bad(key, "%s is not a unicast address this node can reach by its routing table (link-local peers are not supported)", a)
	case slices.Contains(v.c.VIP.Addresses, a):
		v.bad(key, "%s is a VIP, not a router", a)
	}
	if j, dup := seen[a]; dup {
		v.bad(key, "%s is already bgp.peers[%d]", a, j)
	}
	seen[a] = i
}

// bgpFamilies: a VIP is announced over the sessions of its own family
// (IPv4 VIPs to IPv4 peers, IPv6 to IPv6), so each family needs a peer.
func (v *validator) bgpFamilies() {
	for i, vip := range v.c.VIP.Addresses {
		found := false
		for _, p := range v.c.BGP.Peers {
			found = found || p.Address.IsValid() && p.Address.Is4() == vip.Is4()
		}
		if !found {
			v.bad(fmt.Sprintf("vip.addresses[%d]", i), "%s has no BGP peer of its family: a VIP is announced over sessions of its own address family; add such a peer to bgp.peers", vip)
		}
	}
	for i, p := range v.c.BGP.Peers {
		if p.Address.IsValid() && !slices.ContainsFunc(v.c.VIP.Addresses, func(a netip.Addr) bool { return a.Is4() == p.Address.Is4() }) {
			v.bad(fmt.Sprintf("bgp.peers[%d].address", i), "%s: no VIP of its family to announce over this session; remove the peer or add such a VIP", p.Address)
		}
	}
}

func isPeerName(s string) bool {
	if s == "" || len(s) > maxPeerName || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') })
}

// isCommunity accepts "ASN:VALUE" with 16-bit parts or "ASN:X:Y" with
// 32-bit parts, digits only.
func isCommunity(s string) bool {
	parts := strings.Split(s, ":")
	bits := map[int]int{2: 16, 3: 32}[len(parts)]
	if bits == 0 {
		return false
	}
	for _, p := range parts {
		if p == "" || strings.Trim(p, "0123456789") != "" {
			return false
		}
		if _, err := strconv.ParseUint(p, 10, bits); err != nil {
			return false
		}
	}
	return true
}
