package daemon_test

import (
	"strings"
	"testing"
)

// A bgp-mode node exports vipproxy_bgp_announced (0 here: no announce
// link, which only vipproxy announce creates; 1 is shown in
// vm-tests/bgp.py) and no vipproxy_vip_held series: every ready node holds
// the VIP on its announce link, and the alert on a VIP held twice would
// fire on every one. A vrrp-mode node exports no vipproxy_bgp_announced.
func TestBGPModeMetrics(t *testing.T) {
	a := backend(t, "a")
	s := newSettings(t, a.Addr())
	s.Mode = "bgp"
	s.Extra = "\n[bgp]\nlocal_as = 65001\nrouter_id = \"192.0.2.11\"\ninterface = \"vpbgptest0\"\npeers = [{address = \"192.0.2.1\", as = 65000}]\n"
	p := startVIPProxy(t, s, nil)
	p.waitState("b0", "up")
	m, err := p.get("/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m, "\nvipproxy_bgp_announced 0\n") || strings.Contains(m, "vipproxy_vip_held{") {
		t.Errorf("bgp-mode metrics: want vipproxy_bgp_announced 0 and no vipproxy_vip_held series:\n%s", grepLines(m, "vipproxy_bgp_announced", "vipproxy_vip_held"))
	}

	v := startVIPProxy(t, newSettings(t, a.Addr()), nil)
	v.waitState("b0", "up")
	if m, err := v.get("/metrics"); err != nil || strings.Contains(m, "\nvipproxy_bgp_announced ") {
		t.Errorf("vrrp-mode metrics: %v; want no vipproxy_bgp_announced series:\n%s", err, grepLines(m, "vipproxy_bgp_announced"))
	}
}

// grepLines returns the lines of text that contain any of words.
func grepLines(text string, words ...string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		for _, w := range words {
			if strings.Contains(l, w) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
