package netcfg

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// testNS is a private network namespace created and deleted by one test.
type testNS struct {
	name string
	nl   *netlink.Handle
	ns   netns.NsHandle
}

// newTestNS creates a namespace with lo up and all/default arp_ignore at
// 0, or skips the test when that is impossible (not root, no ip netns).
func newTestNS(t *testing.T) *testNS {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip (iproute2)")
	}
	b := make([]byte, 4)
	rand.Read(b)
	name := "vph-" + hex.EncodeToString(b)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("ip netns add unusable here: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	ns, err := netns.GetFromName(name)
	if err != nil {
		t.Fatalf("open netns %s: %v", name, err)
	}
	t.Cleanup(func() { ns.Close() })
	nl, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatalf("netlink handle in %s: %v", name, err)
	}
	t.Cleanup(nl.Close)
	n := &testNS{name: name, nl: nl, ns: ns}
	n.ip(t, "link", "set", "lo", "up")
	for _, scope := range []string{"all", "default"} {
		if err := n.sysctl().Set(scope, "arp_ignore", 0); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

func (n *testNS) sysctl() Sysctl { return Sysctl{NS: n.ns} }

// ip runs `ip -n NS args...` and fails the test on error.
func (n *testNS) ip(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"-n", n.name}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip -n %s %s: %v: %s", n.name, strings.Join(args, " "), err, out)
	}
}

// veth creates an up veth pair a<->b inside the namespace: the kernel here
// has no dummy module, so one end stands in for the dummy link or an uplink.
func (n *testNS) veth(t *testing.T, a, b string) {
	t.Helper()
	n.ip(t, "link", "add", a, "type", "veth", "peer", "name", b)
	n.ip(t, "link", "set", a, "up")
	n.ip(t, "link", "set", b, "up")
}
