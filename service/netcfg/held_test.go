package netcfg

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vipproxy/vipproxy/internal/testutil"
)

// The VIP on the stand-in for the dummy link is not held; on an uplink
// (where keepalived puts it on the VRRP master) it is.
func TestHeldVIPs(t *testing.T) {
	n := newTestNS(t)
	n.veth(t, "dummyvip0", "eth1") // no dummy driver on this kernel: a veth stands in
	vip4, vip6 := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::10")
	n.ip(t, "addr", "add", "192.0.2.10/32", "dev", "dummyvip0")
	n.ip(t, "addr", "add", "2001:db8::10/128", "dev", "dummyvip0", "nodad")
	check := func(want4, want6 string) {
		t.Helper()
		held, err := HeldVIPs(n.nl, "dummyvip0", []netip.Addr{vip4, vip6})
		if err != nil {
			t.Fatal(err)
		}
		if len(held) != 2 || held[vip4] != want4 || held[vip6] != want6 {
			t.Fatalf("held %q, want %q %q", held, want4, want6)
		}
	}
	check("", "")
	n.ip(t, "addr", "add", "192.0.2.10/24", "dev", "eth1")
	check("eth1", "")
	n.ip(t, "addr", "add", "2001:db8::10/64", "dev", "eth1", "nodad")
	check("eth1", "eth1")
}

// `vipproxy status` and vipproxy_vip_held give one answer (both come from
// HeldVIPs) on a node without keepalived: the VIP only on the dummy link
// is held by neither; on a link keepalived does not manage (a second
// uplink) it is held by both. Status once looked at the VRRP interface
// only and said "not held" there while the metric said 1.
func TestStatusAndMetricAgreeOnHeldVIP(t *testing.T) {
	n := newTestNS(t)
	bin := vipproxyBin(t)
	n.veth(t, "eth0", "eth0-peer")
	n.veth(t, "eth1", "eth1-peer")
	n.veth(t, "dummyvip0", "dummyvip0-peer") // no dummy driver here: a veth stands in
	n.ip(t, "addr", "add", "10.9.0.100/32", "dev", "dummyvip0")
	n.serveGreeting(t, "127.0.0.1:7001", "apiserver")
	sock := filepath.Join(t.TempDir(), "admin.sock")
	cfg := writeConfig(t, fmt.Sprintf(`
[vip]
addresses = ["10.9.0.100"]
port = 7443
[[backend]]
address = "127.0.0.1:7001"
[health]
type = "tcp"
[network]
uplinks = ["eth0", "eth1"]
[admin]
listen = "unix:%s"
`, sock))
	testutil.Start(t, exec.Command("ip", "netns", "exec", n.name, bin, "serve", "--config", cfg))
	metrics := testutil.UnixClient(sock)
	agree := func(what, wantLink string) {
		t.Helper()
		fromMetric := heldMetric(t, metrics, "10.9.0.100")
		out, _ := n.exec(bin, "status", "--json", "--control", "", "--admin", "unix:"+sock, "--config", cfg)
		var rep struct {
			VIP []struct {
				Held      bool
				Interface string
			}
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.VIP) != 1 {
			t.Fatalf("%s: status --json: %v\n%s", what, err, out)
		}
		if got := rep.VIP[0]; got.Held != fromMetric || got.Held != (wantLink != "") || got.Interface != wantLink {
			t.Errorf("%s: status says held=%v on %q, vipproxy_vip_held=%v; want both %v (on %q)",
				what, got.Held, got.Interface, fromMetric, wantLink != "", wantLink)
		}
	}
	agree("VIP on the dummy link only", "")
	n.ip(t, "addr", "add", "10.9.0.100/24", "dev", "eth1")
	agree("VIP on the second uplink", "eth1")
	n.ip(t, "addr", "del", "10.9.0.100/24", "dev", "eth1")
	agree("VIP gone from the uplink", "")
}

// heldMetric reads vipproxy_vip_held for addr, waiting up to 20 s for the
// daemon to serve /metrics.
func heldMetric(t *testing.T, c *http.Client, addr string) bool {
	t.Helper()
	series := fmt.Sprintf("vipproxy_vip_held{address=%q} ", addr)
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := c.Get("http://vipproxy/metrics")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, line := range strings.Split(string(body), "\n") {
				if v, ok := strings.CutPrefix(line, series); ok {
					return v == "1"
				}
			}
			err = fmt.Errorf("no %s series in /metrics", strings.TrimSpace(series))
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
