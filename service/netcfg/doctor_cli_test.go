package netcfg

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/testutil"
)

// `vipproxy doctor` on a broken host in a network namespace: a wildcard
// listener on the VIP port (a local apiserver's default), no VIP link
// setup, the naive all.arp_ignore=1, no drop-ins, no keepalived config, no
// daemon, and no node holding the VIP (the peer on eth0, another node,
// does not answer ARP for it). Each is a FAIL with its fix; after the
// fixes (the daemon running, the peer holding the VIP on its uplink as the
// VRRP master does) every check passes.
func TestDoctorBrokenHostThenFixed(t *testing.T) {
	n, master, bin := newTestNS(t), newTestNS(t), vipproxyBin(t)
	n.vethTo(t, "eth0", master, "eth0")
	n.veth(t, "dummyvip0", "dummyvip0-peer")
	n.serveGreeting(t, "127.0.0.1:16443", "apiserver")
	cfg := writeConfig(t, testutil.NodeConfig([]string{"10.9.0.100"}, "127.0.0.1:16443", []string{"eth0"}, "[health]\ntype = \"tcp\"\n"))
	var wild net.Listener
	if err := n.inNS(func() (err error) { wild, err = net.Listen("tcp4", "0.0.0.0:6443"); return err }); err != nil {
		t.Fatal(err)
	}
	defer wild.Close()
	if err := n.sysctl().Set("all", "arp_ignore", 1); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	kconf := filepath.Join(root, "keepalived.conf")
	// The admin endpoint over TCP as an operator names it: doctor asks TCP
	// only when told to.
	args := []string{"doctor", "--config", cfg, "--root", root, "--keepalived-conf", kconf, "--control", "", "--admin", "127.0.0.1:6449"}

	out, code := exitCode(n, bin, args...)
	comm, _ := os.ReadFile("/proc/self/comm")
	for _, want := range []string{
		fmt.Sprintf("FAIL vip-port   port 6443 is held by *:6443 (%s, pid %d)", strings.TrimSpace(string(comm)), os.Getpid()),
		"FAIL vip-link   link dummyvip0 lacks VIP 10.9.0.100/32",
		"FAIL arp        net.ipv4.conf.eth0.arp_ignore is 0, want 1",
		"net.ipv4.conf.all.arp_ignore is 1, want 0",
		"breaks pod -> VIP hairpin",
		"FAIL drop-ins",
		"FAIL listeners  nothing listens on 10.9.0.100:6443 (port api): vipproxy.socket is not running",
		"FAIL keepalived " + kconf + " is missing or empty",
		"FAIL daemon     the daemon does not answer",
		"PASS backends   port api (6443): all 1 backends pass the tcp (connect) check",
		"FAIL vip-answers no node answers ARP for VIP 10.9.0.100 on eth0: no node holds it",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor on a broken host lacks %q", want)
		}
	}
	if code != 1 || strings.Count(out, "fix: ") != 8 {
		t.Errorf("doctor on a broken host: exit %d, want 1 with 8 fixes:\n%s", code, out)
	}

	wild.Close()
	if err := n.sysctl().Set("all", "arp_ignore", 0); err != nil {
		t.Fatal(err)
	}
	for _, fix := range [][]string{
		{"network", "apply", "--netlink", "--config", cfg, "--root", root},
		{"units", "write", "--config", cfg, "--root", root},
		{"keepalived", "write", "--config", cfg, "--out", filepath.Join(root, "conf.d/vipproxy.conf")},
	} {
		if out, code := exitCode(n, bin, fix...); code != 0 {
			t.Fatalf("%v: exit %d\n%s", fix, code, out)
		}
	}
	if err := os.WriteFile(kconf, []byte("include conf.d/*.conf\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("broken host:\n%s", out)
	startProxy(t, n, bin, cfg, "10.9.0.100:6443", "apiserver")
	master.ip(t, "addr", "add", "10.9.0.100/32", "dev", "eth0")
	out, code = exitCode(n, bin, args...)
	if code != 0 || strings.Contains(out, "FAIL") || strings.Count(out, "PASS") != 10 {
		t.Errorf("doctor on the fixed host: exit %d, want 0 and 10 PASS:\n%s", code, out)
	}
	t.Logf("fixed host:\n%s", out)
	for _, want := range []string{
		"PASS daemon     the daemon is ready: 1/1 backends healthy",
		"PASS vip-answers VIP 10.9.0.100 is held by another node: " + macOf(t, master, "eth0") + " answers ARP for it on eth0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor on the fixed host lacks %q:\n%s", want, out)
		}
	}
}

// doctor's vip-answers on one L2 segment (a bridge) with the node and two
// peers, for an IPv4 and an IPv6 VIP: held by this node on its uplink and
// answering there passes; held by one peer passes naming its MAC (ARP,
// neighbour discovery); held by two peers at once (split brain) fails
// naming both.
func TestDoctorVIPAnswers(t *testing.T) {
	bin := vipproxyBin(t)
	sw, node := newSwitch(t), newTestNS(t)
	sw.plug(t, node, "p-node")
	node.ip(t, "addr", "add", "2001:db8:9::1/64", "dev", "eth0", "nodad")
	peers := []*testNS{newTestNS(t), newTestNS(t)}
	for i, p := range peers {
		sw.plug(t, p, fmt.Sprintf("p-peer%d", i))
	}
	node.veth(t, "dummyvip0", "dummyvip0-peer")
	cfg := writeConfig(t, testutil.NodeConfig([]string{"10.9.0.100", "2001:db8:9::100"}, "127.0.0.1:16443", []string{"eth0"}, ""))
	doctor := func() (string, int) {
		return exitCode(node, bin, "doctor", "--config", cfg, "--control", "", "--only", "vip-answers")
	}
	hold := func(ns *testNS, how string) {
		ns.ip(t, "addr", how, "10.9.0.100/32", "dev", "eth0")
		ns.ip(t, "addr", how, "2001:db8:9::100/128", "dev", "eth0", "nodad")
	}

	hold(node, "add")
	node.serveGreeting(t, "10.9.0.100:6443", "proxy")
	node.serveGreeting(t, "[2001:db8:9::100]:6443", "proxy")
	out, code := doctor()
	for _, want := range []string{
		"PASS vip-answers VIP 10.9.0.100 is held by this node on eth0 (the VRRP master) and answers on port 6443",
		"PASS vip-answers VIP 2001:db8:9::100 is held by this node on eth0 (the VRRP master) and answers on port 6443",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("VIP held here: exit %d, want 0 and %q:\n%s", code, want, out)
		}
	}
	hold(node, "del")

	hold(peers[0], "add")
	mac := macOf(t, peers[0], "eth0")
	out, code = doctor()
	for _, want := range []string{
		"PASS vip-answers VIP 10.9.0.100 is held by another node: " + mac + " answers ARP for it on eth0",
		"PASS vip-answers VIP 2001:db8:9::100 is held by another node: " + mac + " answers neighbour discovery for it on eth0",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("VIP held by one peer: exit %d, want 0 and %q:\n%s", code, want, out)
		}
	}

	hold(peers[1], "add")
	out, code = doctor()
	for _, want := range []string{
		"FAIL vip-answers 2 nodes answer ARP for VIP 10.9.0.100 on eth0",
		"FAIL vip-answers 2 nodes answer neighbour discovery for VIP 2001:db8:9::100 on eth0",
		macOf(t, peers[1], "eth0"), "fix: vipproxy network apply on every node",
	} {
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("VIP held by two peers: exit %d, want 1 and %q:\n%s", code, want, out)
		}
	}

	// No node holds it yet, as while VRRP elects a master right after
	// keepalived started (the quick start runs doctor then): doctor asks
	// again for the master-down interval (4 s at advert_int 1) and passes
	// once a node takes the VIP 2 s in (after the first ARP probe window).
	hold(peers[0], "del")
	hold(peers[1], "del")
	done := make(chan struct{})
	go func() { out, code = doctor(); close(done) }()
	time.Sleep(2 * time.Second)
	hold(peers[0], "add")
	<-done
	if code != 0 || strings.Count(out, "PASS vip-answers VIP") != 2 {
		t.Errorf("VIP taken 2 s after doctor started: exit %d, want 0 and two PASS:\n%s", code, out)
	}
}

// In node-local mode (no keepalived, the VIP this node's own) vip-answers
// dials the VIP here: FAIL with the fix while nothing listens, PASS once
// the proxy does.
func TestDoctorVIPAnswersNodeLocal(t *testing.T) {
	n, bin := newTestNS(t), vipproxyBin(t)
	cfg := writeConfig(t, nodeLocalConfig)
	doctor := func() (string, int) {
		return exitCode(n, bin, "doctor", "--config", cfg, "--control", "", "--only", "vip-answers")
	}
	if out, code := doctor(); code != 1 || !strings.Contains(out, "FAIL vip-answers VIP 127.0.0.1 is this node's own (vip.mode node-local: no node holds it for others) but does not answer: 127.0.0.1:7445") ||
		!strings.Contains(out, "fix: systemctl status vipproxy.socket") {
		t.Errorf("node-local VIP without a listener: exit %d\n%s", code, out)
	}
	n.serveGreeting(t, "127.0.0.1:7445", "proxy")
	n.serveGreeting(t, "[::1]:7445", "proxy")
	if out, code := doctor(); code != 0 || strings.Count(out, "PASS vip-answers") != 2 {
		t.Errorf("node-local VIP with a listener: exit %d, want 2 PASS\n%s", code, out)
	}
}
