package netcfg

import (
	"net/netip"
	"testing"
)

// The VIP on the stand-in for the dummy link is not held; on an uplink
// (where keepalived puts it on the VRRP master) it is.
func TestHeldVIPs(t *testing.T) {
	n := newTestNS(t)
	n.veth(t, "dummyvip0", "eth1") // no dummy driver on this kernel: a veth stands in
	vip4, vip6 := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::10")
	n.ip(t, "addr", "add", "192.0.2.10/32", "dev", "dummyvip0")
	n.ip(t, "addr", "add", "2001:db8::10/128", "dev", "dummyvip0", "nodad")
	check := func(want4, want6 string) {
		t.Helper()
		held, err := HeldVIPs(n.nl, "dummyvip0", []netip.Addr{vip4, vip6})
		if err != nil {
			t.Fatal(err)
		}
		if len(held) != 2 || held[vip4] != want4 || held[vip6] != want6 {
			t.Fatalf("held %q, want %q %q", held, want4, want6)
		}
	}
	check("", "")
	n.ip(t, "addr", "add", "192.0.2.10/24", "dev", "eth1")
	check("eth1", "")
	n.ip(t, "addr", "add", "2001:db8::10/64", "dev", "eth1", "nodad")
	check("eth1", "eth1")
}
