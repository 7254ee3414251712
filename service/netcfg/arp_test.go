package netcfg

import (
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/vipproxy/vipproxy/internal/testutil"
)

// TestARPFlux is the fast half of the ARP flux scenario on the host kernel: three node
// namespaces and a client on one bridge (itself in a private namespace),
// each node holding the VIP on a local link (a veth end standing in for
// dummyvip0). The client's arping for the VIP gets:
//   - 3 MACs with default sysctls (ARP flux: every node answers),
//   - 0 after `vipproxy network apply` set arp_ignore=1/arp_announce=2 on
//     each node's uplink,
//   - exactly 1, the holder's uplink MAC, once one node also holds the VIP
//     on its uplink as keepalived does on the VRRP master.
func TestARPFlux(t *testing.T) {
	arping := arpingCommand(t)
	bin := vipproxyBin(t)
	const vip = "192.168.78.100"
	client, nodes := newLAN(t, "192.168.78.%d/24", vip+"/32")

	macs := func(step string) []string {
		got := arping(t, client, "eth0", vip)
		t.Logf("%s: %d MAC(s) answer ARP for %s: %v", step, len(got), vip, got)
		return got
	}
	if got := macs("default sysctls"); len(got) != 3 {
		t.Errorf("default sysctls: %d MACs answer for the VIP (%v), want 3 (ARP flux)", len(got), got)
	}

	cfg := writeConfig(t, testutil.NodeConfig([]string{vip}, "192.168.78.11:6443", []string{"eth0"}, ""))
	for _, n := range nodes {
		if out, err := n.exec(bin, "network", "apply", "--netlink", "--config", cfg, "--root", t.TempDir()); err != nil {
			t.Fatalf("vipproxy network apply in %s: %v\n%s", n.name, err, out)
		}
	}
	if got := macs("vipproxy per-uplink sysctls"); len(got) != 0 {
		t.Errorf("after vipproxy network apply: %d MACs answer (%v), want 0", len(got), got)
	}

	master := nodes[1]
	master.ip(t, "addr", "add", vip+"/32", "dev", "eth0")
	want := macOf(t, master, "eth0")
	if got := macs("VIP also on one uplink (VRRP master)"); len(got) != 1 || got[0] != want {
		t.Errorf("VIP also on the master's uplink: MACs %v, want exactly [%s]", got, want)
	}
}

var macRE = regexp.MustCompile(`(?i)\b([0-9a-f]{2}(:[0-9a-f]{2}){5})\b`)

// arpingCommand returns a function that runs arping (Debian's "arping",
// Habets, -i IFACE; or iputils-arping, -I IFACE) three times, bounded by
// -w, and returns the distinct MACs that answered, sorted.
func arpingCommand(t *testing.T) func(t *testing.T, ns *testNS, iface, ip string) []string {
	path, err := exec.LookPath("arping")
	if err != nil {
		t.Skip("arping not installed (make deps installs it)")
	}
	help, _ := exec.Command(path, "--help").CombinedOutput()
	ifaceFlag := "-I"
	if strings.Contains(string(help), "-i <interface>") {
		ifaceFlag = "-i"
	}
	return func(t *testing.T, ns *testNS, iface, ip string) []string {
		t.Helper()
		// Exit status 1 just means no reply: judge by the output.
		out, _ := ns.exec(path, "-c", "3", "-w", "5", ifaceFlag, iface, ip)
		seen := map[string]bool{}
		for _, line := range strings.Split(out, "\n") {
			if !strings.Contains(line, "from") {
				continue
			}
			if m := macRE.FindString(line); m != "" {
				seen[strings.ToLower(m)] = true
			}
		}
		var macs []string
		for m := range seen {
			macs = append(macs, m)
		}
		sort.Strings(macs)
		return macs
	}
}

func macOf(t *testing.T, ns *testNS, iface string) string {
	t.Helper()
	link, err := ns.oracle.LinkByName(iface)
	if err != nil {
		t.Fatal(err)
	}
	return link.Attrs().HardwareAddr.String()
}
