package announce_test

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/vipproxy/vipproxy/internal/testutil"
)

// The whole BGP path on the host kernel: two nodes in subnets of their
// own, each running vipproxy serve, vipproxy announce and BIRD with the
// rendered file, a router namespace running BIRD with ECMP (merge paths,
// an L4 multipath hash), a client namespace behind the router.

// ecmpNodeConfig is node i's config: its own uplink subnet
// 198.51.100.(4i)/30, the router at .4i+1, the node at .4i+2, its backend
// (a test listener) on the node's address.
func ecmpNodeConfig(i int) string {
	return fmt.Sprintf(`[vip]
mode = "bgp"
addresses = ["192.0.2.10"]
port = 6443
[[backend]]
name = "node%[1]d"
address = "198.51.100.%[3]d:6443"
[health]
type = "tcp"
interval = "200ms"
timeout = "200ms"
[network]
uplinks = ["eth0"]
[bgp]
local_as = 65001
router_id = "198.51.100.%[3]d"
peers = [{name = "router", address = "198.51.100.%[2]d", as = 65000}]
`, i, 4*i+1, 4*i+2)
}

const ecmpRouterConf = `log stderr all;
router id 203.0.113.1;
protocol device {
}
protocol kernel {
	ipv4 { export all; };
	merge paths yes;
}
template bgp node {
	local as 65000;
	connect delay time 1;
	connect retry time 1;
	ipv4 { import all; export none; };
}
protocol bgp node1 from node { neighbor 198.51.100.6 as 65001; }
protocol bgp node2 from node { neighbor 198.51.100.10 as 65001; }
`

// inNS runs f on a thread in ns: sockets f opens stay in ns.
func inNS(t *testing.T, ns *testutil.NetNS, f func()) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	h, err := netns.GetFromName(ns.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := netns.Set(h); err != nil {
		t.Fatal(err)
	}
	defer netns.Set(orig)
	f()
}

// ecmpNode is one node: its namespace and how to start its daemon.
type ecmpNode struct {
	ns     *testutil.NetNS
	cfg    string
	runDir string
}

func (n *ecmpNode) serve(t *testing.T) *exec.Cmd {
	cmd := exec.Command("ip", "netns", "exec", n.ns.Name, testutil.Command(t, "vipproxy"), "serve", "--config", n.cfg)
	cmd.Env = append(os.Environ(), "RUNTIME_DIRECTORY="+n.runDir)
	testutil.Start(t, cmd)
	return cmd
}

func newECMPNode(t *testing.T, i int, router *testutil.NetNS) *ecmpNode {
	t.Helper()
	n := &ecmpNode{ns: newNode(t), runDir: t.TempDir()}
	os.Chmod(n.runDir, 0o755)
	node, gw := fmt.Sprintf("198.51.100.%d", 4*i+2), fmt.Sprintf("198.51.100.%d", 4*i+1)
	n.ns.IP(t, "link", "add", "eth0", "type", "veth", "peer", "name", fmt.Sprintf("r%d", i), "netns", router.Name)
	n.ns.IP(t, "addr", "add", node+"/30", "dev", "eth0")
	n.ns.IP(t, "link", "set", "eth0", "up")
	n.ns.IP(t, "route", "add", "default", "via", gw)
	router.IP(t, "addr", "add", gw+"/30", "dev", fmt.Sprintf("r%d", i))
	router.IP(t, "link", "set", fmt.Sprintf("r%d", i), "up")
	n.cfg = filepath.Join(t.TempDir(), "vipproxy.toml")
	if err := os.WriteFile(n.cfg, []byte(ecmpNodeConfig(i)), 0o644); err != nil {
		t.Fatal(err)
	}
	// The apiserver stand-in: says the node's name and closes.
	inNS(t, n.ns, func() {
		ln, err := net.Listen("tcp", node+":6443")
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("node%d", i)
		testutil.Serve(t, ln, func(c net.Conn) { c.Write([]byte(name)); c.Close() })
	})
	bin := testutil.Command(t, "vipproxy")
	snippet := filepath.Join(t.TempDir(), "vipproxy.conf")
	if out, err := exec.Command(bin, "bird", "write", "--config", n.cfg, "--out", snippet).CombinedOutput(); err != nil {
		t.Fatalf("vipproxy bird: %v\n%s", err, out)
	}
	startBIRD(t, n.ns, fmt.Sprintf(nodeMain, snippet))
	sock := filepath.Join(n.runDir, "probe.sock")
	testutil.Start(t, exec.Command("ip", "netns", "exec", n.ns.Name, bin, "announce", "--config", n.cfg, "--control", sock, "--admin", "unix:"+sock))
	return n
}

// request is one client connection: when it started and ended, who
// answered, and its error.
type request struct {
	start, end time.Time
	name       string
	err        error
}

// clientLoop makes connections to the VIP from ns one after the other
// until stop is closed.
func clientLoop(t *testing.T, ns *testutil.NetNS, stop <-chan struct{}) func() []request {
	var mu sync.Mutex
	var out []request
	done := make(chan struct{})
	h, err := netns.GetFromName(ns.Name)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(done)
		defer h.Close()
		// The thread goes back to its namespace before the goroutine ends:
		// one left in ns may be the main thread, which Go keeps, and then
		// the whole test process counts as in ns (testutil.NetNS.delete).
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			return
		}
		defer orig.Close()
		if err := netns.Set(h); err != nil {
			return
		}
		defer func() {
			if netns.Set(orig) == nil {
				runtime.UnlockOSThread()
			}
		}()
		for i := 0; i < 100000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			r := request{start: time.Now()}
			var b []byte
			c, err := net.DialTimeout("tcp", "192.0.2.10:6443", 2*time.Second)
			if err == nil {
				c.SetDeadline(time.Now().Add(2 * time.Second))
				b, err = io.ReadAll(c)
				c.Close()
			}
			r.end, r.name, r.err = time.Now(), string(b), err
			if err == nil && r.name == "" {
				r.err = fmt.Errorf("connection closed without an answer")
			}
			mu.Lock()
			out = append(out, r)
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return func() []request { <-done; mu.Lock(); defer mu.Unlock(); return out }
}

// TestECMPFailoverNoNewConnectionFails: a client behind the router reaches
// the VIP through both nodes (ECMP); node1's daemon is SIGKILLed under the
// client's loop: its next hop leaves the router's route, and no connection
// started after that fails; a new daemon on node1 brings it back.
func TestECMPFailoverNoNewConnectionFails(t *testing.T) {
	if _, err := exec.LookPath("bird"); err != nil {
		t.Skip("no bird binary (apt-get install bird2; make deps installs it)")
	}
	router, client := testutil.NewNetNS(t, "vpr"), testutil.NewNetNS(t, "vpc")
	for _, kv := range []string{"net.ipv4.ip_forward=1", "net.ipv4.fib_multipath_hash_policy=1"} {
		if out, err := router.Exec("sysctl", "-qw", kv); err != nil {
			t.Fatalf("sysctl %s: %v %s", kv, err, out)
		}
	}
	client.IP(t, "link", "add", "eth0", "type", "veth", "peer", "name", "c0", "netns", router.Name)
	client.IP(t, "addr", "add", "203.0.113.2/24", "dev", "eth0")
	client.IP(t, "link", "set", "eth0", "up")
	client.IP(t, "route", "add", "default", "via", "203.0.113.1")
	router.IP(t, "addr", "add", "203.0.113.1/24", "dev", "c0")
	router.IP(t, "link", "set", "c0", "up")
	startBIRD(t, router, ecmpRouterConf)
	n1, n2 := newECMPNode(t, 1, router), newECMPNode(t, 2, router)
	daemon1 := n1.serve(t)
	n2.serve(t)
	hops := func() string { out, _ := router.Exec("ip", "route", "show", "192.0.2.10/32"); return out }
	via1 := "via 198.51.100.6 "
	testutil.WaitFor(t, "a two-way ECMP route to the VIP on the router", func() bool {
		return strings.Count(hops(), "nexthop via") == 2
	})

	stop := make(chan struct{})
	results := clientLoop(t, client, stop)
	time.Sleep(2 * time.Second)
	killed := time.Now()
	daemon1.Process.Kill()
	testutil.WaitFor(t, "node1's next hop gone", func() bool { return !strings.Contains(hops(), via1) })
	gone := time.Now()
	time.Sleep(3 * time.Second)
	close(stop)
	var before, after, failedBefore, failedAfter int
	answered := map[string]bool{}
	for _, r := range results() {
		switch {
		case r.start.Before(killed):
			before++
			answered[r.name] = true
		case r.start.After(gone):
			after++
			if r.err != nil || r.name != "node2" {
				failedAfter++
				t.Errorf("a connection after the withdrawal: %q %v", r.name, r.err)
			}
		case r.err != nil:
			failedBefore++
		}
	}
	if !answered["node1"] || !answered["node2"] || after < 10 {
		t.Errorf("before the kill answered by %v, %d connections after the withdrawal; want both nodes and at least 10", answered, after)
	}
	t.Logf("SIGKILL of node1's vipproxy serve: its next hop gone from the router after %v; %d connections before the kill (answered by %v), %d failed between the kill and the withdrawal, %d after it, %d failed",
		gone.Sub(killed).Round(time.Millisecond), before, answered, failedBefore, after, failedAfter)
	n1.serve(t)
	testutil.WaitFor(t, "node1's next hop back", func() bool { return strings.Contains(hops(), via1) })
}
