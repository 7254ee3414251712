package netcfg

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/testutil"
)

// TestHairpin reproduces the broken pod hairpin on the host kernel. A node namespace has an
// uplink (eth0, 192.168.77.1) and the VIP on a local link (a veth end stands
// in for dummyvip0: this kernel has no dummy module). Behind it sit a
// ptp-style pod (unnumbered veth, gateway = the node's uplink IP) and a
// calico-style pod (gateway 169.254.1.1 answered by proxy ARP). Both must
// reach VIP:6443 through the real vipproxy with the per-uplink ARP sysctls
// that `vipproxy network apply` sets; with the naive all.arp_ignore=1 the
// ptp-style pod can no longer resolve its gateway.
func TestHairpin(t *testing.T) {
	bin := vipproxyBin(t)
	lan, node, ptpPod, caliPod := newTestNS(t), newTestNS(t), newTestNS(t), newTestNS(t)
	const nodeIP, vip, backend = "192.168.77.1", "192.168.77.100", "192.168.77.1:6443"

	node.vethTo(t, "eth0", lan, "eth0")
	node.ip(t, "addr", "add", nodeIP+"/24", "dev", "eth0")
	lan.ip(t, "addr", "add", "192.168.77.2/24", "dev", "eth0")
	node.veth(t, "dummyvip0", "dummyvip0-peer")

	// ptp-style pod: the node's own uplink IP is the gateway.
	node.vethTo(t, "vethptp", ptpPod, "eth0")
	ptpPod.ip(t, "addr", "add", "10.244.1.5/32", "dev", "eth0")
	ptpPod.ip(t, "route", "add", nodeIP, "dev", "eth0", "scope", "link")
	ptpPod.ip(t, "route", "add", "default", "via", nodeIP)
	node.ip(t, "route", "add", "10.244.1.5/32", "dev", "vethptp")

	// calico-style pod: a link-local gateway that only proxy ARP answers.
	node.vethTo(t, "calipod", caliPod, "eth0")
	caliPod.ip(t, "addr", "add", "10.244.1.6/32", "dev", "eth0")
	caliPod.ip(t, "route", "add", "169.254.1.1", "dev", "eth0", "scope", "link")
	caliPod.ip(t, "route", "add", "default", "via", "169.254.1.1")
	node.ip(t, "route", "add", "10.244.1.6/32", "dev", "calipod")
	// Proxy ARP answers only for a routed target on a forwarding host, as
	// on a real calico node: default route to the LAN, forwarding on.
	node.ip(t, "route", "add", "default", "via", "192.168.77.2")
	for _, kv := range [][2]string{{"all", "forwarding"}, {"calipod", "proxy_arp"}} {
		if err := node.sysctl().Set(kv[0], kv[1], 1); err != nil {
			t.Fatal(err)
		}
	}

	node.serveGreeting(t, backend, "apiserver-node1")
	cfg := writeConfig(t, `
[vip]
addresses = ["`+vip+`"]
port = 6443
[[backend]]
address = "`+backend+`"
[health]
type = "tcp"
[network]
uplinks = ["eth0"]
`)
	if out, err := node.exec(bin, "network", "apply", "--netlink", "--config", cfg, "--root", t.TempDir()); err != nil {
		t.Fatalf("vipproxy network apply --netlink: %v\n%s", err, out)
	}
	target := vip + ":6443"
	startProxy(t, node, bin, cfg, target, "apiserver-node1")

	reach := func(step, label string, pod *testNS, want bool) {
		t.Helper()
		node.ip(t, "neigh", "flush", "all")
		pod.ip(t, "neigh", "flush", "all")
		got, err := pod.fetch(target, 3*time.Second)
		if ok := expectLine(got, err, "apiserver-node1") == nil; ok != want {
			t.Errorf("%s: %s -> %s got %q, %v; want reachable=%v", step, label, target, got, err, want)
		}
	}
	reach("per-uplink arp_ignore (vipproxy)", "ptp-style pod", ptpPod, true)
	reach("per-uplink arp_ignore (vipproxy)", "calico-style pod", caliPod, true)
	if v, _ := node.sysctl().Get("vethptp", "arp_ignore"); v != 0 {
		t.Errorf("vipproxy touched the pod veth: arp_ignore=%d", v)
	}

	if err := node.sysctl().Set("all", "arp_ignore", 1); err != nil {
		t.Fatal(err)
	}
	reach("naive all.arp_ignore=1", "ptp-style pod", ptpPod, false)
	reach("naive all.arp_ignore=1", "calico-style pod (proxy ARP is not subject to arp_ignore)", caliPod, true)
	out, err := node.exec(bin, "network", "check", "--config", cfg)
	if err == nil || !strings.Contains(out, "net.ipv4.conf.all.arp_ignore is 1, want 0") {
		t.Errorf("network check with all.arp_ignore=1: %v\n%s\nwant exit 1 naming all.arp_ignore", err, out)
	}

	if err := node.sysctl().Set("all", "arp_ignore", 0); err != nil {
		t.Fatal(err)
	}
	reach("restored", "ptp-style pod", ptpPod, true)
	if out, err := node.exec(bin, "network", "check", "--config", cfg); err != nil {
		t.Errorf("network check after restore: %v\n%s", err, out)
	}
}

// startProxy runs the real `vipproxy serve` in the node (self-listening on
// the VIP with IP_FREEBIND) and waits until the VIP answers through it.
func startProxy(t *testing.T, node *testNS, bin, cfg, target, greeting string) {
	t.Helper()
	var out testutil.Buffer // read below while the daemon may still write it
	cmd := exec.Command("ip", "netns", "exec", node.name, bin, "serve", "--config", cfg)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	limit := 10 * time.Second * testutil.Slowdown() // the daemon may run under qemu-user
	deadline := time.Now().Add(limit)
	for {
		select {
		case err := <-exited:
			exited <- err // for the cleanup
			t.Fatalf("vipproxy serve exited: %v\n%s", err, out.String())
		case <-time.After(100 * time.Millisecond):
		}
		got, err := node.fetch(target, time.Second)
		if expectLine(got, err, greeting) == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("vipproxy serve did not answer on %s within %s: %q, %v\n%s", target, limit, got, err, out.String())
		}
	}
}

func expectLine(got string, err error, want string) error {
	if err != nil {
		return err
	}
	if got != want {
		return &lineError{got, want}
	}
	return nil
}

type lineError struct{ got, want string }

func (e *lineError) Error() string { return "got " + e.got + ", want " + e.want }
