package daemon_test

import (
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/standin"
	"github.com/vipproxy/vipproxy/internal/testutil"
)

// k0sHosts stand for three controller nodes: loopback addresses are
// distinct hosts to the proxy (each its own backend and health state).
var k0sHosts = []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}

// k0sPorts are a k0s VIP's ports: the API (https /readyz), konnectivity
// and the controller join API (TLS handshake checks). The numbers are
// picked free at run time; only the API is required.
var k0sPorts = []string{"api", "konnectivity", "join"}

// k0sNodes starts a TLS stand-in on each host at each port (one free
// number per port, the same on every host, as backend_port wants) and
// returns them by port and host index, and the port numbers.
func k0sNodes(t *testing.T) (map[string][]*standin.Server, map[string]int) {
	t.Helper()
	nodes, numbers := map[string][]*standin.Server{}, map[string]int{}
	for _, port := range k0sPorts {
		numbers[port] = testutil.FreePortOn(t, k0sHosts...)
		for i, host := range k0sHosts {
			s := backend(t, fmt.Sprintf("cp%d-%s", i+1, port), func(o *standin.Options) {
				o.Listen = fmt.Sprintf("%s:%d", host, numbers[port])
			})
			nodes[port] = append(nodes[port], s)
		}
	}
	return nodes, numbers
}

// k0sConfig is the config of a k0s control plane's VIP, on 127.0.0.1 (the
// test PKI's server certificate names it; the nodes' ports differ), with
// the given ports (all by default).
func k0sConfig(numbers, vipPorts map[string]int, admin string, ports ...string) string {
	if len(ports) == 0 {
		ports = k0sPorts
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[vip]\naddresses = [\"127.0.0.1\"]\n\n")
	for i, h := range k0sHosts {
		fmt.Fprintf(&b, "[[backend]]\nname = \"cp%d\"\naddress = %q\n\n", i+1, h)
	}
	fmt.Fprintf(&b, "[health]\ntype = \"https\"\ninterval = \"1s\"\ntimeout = \"1s\"\nrise = 1\nfall = 2\n")
	fmt.Fprintf(&b, "ca_file = %q\ncert_file = %q\nkey_file = %q\nserver_name = \"localhost\"\n\n", pki.CA, pki.ClientCert, pki.ClientKey)
	for _, port := range ports {
		fmt.Fprintf(&b, "[[port]]\nname = %q\nport = %d\nbackend_port = %d\n", port, vipPorts[port], numbers[port])
		if port != "api" {
			b.WriteString("[port.health]\ntype = \"tls\"\n")
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "[timeouts]\ndial = \"1s\"\ndrain = \"5s\"\n\n[admin]\nlisten = %q\n", admin)
	return b.String()
}

// k0sSetup is a running k0s-shaped node set with a vipproxy in front.
type k0sSetup struct {
	p                 *proc
	nodes             map[string][]*standin.Server
	vips              map[string]string // port name: VIP address
	numbers, vipPorts map[string]int
	admin             string
}

// config is the setup's config file with the given ports (all by default).
func (k *k0sSetup) config(ports ...string) string {
	return k0sConfig(k.numbers, k.vipPorts, k.admin, ports...)
}

// startK0s runs the nodes and a vipproxy in front of them, all ports up.
func startK0s(t *testing.T) (*proc, map[string][]*standin.Server, map[string]string) {
	k := startK0sSetup(t)
	return k.p, k.nodes, k.vips
}

func startK0sSetup(t *testing.T) *k0sSetup {
	t.Helper()
	k := &k0sSetup{vips: map[string]string{}, vipPorts: map[string]int{}}
	k.nodes, k.numbers = k0sNodes(t)
	for _, port := range k0sPorts {
		k.vipPorts[port] = testutil.FreePort(t)
		k.vips[port] = fmt.Sprintf("127.0.0.1:%d", k.vipPorts[port])
	}
	k.admin = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	k.p = startConfig(t, k.config(), k.vips["api"], k.admin, runtimeDir(t))
	k.p.waitFor(func() bool { return k.p.healthy(k0sPorts...) == 9 }, "every port's three backends up")
	return k
}

// healthy counts the up backends of the given ports in /status.
func (p *proc) healthy(ports ...string) int {
	n := 0
	for _, ps := range p.status().Ports {
		for _, want := range ports {
			if ps.Name == want {
				n += ps.Healthy
			}
		}
	}
	return n
}

// portState is a backend's state in one port's pool.
func (p *proc) portState(port, name string) string {
	for _, b := range p.status().Backends {
		if b.Port == port && b.Name == name {
			return b.State
		}
	}
	return "absent"
}

// namesThrough makes n new connections to vip and returns who answered
// each, and how many failed.
func namesThrough(t *testing.T, vip string, n int) (map[string]int, int) {
	t.Helper()
	c := mtlsClient(t, true)
	seen, failed := map[string]int{}, 0
	for range n {
		who, err := name(c, vip)
		if err != nil {
			failed++
			continue
		}
		seen[who]++
	}
	return seen, failed
}

// TestK0sPortsBalancedAndCheckedApart: each VIP port serves its own pool
// (every answer comes from that port's stand-in) over all three nodes;
// one node's konnectivity going away moves only konnectivity's new
// connections, with none failed, and the node stays in the other pools.
func TestK0sPortsBalancedAndCheckedApart(t *testing.T) {
	p, nodes, vips := startK0s(t)
	for _, port := range k0sPorts {
		seen, failed := namesThrough(t, vips[port], 9)
		for i := range k0sHosts {
			if who := fmt.Sprintf("cp%d-%s", i+1, port); seen[who] != 3 || failed != 0 {
				t.Errorf("port %s: answers %v (%d failed); want 3 from each node's %s stand-in", port, seen, failed, port)
				break
			}
		}
	}

	// Requests on every port keep going while cp2's konnectivity stops.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	results := make(map[string][2]int) // port: served, failed
	var mu sync.Mutex
	for _, port := range k0sPorts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := mtlsClient(t, true)
			for i := 0; i < 2000; i++ { // bounded; ends at stop
				select {
				case <-stop:
					return
				default:
				}
				_, err := name(c, vips[port])
				mu.Lock()
				r := results[port]
				if err != nil {
					r[1]++
				} else {
					r[0]++
				}
				results[port] = r
				mu.Unlock()
			}
		}()
	}
	nodes["konnectivity"][1].Close()
	p.waitFor(func() bool { return p.portState("konnectivity", "cp2") == "down" }, "cp2 down in konnectivity's pool")
	close(stop)
	wg.Wait()
	for _, port := range k0sPorts {
		if r := results[port]; r[1] != 0 || r[0] == 0 {
			t.Errorf("port %s while cp2's konnectivity stopped: %d served, %d failed; want 0 failed", port, r[0], r[1])
		}
	}
	for _, port := range []string{"api", "join"} {
		if st := p.portState(port, "cp2"); st != "up" {
			t.Errorf("cp2 is %s in %s's pool; its %s stand-in still serves", st, port, port)
		}
	}
	seen, failed := namesThrough(t, vips["konnectivity"], 10)
	if failed != 0 || seen["cp2-konnectivity"] != 0 || seen["cp1-konnectivity"]+seen["cp3-konnectivity"] != 10 {
		t.Errorf("konnectivity after cp2's stopped: %v, %d failed; want cp1 and cp3 only", seen, failed)
	}
	seen, failed = namesThrough(t, vips["api"], 9)
	if failed != 0 || seen["cp2-api"] != 3 {
		t.Errorf("api after cp2's konnectivity stopped: %v, %d failed; want cp2 still a third", seen, failed)
	}
	metrics, err := p.get("/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`vipproxy_backend_up{backend="cp2",port="konnectivity"} 0`, `vipproxy_backend_up{backend="cp2",port="api"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestReadinessFollowsRequiredPorts: a node is ready, and `vipproxy probe`
// passes, while every required port (api) has a healthy backend, even with
// an optional port (konnectivity) down on every node; the required port
// down everywhere makes it not ready.
func TestReadinessFollowsRequiredPorts(t *testing.T) {
	p, nodes, _ := startK0s(t)
	probe := p.probe
	for _, s := range nodes["konnectivity"] {
		s.Close()
	}
	p.waitFor(func() bool { return p.healthy("konnectivity") == 0 }, "konnectivity down on every node")
	out, err := probe()
	if err != nil || !strings.Contains(out, "konnectivity 0/3 (optional)") || !strings.Contains(out, "api 3/3") {
		t.Errorf("probe with only the optional port down: %v, %q; want ready, naming each port", err, out)
	}
	for _, s := range nodes["api"] {
		s.SetReady(false)
	}
	p.waitFor(func() bool { return p.healthy("api") == 0 }, "api down on every node")
	if out, err := probe(); err == nil || !strings.Contains(out, "api 0/3") {
		t.Errorf("probe with the required port down everywhere: %v, %q; want not ready", err, out)
	}
}

// TestReloadRemovesAndAddsPorts: a reload that drops a port closes its
// listener and forgets its series while the others serve on; one that
// adds it back listens again (bound by the daemon: systemd passes sockets
// only at start) and checks it from scratch.
func TestReloadRemovesAndAddsPorts(t *testing.T) {
	k := startK0sSetup(t)
	p := k.p
	// reloaded waits until the daemon reports the reload it was just
	// sent: a removed or renumbered port must refuse from then on. Its
	// port list changes a moment earlier, and a new number accepts (in the
	// kernel's backlog) as soon as the reload binds it, before the old
	// one closes.
	reloaded := func(before uint64, what string) {
		p.waitFor(func() bool { return p.status().Reloads > before }, what)
	}
	k.p.rewrite(k.config("api", "konnectivity"))
	n := p.status().Reloads
	p.signal(syscall.SIGHUP)
	reloaded(n, "the join port removed")
	p.waitFor(func() bool { return len(p.status().Ports) == 2 }, "the join port removed")
	if c, err := net.Dial("tcp", k.vips["join"]); err == nil {
		c.Close()
		t.Errorf("the removed join port still accepts on %s", k.vips["join"])
	}
	if seen, failed := namesThrough(t, k.vips["api"], 3); failed != 0 || len(seen) != 3 {
		t.Errorf("api after join's removal: %v, %d failed", seen, failed)
	}
	if m, _ := p.get("/metrics"); strings.Contains(m, `port="join"`) {
		t.Errorf("the removed port's series stay in /metrics")
	}

	p.rewrite(k.config())
	p.signal(syscall.SIGHUP)
	p.waitFor(func() bool { return p.healthy("join") == 3 }, "the join port back, its backends up")
	if seen, failed := namesThrough(t, k.vips["join"], 3); failed != 0 || seen["cp1-join"]+seen["cp2-join"]+seen["cp3-join"] != 3 {
		t.Errorf("join after it came back: %v, %d failed", seen, failed)
	}
	if !strings.Contains(p.log.String(), "reload added a port") {
		t.Errorf("the log does not say the added port is bound by the daemon")
	}

	// Renumbered: served on the new number, its series kept.
	old := k.vips["join"]
	k.vipPorts["join"] = testutil.FreePort(t)
	k.vips["join"] = fmt.Sprintf("127.0.0.1:%d", k.vipPorts["join"])
	p.rewrite(k.config())
	n = p.status().Reloads
	p.signal(syscall.SIGHUP)
	reloaded(n, "join renumbered")
	p.waitFor(func() bool {
		c, err := net.Dial("tcp", k.vips["join"])
		if err == nil {
			c.Close()
		}
		return err == nil
	}, "join on its new number")
	p.waitFor(func() bool { return p.healthy("join") == 3 }, "join's backends up on the new number")
	if c, err := net.Dial("tcp", old); err == nil {
		c.Close()
		t.Errorf("join still accepts on its old number %s", old)
	}
	time.Sleep(time.Second) // the old port's shutdown is done (nothing to drain)
	if m, _ := p.get("/metrics"); !strings.Contains(m, `vipproxy_backend_up{backend="cp1",port="join"} 1`) {
		t.Errorf("the renumbered port's series went with its old listener")
	}
}

// TestSocketActivationOnePerPort: systemd passes one socket per port, each
// named after its port as the units name them (vipproxy.socket's drop-in
// and vipproxy-port@NAME.socket); the daemon serves each port on the
// socket it was passed (none bound by itself) and the socket's backlog
// holds the connection that started it.
//
// It waits for conditions only: the first connection is made once
// systemd-socket-activate says it listens (a fixed 2 s of dial attempts
// ran out beside busy CPU loops), and a backend marked down by a check
// that timed out on the loaded machine does not cut the connections under
// test (close_on_down = false: with the default, a false mark-down closed
// the first connection, EOF, seen on 2026-12-06 under -race beside four
// busy loops). Any healthy backend of a port serves its requests.
func TestSocketActivationOnePerPort(t *testing.T) {
	ssa, err := exec.LookPath("systemd-socket-activate")
	if err != nil {
		t.Skip("systemd-socket-activate not installed")
	}
	_, numbers := k0sNodes(t)
	vipPorts, vips := map[string]int{}, map[string]string{}
	args := []string{"--fdname=" + strings.Join(k0sPorts, ":")}
	for _, port := range k0sPorts {
		vipPorts[port] = testutil.FreePort(t)
		vips[port] = fmt.Sprintf("127.0.0.1:%d", vipPorts[port])
		args = append(args, "-l", vips[port])
	}
	admin := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	config := k0sConfig(numbers, vipPorts, admin) + "\n[balance]\nclose_on_down = false\n"
	p := newProcConfig(t, config, vips["api"], admin)
	p.cmd = exec.Command(ssa, append(args, filepath.Join(binDir, "vipproxy"), "serve", "--config", p.cfgPath)...)
	early, client := make(chan error, 1), mtlsClient(t, true)
	go func() { early <- firstConnection(p, client, vips["join"]) }()
	p.start()
	for _, port := range k0sPorts {
		p.waitFor(func() bool { return p.healthy(port) > 0 }, "a healthy backend on port "+port)
	}
	if err := <-early; err != nil {
		t.Errorf("the connection that started the daemon: %v", err)
	}
	for _, port := range k0sPorts {
		seen, failed := namesThrough(t, vips[port], 3)
		if failed != 0 || seen["cp1-"+port]+seen["cp2-"+port]+seen["cp3-"+port] != 3 {
			t.Errorf("port %s through its passed socket: %v, %d failed", port, seen, failed)
		}
	}
	p.waitLog("activated=true")
	if log := p.log.String(); strings.Contains(log, "passed no socket") || strings.Contains(log, "systemd passed a socket named") {
		t.Errorf("the daemon did not serve every port on its own passed socket:\n%s", log)
	}
}

// firstConnection asks the backend behind vip for its name once
// systemd-socket-activate (started by p.start, its output in p.log) says
// it listens there: the connection that starts the daemon, held in the
// socket's backlog until the daemon accepts it.
func firstConnection(p *proc, c *http.Client, vip string) error {
	listening := "Listening on " + vip + " as"
	for deadline := time.Now().Add(testutil.Scaled(90 * time.Second)); !strings.Contains(p.log.String(), listening); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) { // only a hang
			return fmt.Errorf("systemd-socket-activate never said %q", listening)
		}
	}
	_, err := name(c, vip)
	return err
}
