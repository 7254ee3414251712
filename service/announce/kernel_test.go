package announce_test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/testutil"
	"github.com/vipproxy/vipproxy/service/announce"
)

// These tests run `vipproxy announce` as a process in a network namespace
// of the host kernel, with a stand-in for the daemon's probe socket, and
// BIRD itself where it is installed.

func TestMain(m *testing.M) {
	code := m.Run()
	testutil.RemoveBuilt()
	os.Exit(code)
}

const vip4, vip6 = "192.0.2.10", "2001:db8::10"

// nodeConfig is a bgp-mode node peering with the router at 198.51.100.1.
var nodeConfig = testutil.BGPNodeConfig([]string{vip4, vip6}, "198.51.100.1:6443", []string{"eth0"}, `[health]
type = "tcp"
interval = "200ms"
timeout = "200ms"
[bgp]
local_as = 65001
router_id = "198.51.100.2"
hold_time = 9
peers = [{name = "router", address = "198.51.100.1", as = 65000}, {name = "router6", address = "2001:db8:1::1", as = 65000}]
`)

// readiness is a stand-in for the daemon's probe socket: /readyz answers
// as the daemon does, ready or not as the test says.
type readiness struct {
	sock  string
	ready atomic.Bool
}

func serveReadiness(t *testing.T) *readiness {
	t.Helper()
	r := &readiness{sock: filepath.Join(t.TempDir(), "probe.sock")}
	ln, err := net.Listen("unix", r.sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if r.ready.Load() {
			fmt.Fprintln(w, "ready: 1/1 backends healthy")
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "not ready: 0/1 backends healthy")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return r
}

// node is a namespace with the VIP on its stand-in dummy link (a veth end:
// this kernel has no dummy) and an uplink eth0.
func newNode(t *testing.T) *testutil.NetNS {
	t.Helper()
	ns := testutil.NewNetNS(t, "vpa")
	ns.Veth(t, "dummyvip0", "dummyvip0-p")
	ns.IP(t, "addr", "add", vip4+"/32", "dev", "dummyvip0")
	ns.IP(t, "addr", "add", vip6+"/128", "dev", "dummyvip0", "nodad")
	return ns
}

// startAnnounce runs vipproxy announce in ns until the test ends; cfg is
// its config file.
func startAnnounce(t *testing.T, ns *testutil.NetNS, sock string) (cmd *exec.Cmd, logs *testutil.Buffer, cfg string) {
	t.Helper()
	cfg = filepath.Join(t.TempDir(), "vipproxy.toml")
	if err := os.WriteFile(cfg, []byte(nodeConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := testutil.Command(t, "vipproxy")
	cmd = exec.Command("ip", "netns", "exec", ns.Name, bin, "announce", "--config", cfg, "--control", sock, "--admin", "unix:"+filepath.Join(filepath.Dir(sock), "probe.sock"))
	return cmd, testutil.Start(t, cmd), cfg
}

// linkAddrs is what `ip addr` shows on the announce link; "" when it does
// not exist.
func linkAddrs(ns *testutil.NetNS) string {
	out, err := ns.Exec("ip", "-br", "addr", "show", "dev", "vipbgp0")
	if err != nil {
		return ""
	}
	return out
}

func announced(ns *testutil.NetNS) bool {
	a := linkAddrs(ns)
	return strings.Contains(a, vip4+"/32") && strings.Contains(a, vip6+"/128") && !strings.Contains(a, "DOWN")
}

// TestAnnounceFollowsReadinessAndDiesWithTheProcess: the announce link
// carries both VIPs exactly while the probe socket says ready, and is gone
// the moment the process is SIGKILLed, while the VIP stays local on the
// dummy link (the node still serves it to its own pods).
func TestAnnounceFollowsReadinessAndDiesWithTheProcess(t *testing.T) {
	ns := newNode(t)
	r := serveReadiness(t)
	cmd, logs, cfg := startAnnounce(t, ns, r.sock)

	time.Sleep(3 * time.Second) // six checks, every one "not ready"
	if a := linkAddrs(ns); a != "" {
		t.Fatalf("announce link exists while the proxy is not ready: %s", a)
	}
	r.ready.Store(true)
	testutil.WaitFor(t, "the announce link with both VIPs", func() bool { return announced(ns) })
	// vipproxy status tells it (the daemon is a stand-in: status says only the announcement).
	status := func() string {
		out, _ := ns.Exec(testutil.Command(t, "vipproxy"), "status", "--config", cfg, "--control", r.sock, "--admin", "unix:"+r.sock)
		return out
	}
	if out := status(); !strings.Contains(out, "VIP announced by BGP: yes, on vipbgp0") {
		t.Errorf("status while announced:\n%s", out)
	}
	r.ready.Store(false)
	testutil.WaitFor(t, "the announce link gone after readiness is lost", func() bool { return linkAddrs(ns) == "" })
	if out := status(); !strings.Contains(out, "VIP announced by BGP: no: vipbgp0 holds no VIP") {
		t.Errorf("status after the withdrawal:\n%s", out)
	}
	r.ready.Store(true)
	testutil.WaitFor(t, "the announce link back", func() bool { return announced(ns) })

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the announce link gone after SIGKILL", func() bool { return linkAddrs(ns) == "" })
	for _, vip := range []string{vip4, vip6} {
		if out, err := ns.Exec("ip", "route", "get", vip); err != nil || !strings.HasPrefix(out, "local ") {
			t.Errorf("%s is no longer local after the announce link went: %v %s", vip, err, out)
		}
	}
	for _, want := range []string{"announcing the VIP", "VIP withdrawn"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
}

// TestAnnounceRestoresAChangedLink: the announce link changed under
// vipproxy (an address removed, set down, deleted: someone's `ip addr
// flush` or `ip link del`) while the proxy is ready is withdrawn, logged,
// and made again with both VIPs. Before the link was checked after it was
// opened, the VIP stayed unannounced while the node was ready.
func TestAnnounceRestoresAChangedLink(t *testing.T) {
	ns := newNode(t)
	r := serveReadiness(t)
	r.ready.Store(true)
	_, logs, _ := startAnnounce(t, ns, r.sock)
	testutil.WaitFor(t, "the announce link with both VIPs", func() bool { return announced(ns) })
	for _, tc := range []struct {
		change []string
		logged string
	}{
		{[]string{"addr", "del", vip4 + "/32", "dev", "vipbgp0"}, "the link lost " + vip4},
		{[]string{"link", "set", "vipbgp0", "down"}, "the link is down"},
		{[]string{"link", "del", "vipbgp0"}, "the link is gone"},
	} {
		ns.IP(t, tc.change...)
		testutil.WaitFor(t, "the change logged: "+tc.logged, func() bool {
			return strings.Contains(logs.String(), "reason=\"the announce link changed: "+tc.logged+"\"")
		})
		testutil.WaitFor(t, "the announce link back with both VIPs after ip "+strings.Join(tc.change, " "), func() bool { return announced(ns) })
	}
}

// routerConf is a router's BIRD: the node's sessions, routes into the
// kernel with ECMP (merge paths), as a top-of-rack switch does.
const routerConf = `log stderr all;
router id 198.51.100.1;
protocol device {
}
protocol kernel {
	ipv4 { export all; };
	merge paths yes;
}
protocol kernel {
	ipv6 { export all; };
	merge paths yes;
}
protocol bgp node {
	local as 65000;
	neighbor 198.51.100.2 as 65001;
	connect delay time 1;
	connect retry time 1;
	ipv4 { import all; export none; };
}
protocol bgp node6 {
	local as 65000;
	neighbor 2001:db8:1::2 as 65001;
	connect delay time 1;
	connect retry time 1;
	ipv6 { import all; export none; };
}
`

// nodeMain is Debian bird2's bird.conf as it matters here, including the
// file vipproxy bird writes.
const nodeMain = `log stderr all;
protocol device {
}
protocol kernel {
	ipv4 { export all; };
}
include "%s";
`

// startBIRD runs bird in ns with conf until the test ends; it returns the
// process and its control socket.
func startBIRD(t *testing.T, ns *testutil.NetNS, conf string) (*exec.Cmd, string) {
	t.Helper()
	dir := t.TempDir()
	path, ctl := filepath.Join(dir, "bird.conf"), filepath.Join(dir, "ctl")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", ns.Name, "bird", "-f", "-c", path, "-s", ctl, "-P", filepath.Join(dir, "pid"))
	testutil.Start(t, cmd)
	return cmd, ctl
}

// routerRoutes is what the router's kernel has for the VIPs from BIRD.
func routerRoutes(router *testutil.NetNS) string {
	v4, _ := router.Exec("ip", "route", "show", vip4+"/32", "proto", "bird")
	v6, _ := router.Exec("ip", "-6", "route", "show", vip6+"/128", "proto", "bird")
	return v4 + v6
}

// bgpPair is a node (vipproxy announce, BIRD with the rendered file) and a
// router (BIRD) on one veth link, both families.
type bgpPair struct {
	node, router *testutil.NetNS
	ready        *readiness
	announce     *exec.Cmd
	routerBIRD   *exec.Cmd
	cfg, nodeCtl string
}

func newBGPPair(t *testing.T) *bgpPair { t.Helper(); return newBGPPairAsking(t, "") }

// newBGPPairAsking is newBGPPair with the announcer asking the probe
// socket at control ("": the readiness stand-in's).
func newBGPPairAsking(t *testing.T, control string) *bgpPair {
	t.Helper()
	if _, err := exec.LookPath("bird"); err != nil {
		t.Skip("no bird binary (apt-get install bird2; make deps installs it)")
	}
	p := &bgpPair{node: newNode(t), router: testutil.NewNetNS(t, "vpr"), ready: serveReadiness(t)}
	p.node.IP(t, "link", "add", "eth0", "type", "veth", "peer", "name", "r0", "netns", p.router.Name)
	p.node.IP(t, "addr", "add", "198.51.100.2/24", "dev", "eth0")
	p.node.IP(t, "addr", "add", "2001:db8:1::2/64", "dev", "eth0", "nodad")
	p.node.IP(t, "link", "set", "eth0", "up")
	p.router.IP(t, "addr", "add", "198.51.100.1/24", "dev", "r0")
	p.router.IP(t, "addr", "add", "2001:db8:1::1/64", "dev", "r0", "nodad")
	p.router.IP(t, "link", "set", "r0", "up")
	if control == "" {
		control = p.ready.sock
	}
	p.announce, _, p.cfg = startAnnounce(t, p.node, control)
	snippet := filepath.Join(t.TempDir(), "vipproxy.conf")
	if out, err := exec.Command(testutil.Command(t, "vipproxy"), "bird", "write", "--config", p.cfg, "--out", snippet).CombinedOutput(); err != nil {
		t.Fatalf("vipproxy bird: %v\n%s", err, out)
	}
	p.routerBIRD, _ = startBIRD(t, p.router, routerConf)
	_, p.nodeCtl = startBIRD(t, p.node, fmt.Sprintf(nodeMain, snippet))
	return p
}

// TestBIRDWithdrawsWhenAnnounceIsKilled: BIRD with the rendered file
// announces both VIPs to a router only while the proxy is ready, and the
// router's kernel loses the routes when vipproxy announce is SIGKILLed
// (how long that took is logged: the figure in docs/bgp.md).
func TestBIRDWithdrawsWhenAnnounceIsKilled(t *testing.T) {
	p := newBGPPair(t)
	time.Sleep(5 * time.Second) // sessions up, the proxy not ready
	if routes := routerRoutes(p.router); routes != "" {
		t.Fatalf("the router has a VIP route while the proxy is not ready:\n%s", routes)
	}
	p.ready.ready.Store(true)
	testutil.WaitFor(t, "both VIP routes on the router", func() bool {
		routes := routerRoutes(p.router)
		return strings.Contains(routes, "via 198.51.100.2") && strings.Contains(routes, "via 2001:db8:1::2")
	})
	killed := time.Now()
	if err := p.announce.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the VIP routes gone from the router", func() bool { return routerRoutes(p.router) == "" })
	t.Logf("SIGKILL of vipproxy announce to both VIP routes gone from the router's kernel: %v", time.Since(killed).Round(time.Millisecond))
}

// TestDoctorBGP: doctor's bgp check against real BIRD: WARN while the
// proxy is not ready, PASS once both VIPs are exported, FAIL naming
// vipproxy-announce.service when the proxy is ready and nothing holds the
// link, FAIL naming the session when the router goes.
func TestDoctorBGP(t *testing.T) {
	p := newBGPPair(t)
	doctor := func() string {
		out, _ := p.node.Exec(testutil.Command(t, "vipproxy"), "doctor", "--only", "bgp", "--config", p.cfg,
			"--control", p.ready.sock, "--admin", "unix:"+p.ready.sock, "--bird-socket", p.nodeCtl)
		return out
	}
	steps := []struct {
		what   string
		before func()
		want   []string
	}{
		{"sessions up, proxy not ready", func() {}, []string{"WARN bgp", "not ready"}},
		{"ready and exported", func() { p.ready.ready.Store(true) }, []string{"PASS bgp", "exported to 2 peer(s)"}},
		{"ready, announce killed", func() { p.announce.Process.Kill() }, []string{"FAIL bgp", "does not hold the VIPs", "vipproxy-announce.service"}},
		{"router gone", func() { p.routerBIRD.Process.Kill() }, []string{"FAIL bgp", "not established", "vipproxy_router (198.51.100.1)"}},
	}
	for _, s := range steps {
		s.before()
		var out string
		testutil.WaitFor(t, "doctor: "+s.what, func() bool {
			out = doctor()
			for _, w := range s.want {
				if !strings.Contains(out, w) {
					return false
				}
			}
			return true
		})
		t.Logf("%s:\n%s", s.what, out)
	}
}

// TestBIRDWithdrawsWhenTheDaemonIsKilled: the real daemon in the node's
// namespace (its one backend a TCP listener on the router), the announcer
// asking its probe socket: the router's kernel has the VIP routes while the
// daemon is ready, loses them when the daemon is SIGKILLed (the announcer
// withdraws after two failed checks; the figure is logged for docs/bgp.md),
// and gets them back when a new daemon is ready.
func TestBIRDWithdrawsWhenTheDaemonIsKilled(t *testing.T) {
	runDir := t.TempDir()
	os.Chmod(runDir, 0o755)
	p := newBGPPairAsking(t, filepath.Join(runDir, "probe.sock"))
	bin := testutil.Command(t, "vipproxy")
	testutil.Start(t, exec.Command("ip", "netns", "exec", p.router.Name, testutil.Command(t, "vipproxy-apiserver"), "--hang", "--listen", "198.51.100.1:6443"))
	serve := func() *exec.Cmd {
		cmd := exec.Command("ip", "netns", "exec", p.node.Name, bin, "serve", "--config", p.cfg)
		cmd.Env = append(os.Environ(), "RUNTIME_DIRECTORY="+runDir)
		testutil.Start(t, cmd)
		return cmd
	}
	daemon := serve()
	both := func() bool {
		routes := routerRoutes(p.router)
		return strings.Contains(routes, "via 198.51.100.2") && strings.Contains(routes, "via 2001:db8:1::2")
	}
	testutil.WaitFor(t, "both VIP routes on the router while the daemon is ready", both)
	killed := time.Now()
	if err := daemon.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the VIP routes gone from the router", func() bool { return routerRoutes(p.router) == "" })
	t.Logf("SIGKILL of vipproxy serve to both VIP routes gone from the router's kernel: %v (the announcer checks every %v, withdraws after %d failures)",
		time.Since(killed).Round(time.Millisecond), announce.Interval, announce.Fall)
	serve()
	testutil.WaitFor(t, "the VIP routes back once a new daemon is ready", both)
}
