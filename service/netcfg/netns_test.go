package netcfg

import (
	"fmt"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vipproxy/vipproxy/internal/testutil"
)

// testNS is a private network namespace created and deleted by one test,
// with the handle the product opens (nl, OpenNetlinkAt) and a plain
// vishvananda/netlink handle (oracle) for what the product does not read
// (MAC addresses).
type testNS struct {
	*testutil.NetNS
	name   string
	nl     *netlink.Handle
	oracle *netlink.Handle
	ns     netns.NsHandle
}

// newTestNS creates a namespace with lo up and all/default arp_ignore at
// 0, or skips the test when that is impossible (not root, no ip netns).
func newTestNS(t *testing.T) *testNS {
	t.Helper()
	base := testutil.NewNetNS(t, "vph")
	ns, err := netns.GetFromName(base.Name)
	if err != nil {
		t.Fatalf("open netns %s: %v", base.Name, err)
	}
	t.Cleanup(func() { ns.Close() })
	nl, err := OpenNetlinkAt(int(ns))
	if err != nil {
		t.Fatalf("netlink handle in %s: %v", base.Name, err)
	}
	t.Cleanup(nl.Close)
	oracle, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatalf("library's netlink handle in %s: %v", base.Name, err)
	}
	t.Cleanup(oracle.Close)
	n := &testNS{NetNS: base, name: base.Name, nl: nl, oracle: oracle, ns: ns}
	for _, scope := range []string{"all", "default"} {
		if err := n.sysctl().Set(scope, "arp_ignore", 0); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

func (n *testNS) sysctl() Sysctl { return Sysctl{NS: int(n.ns)} }

func (n *testNS) ip(t *testing.T, args ...string) { t.Helper(); n.IP(t, args...) }

func (n *testNS) veth(t *testing.T, a, b string) { t.Helper(); n.Veth(t, a, b) }

// newSwitch is a namespace with bridge br0 up: a LAN for the test's nodes.
func newSwitch(t *testing.T) *testNS {
	t.Helper()
	sw := newTestNS(t)
	sw.ip(t, "link", "add", "br0", "type", "bridge")
	sw.ip(t, "link", "set", "br0", "up")
	return sw
}

// plug links node ns's eth0 to port of the switch's bridge br0.
func (n *testNS) plug(t *testing.T, ns *testNS, port string) {
	t.Helper()
	n.vethTo(t, port, ns, "eth0")
	n.ip(t, "link", "set", port, "master", "br0")
}

// newLAN is a client (host 2) and three nodes (hosts 11 to 13) on one
// bridged LAN, addressed by the pattern (e.g. "192.0.2.%d/24"), each node
// holding vip on its stand-in dummy link, as every controller does.
func newLAN(t *testing.T, pattern, vip string) (client *testNS, nodes []*testNS) {
	t.Helper()
	sw := newSwitch(t)
	join := func(ns *testNS, port string, host int) {
		sw.plug(t, ns, port)
		ns.ip(t, "addr", "add", fmt.Sprintf(pattern, host), "dev", "eth0", "nodad")
	}
	client = newTestNS(t)
	join(client, "p-client", 2)
	for i := 1; i <= 3; i++ {
		n := newTestNS(t)
		join(n, fmt.Sprintf("p-node%d", i), 10+i)
		n.veth(t, "dummyvip0", "dummyvip0-peer")
		n.ip(t, "addr", "add", vip, "dev", "dummyvip0", "nodad")
		nodes = append(nodes, n)
	}
	return client, nodes
}
