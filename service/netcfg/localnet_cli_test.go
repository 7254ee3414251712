package netcfg

import (
	"strings"
	"testing"
)

// TestDoctorWarnsOfRouteLocalnet: on a node-local node, `vipproxy doctor`
// warns while an uplink has route_localnet=1 (as kube-proxy sets it):
// packets for the loopback VIP that arrive there are routed, and a
// neighbour reaches the apiservers (CVE-2020-8558). With 0 it passes.
func TestDoctorWarnsOfRouteLocalnet(t *testing.T) {
	n := newTestNS(t)
	n.veth(t, "eth0", "eth0-peer")
	bin, cfg := vipproxyBin(t), writeConfig(t, nodeLocalConfig)
	if err := n.sysctl().Set("eth0", "route_localnet", 1); err != nil {
		t.Fatal(err)
	}
	args := []string{"doctor", "--config", cfg, "--only", "localnet", "--control", ""}
	out, _ := exitCode(n, bin, args...)
	if !strings.Contains(out, "WARN localnet   net.ipv4.conf.eth0.route_localnet is 1") || !strings.Contains(out, "CVE-2020-8558") ||
		!strings.Contains(out, "fix: sysctl -w net.ipv4.conf.eth0.route_localnet=0") {
		t.Errorf("doctor with route_localnet=1 on eth0:\n%s", out)
	}
	if err := n.sysctl().Set("eth0", "route_localnet", 0); err != nil {
		t.Fatal(err)
	}
	if out, code := exitCode(n, bin, args...); code != 0 || !strings.Contains(out, "PASS localnet   route_localnet is 0 on every interface") {
		t.Errorf("doctor with route_localnet=0: exit %d\n%s", code, out)
	}
}
