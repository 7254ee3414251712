package doctor

import (
	"context"
	"fmt"
	"strings"

	"github.com/vipproxy/vipproxy/service/config"
)

// checkRouteLocalnet: a node-local VIP is an address of 127.0.0.0/8. Where
// route_localnet is 1 on an interface (kube-proxy sets it on every one to
// serve NodePorts on localhost), the kernel routes packets for 127/8 that
// arrive there, and a neighbour on that link reaches the apiservers
// through the VIP: the exposure of CVE-2020-8558. kube-proxy 1.18 and
// later add a firewall rule that drops such packets; without one, setting
// route_localnet back to 0 closes it. IPv6 has no such setting (::1 is
// never routed).
func checkRouteLocalnet(_ context.Context, h Host, cfg *config.Valid) Result {
	if cfg.VIP.Mode != config.ModeNodeLocal {
		return skip("vip.mode = %q: the VIP is no loopback address", cfg.VIP.Mode)
	}
	if !hasIPv4(cfg) {
		return skip("no IPv4 VIP: route_localnet is an IPv4 setting, and ::1 is never routed")
	}
	names, err := h.Sysctl.Names()
	if err != nil {
		return fail("run as root on the node", "%v", err)
	}
	var on []string
	for _, name := range names {
		if name == "lo" {
			continue
		}
		if v, err := h.Sysctl.Get(name, "route_localnet"); err == nil && v != 0 {
			on = append(on, "net.ipv4.conf."+name+".route_localnet")
		}
	}
	if len(on) == 0 {
		return pass("route_localnet is 0 on every interface: packets for the loopback VIP %s from other hosts are dropped", addrs(cfg))
	}
	return warn(fmt.Sprintf("sysctl -w %s=0, or make sure a firewall rule drops packets for 127.0.0.0/8 that do not come from lo (kube-proxy 1.18+ adds one in KUBE-FIREWALL)", on[0]),
		"%s is 1: a neighbour on that link can reach the loopback VIP %s and through it the apiservers (CVE-2020-8558), unless a firewall rule drops such packets", strings.Join(on, ", "), addrs(cfg))
}

func hasIPv4(cfg *config.Valid) bool {
	for _, a := range cfg.VIP.Addresses {
		if a.Is4() {
			return true
		}
	}
	return false
}
