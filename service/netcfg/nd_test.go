package netcfg

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestIPv6NeighbourDiscoveryIsPerInterface checks the claim that IPv6 VIPs
// need no sysctl: Linux answers a neighbour solicitation only for addresses
// on the interface it arrived on. Three nodes hold the IPv6 VIP on their
// stand-in dummy link with default sysctls: nobody answers; once one node
// holds it on its uplink (keepalived on the master), exactly that MAC does.
func TestIPv6NeighbourDiscoveryIsPerInterface(t *testing.T) {
	const vip6 = "2001:db8:78::100"
	client, nodes := newLAN(t, "2001:db8:78::%d/64", vip6+"/128")
	resolve := func() string {
		client.ip(t, "neigh", "flush", "all")
		client.fetch("["+vip6+"]:6443", 2*time.Second) // triggers neighbour solicitations
		return neighMAC(t, client, "eth0", vip6)
	}
	if got := resolve(); got != "" {
		t.Errorf("VIP only on dummy links: %s answered neighbour discovery, want nobody", got)
	}
	nodes[2].ip(t, "addr", "add", vip6+"/128", "dev", "eth0", "nodad")
	if got, want := resolve(), macOf(t, nodes[2], "eth0"); got != want {
		t.Errorf("VIP also on one uplink: neighbour %q, want %s", got, want)
	}
}

// neighMAC returns the resolved link-layer address of ip on iface, or "".
// It reads `ip neigh` rather than netlink: qemu-user (cross-arch test runs)
// does not translate RTM_GETNEIGH.
func neighMAC(t *testing.T, ns *testNS, iface, ip string) string {
	t.Helper()
	out, err := exec.Command("ip", "-n", ns.name, "-6", "neigh", "show", "dev", iface, "to", ip).CombinedOutput()
	if err != nil {
		t.Fatalf("ip neigh: %v: %s", err, out)
	}
	// e.g. "2001:db8:78::100 lladdr aa:bb:cc:dd:ee:ff REACHABLE"
	fields := strings.Fields(string(out))
	for i := 0; i+1 < len(fields); i++ {
		if fields[i] == "lladdr" && !strings.Contains(string(out), "FAILED") {
			return fields[i+1]
		}
	}
	return ""
}
