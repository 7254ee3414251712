package daemon_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/standin"
	"github.com/vipproxy/vipproxy/internal/testutil"
)

// cluster is three stand-in apiservers that publish themselves in one
// shared set of kubernetes EndpointSlices, as apiservers share etcd.
type cluster struct {
	slices  *standin.EndpointSlices
	servers []*standin.Server
}

func newCluster(t *testing.T) *cluster {
	c := &cluster{slices: standin.NewEndpointSlices()}
	c.slices.Bookmark = time.Second
	// One port on three addresses, as apiservers have it: the slice they
	// write holds one port for all. Not on the VIP's address (127.0.0.1):
	// an endpoint there is refused.
	port := testutil.FreePortOn(t, "127.0.0.2", "127.0.0.3", "127.0.0.4")
	for i := range 3 {
		c.servers = append(c.servers, backend(t, fmt.Sprintf("api%d", i), func(o *standin.Options) {
			o.Slices, o.Listen = c.slices, fmt.Sprintf("127.0.0.%d:%d", i+2, port)
		}))
	}
	c.publish(0, 1, 2)
	return c
}

// publish sets the EndpointSlices to the given servers.
func (c *cluster) publish(idx ...int) {
	var addrs []netip.AddrPort
	for _, i := range idx {
		addrs = append(addrs, netip.MustParseAddrPort(c.servers[i].Addr()))
	}
	c.slices.SetAddrs(addrs...)
}

func discoveryTOML(stateDir, grace string) string {
	return fmt.Sprintf("\n[discovery]\nenable = true\nallow_loopback = true\nca_file = %q\ncert_file = %q\nkey_file = %q\nserver_name = \"localhost\"\ngrace = %q\nresync = \"1m\"\nstate_dir = %q\n",
		pki.CA, pki.ClientCert, pki.ClientKey, grace, stateDir)
}

// sources maps each backend address in /status to its source ("" when
// absent), with "+draining" when it takes no new connections.
func (p *proc) sources() map[string]string {
	out := map[string]string{}
	for _, b := range p.status().Backends {
		s := b.Source
		if b.Draining {
			s += "+draining"
		}
		out[b.Address] = s
	}
	return out
}

func (p *proc) waitSources(want map[string]string) {
	p.t.Helper()
	p.waitFor(func() bool {
		got := p.sources()
		if len(got) != len(want) {
			return false
		}
		for k, v := range want {
			if got[k] != v {
				return false
			}
		}
		return true
	}, fmt.Sprintf("backends %v", want))
}

// Seeded with one stand-in, vipproxy finds the other two in the
// EndpointSlices, routes to all three, drains one the cluster drops (its
// open watch goes on during the grace, no new connection reaches it, then
// it is closed) and keeps the last known set on disk for the next start.
func TestDiscoveryAddsDrainsAndRemembers(t *testing.T) {
	c := newCluster(t)
	a0, a1, a2 := c.servers[0].Addr(), c.servers[1].Addr(), c.servers[2].Addr()
	stateDir := t.TempDir()
	s := newSettings(t, a0)
	s.Extra = discoveryTOML(stateDir, "3s")
	p := startVIPProxy(t, s, nil)
	p.waitSources(map[string]string{a0: "static", a1: "discovered", a2: "discovered"})
	for _, n := range []string{"b0", a1, a2} {
		p.waitState(n, "up")
	}
	client := mtlsClient(t, true)
	seen := map[string]bool{}
	for range 9 {
		n, err := name(client, p.vip)
		if err != nil {
			t.Fatal(err)
		}
		seen[n] = true
	}
	if len(seen) != 3 {
		t.Fatalf("requests reached %v, want all three apiservers", seen)
	}
	watch := openWatchOn(t, p.vip, "api2")
	loop := startLoop(t, client, p.vip)

	c.publish(0, 1) // api2 leaves the cluster
	p.waitSources(map[string]string{a0: "static", a1: "discovered", a2: "discovered+draining"})
	for range 6 {
		if n, err := name(client, p.vip); err != nil || n == "api2" {
			t.Fatalf("new request during the drain: %q %v", n, err)
		}
	}
	if line, err := watch.ReadString('\n'); err != nil || !strings.HasPrefix(line, "api2 ") {
		t.Fatalf("the watch on the draining backend stopped early: %q %v", line, err)
	}
	p.waitSources(map[string]string{a0: "static", a1: "discovered"})
	if err := readUntilEnd(watch); err != nil {
		t.Fatalf("the watch on the dropped backend: %v", err)
	}
	c.servers[2].Close() // then its apiserver stops
	if n := p.status().Backends; len(n) != 2 {
		t.Fatalf("backends after the stop: %v", n)
	}
	ok, failures := loop.stop()
	t.Logf("request loop through the VIP while api2 left, drained and stopped: %d ok, %d failed", ok, len(failures))
	if len(failures) > 0 || ok == 0 {
		t.Fatalf("request loop: %d ok, failures %v", ok, failures)
	}
	// Restart with the seed gone: the remembered set finds the cluster.
	// The state file's writes are paced (one per 10 s); the stop writes
	// the last set.
	p.signal(15)
	p.waitExit("SIGTERM")
	want := []string{a0, a1}
	if got := stateFile(t, stateDir); !slices.Equal(got, want) {
		t.Fatalf("last known set on disk: %v, want %v (all the cluster lists)", got, want)
	}
	s2 := newSettings(t, "127.0.0.1:1")
	s2.Extra = discoveryTOML(stateDir, "3s")
	p2 := startVIPProxy(t, s2, nil)
	p2.waitSources(map[string]string{"127.0.0.1:1": "static", a0: "discovered", a1: "discovered"})
	p2.waitState(a0, "up")
	if n, err := name(client, p2.vip); err != nil || (n != "api0" && n != "api1") {
		t.Fatalf("through the remembered set: %q %v", n, err)
	}
}

// An empty answer, an expired resourceVersion and a refused VIP change
// nothing; a flap keeps the backend.
func TestDiscoveryKeepsTheSetOnBadAnswers(t *testing.T) {
	c := newCluster(t)
	a0, a1, a2 := c.servers[0].Addr(), c.servers[1].Addr(), c.servers[2].Addr()
	s := newSettings(t, a0)
	stateDir := t.TempDir()
	s.Extra = discoveryTOML(stateDir, "1h")
	p := startVIPProxy(t, s, nil)
	all := map[string]string{a0: "static", a1: "discovered", a2: "discovered"}
	p.waitSources(all)
	p.waitFor(func() bool {
		body, _ := p.get("/status")
		var st struct{ Discovery struct{ State string } }
		return json.Unmarshal([]byte(body), &st) == nil && st.Discovery.State == "watching"
	}, "/status: discovery watching")
	metrics, _ := p.get("/metrics")
	for _, want := range []string{
		`vipproxy_backend_source{backend="b0",port="api",source="static"} 1`,
		fmt.Sprintf(`vipproxy_backend_source{backend=%q,port="api",source="discovered"} 1`, a1),
		"vipproxy_discovery_watching 1", "vipproxy_discovery_errors_total 0",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	lists, _ := c.slices.Requests()
	c.slices.SetAddrs()
	c.slices.Expire()
	p.waitFor(func() bool { l, _ := c.slices.Requests(); return l > lists }, "a new list after the 410")
	c.slices.SetAddrs(netip.MustParseAddrPort(p.vip), netip.MustParseAddrPort("127.0.0.1:6443"))
	p.waitFor(func() bool { return strings.Contains(p.log.String(), "the VIP itself") }, "the VIP refused")
	if got := p.sources(); len(got) != 3 || got[a2] != "discovered" {
		t.Fatalf("bad answers changed the set: %v", got)
	}
	c.publish(0, 1)
	p.waitSources(map[string]string{a0: "static", a1: "discovered", a2: "discovered+draining"})
	c.publish(0, 1, 2)
	p.waitSources(all)
	p.waitLog("returned") // the flap's line, logged before the set changed
	// A reload that leaves [discovery] alone keeps the discovered backends.
	s.Extra += "\n[log]\nlevel = \"debug\"\n"
	p.rewrite(s.toml())
	p.signal(syscall.SIGHUP)
	p.waitFor(func() bool { return strings.Contains(p.log.String(), "msg=reloaded") }, "reloaded")
	if got := p.sources(); len(got) != 3 || got[a1] != "discovered" || got[a2] != "discovered" {
		t.Fatalf("after a reload: %v", got)
	}
	// One that changes [discovery] starts a new watcher from the set on
	// disk; the backends stay, and it follows the cluster from then on.
	s.Extra = discoveryTOML(stateDir, "2h") + "\n[log]\nlevel = \"debug\"\n"
	p.rewrite(s.toml())
	p.signal(syscall.SIGHUP)
	p.waitFor(func() bool { return strings.Count(p.log.String(), "msg=reloaded") == 2 }, "reloaded again")
	if got := p.sources(); len(got) != 3 || got[a2] == "" {
		t.Fatalf("after a reload with a new watcher: %v", got)
	}
	p.waitSources(all) // remembered until the new watcher's first list
	c.publish(0, 1)
	p.waitSources(map[string]string{a0: "static", a1: "discovered", a2: "discovered+draining"})
}

// reqLoop sends one request through the VIP after another until stopped.
type reqLoop struct {
	done     chan struct{}
	finished chan struct{}
	ok       int
	failures []error
}

func startLoop(t *testing.T, c *http.Client, vip string) *reqLoop {
	l := &reqLoop{done: make(chan struct{}), finished: make(chan struct{})}
	go func() {
		defer close(l.finished)
		for range 100000 {
			select {
			case <-l.done:
				return
			default:
			}
			if _, err := name(c, vip); err != nil {
				l.failures = append(l.failures, err)
			} else {
				l.ok++
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { l.stop() })
	return l
}

func (l *reqLoop) stop() (ok int, failures []error) {
	select {
	case <-l.done:
	default:
		close(l.done)
	}
	<-l.finished
	return l.ok, l.failures
}

// openWatchOn opens /watch streams through the VIP until one is served by
// want (round-robin: within a few), and returns its reader; the others
// are closed. Its client has no timeout: the stream lasts.
func openWatchOn(t *testing.T, vip, want string) *bufio.Reader {
	t.Helper()
	conf, err := pki.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: conf, DisableKeepAlives: true}}
	for range 12 {
		resp, err := c.Get("https://" + vip + "/watch")
		if err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(resp.Body)
		line, err := r.ReadString('\n')
		if err == nil && strings.HasPrefix(line, want+" ") {
			t.Cleanup(func() { resp.Body.Close() })
			return r
		}
		resp.Body.Close()
	}
	t.Fatalf("no watch landed on %s", want)
	return nil
}

// readUntilEnd reads the stream until the proxy ends it (any error), at
// most 10,000 lines.
func readUntilEnd(r *bufio.Reader) error {
	for range 10000 {
		if _, err := r.ReadString('\n'); err != nil {
			return nil
		}
	}
	return fmt.Errorf("the stream did not end")
}

// stateFile is the backends of the last known set on disk.
func stateFile(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "discovered.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Backends []string }
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Backends
}

// Without [discovery] no discovery series is exported (an alert on them
// cannot fire on such a node), and every backend is static.
func TestNoDiscoveryNoDiscoverySeries(t *testing.T) {
	b := backend(t, "api0")
	p := startVIPProxy(t, newSettings(t, b.Addr()), nil)
	p.waitSources(map[string]string{b.Addr(): "static"})
	metrics, err := p.get("/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(metrics, "vipproxy_discovery_") {
		t.Fatalf("discovery series without discovery:\n%s", metrics)
	}
}
