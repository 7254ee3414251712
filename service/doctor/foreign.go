package doctor

import (
	"context"
	"strings"

	"github.com/vipproxy/vipproxy/service/config"
	"github.com/vipproxy/vipproxy/service/netcfg"
)

// checkNetworkdForeign: where the operator's own systemd-networkd manages
// links, it does not delete the rules and routes others made (a CNI's,
// BIRD's) the next time it configures a link (`network apply`'s reload,
// its own restart): ManageForeign* at no, or the config accepts it.
func checkNetworkdForeign(_ context.Context, h Host, cfg *config.Valid) Result {
	if h.Netlink == nil {
		return skip("no netlink here")
	}
	if !cfg.VIP.Mode.UsesVIPLink() {
		return skip("vip.mode = %q: vipproxy uses no networkd", cfg.VIP.Mode)
	}
	f, err := netcfg.FindForeign(h.Netlink, cfg, h.Root)
	if err != nil {
		return fail("run as root on the node", "cannot tell what systemd-networkd would delete: %v", err)
	}
	risk, fix := f.AtRisk(), netcfg.ForeignFix
	if h.Install.NixOS {
		fix = nixosForeignFix
	}
	switch {
	case len(f.Networks) == 0:
		return pass("systemd-networkd manages vipproxy's link alone (no other .network file): apply's networkd.conf.d drop-in keeps it off other rules and routes")
	case len(risk) > 0 && !cfg.Network.AllowForeignCleanup:
		return fail(fix, "systemd-networkd manages this node's own links (%s) with ManageForeignRoutingPolicyRules=/ManageForeignRoutes= at yes: "+
			"the next time it configures a link (vipproxy-network's start, networkctl reload) it deletes %s", strings.Join(f.Networks, ", "), strings.Join(risk, "; "))
	case cfg.Network.AllowForeignCleanup:
		return pass("network.allow_foreign_cleanup = true: systemd-networkd may delete the rules and routes it did not make (now: %d)", len(risk))
	case f.Policy.Rules || f.Policy.Routes:
		return warn(fix, "systemd-networkd manages this node's own links (%s) with ManageForeignRoutingPolicyRules=/ManageForeignRoutes= at yes: "+
			"no rule or route it did not make is there now, but a CNI's or routing daemon's added later go the next time it configures a link", strings.Join(f.Networks, ", "))
	}
	return pass("systemd-networkd manages this node's own links (%s) and leaves other rules and routes alone (%s)", strings.Join(f.Networks, ", "), strings.Join(f.Policy.Files, ", "))
}

// nixosForeignFix is the fix where the NixOS module wrote the networkd
// files: networkd.conf is declared in the system configuration.
const nixosForeignFix = "systemd.network.config.networkConfig = { ManageForeignRoutingPolicyRules = false; ManageForeignRoutes = false; }; " +
	"nixos-rebuild switch, then systemctl restart systemd-networkd (it reads networkd.conf at start only); " +
	"or, to let networkd delete them, settings.network.allow_foreign_cleanup = true"
