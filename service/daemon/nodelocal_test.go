package daemon_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/testutil"
)

// A worker-only node (vip.mode = "node-local"): vipproxy on a loopback VIP,
// as the node's kubelet would use it, seeded with one apiserver and finding
// the others by discovery. An apiserver SIGKILLed under a steady load of new
// mTLS requests is marked down and no request fails; when the cluster drops
// it from the EndpointSlices it is dropped here too. No VIP-held series is
// exported: every worker has the loopback VIP, and none of them "holds" it.
func TestNodeLocalDiscoveryAndKilledApiserver(t *testing.T) {
	if testutil.Emulated() {
		t.Skip("200 ms health checks are too tight under qemu-user emulation; runs natively")
	}
	// The apiservers are processes (one is SIGKILLed) on 127.0.0.2-4: an
	// endpoint on the VIP's own address would be refused. Each serves the
	// EndpointSlices from one file, as apiservers share etcd.
	slices := filepath.Join(t.TempDir(), "endpoints")
	// One port on three addresses, as apiservers have it.
	port := testutil.FreePortOn(t, "127.0.0.2", "127.0.0.3", "127.0.0.4")
	var addrs []string
	for i := range 3 {
		addrs = append(addrs, fmt.Sprintf("127.0.0.%d:%d", i+2, port))
	}
	publish := func(as ...string) {
		if err := os.WriteFile(slices+".new", []byte(strings.Join(as, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(slices+".new", slices); err != nil {
			t.Fatal(err)
		}
	}
	publish(addrs...)
	api1 := apiserverProc(t, "api1", addrs[1], "--endpoints-file", slices)
	apiserverProc(t, "api0", addrs[0], "--endpoints-file", slices)
	apiserverProc(t, "api2", addrs[2], "--endpoints-file", slices)

	s := newSettings(t, addrs[0]) // the static seed
	s.Mode, s.Check, s.ServerName = "node-local", "https", "localhost"
	s.Extra = discoveryTOML(t.TempDir(), "1s")
	p := startVIPProxy(t, s, nil)
	p.waitSources(map[string]string{addrs[0]: "static", addrs[1]: "discovered", addrs[2]: "discovered"})
	for _, n := range []string{"b0", addrs[1], addrs[2]} {
		p.waitState(n, "up")
	}
	if m, err := p.get("/metrics"); err != nil || strings.Contains(m, "vipproxy_vip_held{") {
		t.Errorf("node-local metrics: %v; want no vipproxy_vip_held series (the alert on a VIP held twice would fire on every worker)", err)
	}

	l := startClientLoad(t, 4, mtlsRequest(t, p.vip))
	time.Sleep(500 * time.Millisecond)
	killedAt := time.Now()
	api1.Process.Kill() // SIGKILL: no FIN for the connections it holds
	p.waitState(addrs[1], "down")
	downAt := time.Now()
	time.Sleep(time.Second)
	publish(addrs[0], addrs[2]) // its lease expired: the cluster drops it
	p.waitSources(map[string]string{addrs[0]: "static", addrs[2]: "discovered"})
	time.Sleep(300 * time.Millisecond)
	samples := l.finish()

	afterKill, afterDown := count(samples, killedAt), count(samples, downAt)
	t.Logf("through the node-local VIP %s: after the SIGKILL %v; marked down %v after it", p.vip, afterKill, downAt.Sub(killedAt).Round(time.Millisecond))
	if afterDown.failed > 0 {
		t.Errorf("%d requests started after the mark-down failed (first: %v)", afterDown.failed, afterDown.firstErr)
	}
	if afterKill.failed > 0 {
		t.Errorf("%d requests started after the SIGKILL failed (first: %v)", afterKill.failed, afterKill.firstErr)
	}
	if afterDown.ok == 0 {
		t.Error("no request succeeded after the mark-down")
	}
}
