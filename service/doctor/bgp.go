package doctor

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/vipproxy/vipproxy/service/announce"
	"github.com/vipproxy/vipproxy/service/config"
)

// checkBGP (vip.mode = "bgp"): BIRD runs the file `vipproxy bird` wrote,
// every peer's session is established, and the VIPs are exported to every
// peer exactly while the announce link holds them.
func checkBGP(ctx context.Context, h Host, cfg *config.Valid) Result {
	if !cfg.VIP.Mode.UsesBGP() {
		return skip("vip.mode = %q: no BGP on this node", cfg.VIP.Mode)
	}
	fix := h.Install.fixes()
	if h.Birdc == nil {
		return fail(fix.birdUnit, "birdc not found: BIRD announces the VIP in vip.mode = %q", cfg.VIP.Mode)
	}
	out, err := h.Birdc(ctx, "show", "protocols")
	if err != nil {
		return fail(fix.birdUnit, "BIRD does not answer birdc show protocols: %v: %s", err, strings.TrimSpace(out))
	}
	states := protocolInfo(out)
	var down []string
	for i := range cfg.BGP.Peers {
		name := cfg.BGP.PeerProtocol(i)
		info, ok := states[name]
		if !ok {
			return fail(fix.birdConf, "BIRD has no protocol %s: it does not read the file vipproxy bird writes", name)
		}
		if !strings.HasPrefix(info, "Established") {
			down = append(down, fmt.Sprintf("%s (%s): %s", name, cfg.BGP.Peers[i].Address, info))
		}
	}
	if len(down) > 0 {
		return fail("birdc show protocols all NAME says the last error; check the peer's address, AS and password on both sides, and that TCP 179 passes",
			"BGP session not established: %s", strings.Join(down, "; "))
	}
	return checkAnnounced(ctx, h, cfg)
}

// checkAnnounced: the link holds the VIPs while the proxy is ready, and
// BIRD then exports them to every peer.
func checkAnnounced(ctx context.Context, h Host, cfg *config.Valid) Result {
	fix := h.Install.fixes()
	on, err := announce.Announced(cfg.BGP.Interface, cfg.VIP.Addresses)
	switch {
	case err != nil:
		return fail(fix.announceUnit, "%v", err)
	case !on && daemonReady(ctx, h):
		return fail(fix.announceUnit, "the proxy is ready but %s does not hold the VIPs: nothing announces them (vipproxy-announce.service holds that link)", cfg.BGP.Interface)
	case !on:
		return warn("see the daemon check: the announcement follows the proxy's readiness",
			"the VIPs are not announced: this node's proxy is not ready (the sessions are established)")
	}
	var missing []string
	for i, p := range cfg.BGP.Peers {
		table := "vipproxy4"
		if !p.Address.Is4() {
			table = "vipproxy6"
		}
		out, err := h.Birdc(ctx, "show", "route", "table", table, "export", cfg.BGP.PeerProtocol(i))
		for _, vip := range cfg.VIP.Addresses {
			prefix := netip.PrefixFrom(vip, vip.BitLen()).String()
			if vip.Is4() == p.Address.Is4() && (err != nil || !strings.Contains(out, prefix)) {
				missing = append(missing, prefix+" to "+cfg.BGP.PeerProtocol(i))
			}
		}
	}
	if len(missing) > 0 {
		return fail("BIRD needs its `protocol device` (it learns the link through it): birdc show route table vipproxy4 all; birdc show interfaces",
			"%s holds the VIPs but BIRD does not export %s", cfg.BGP.Interface, strings.Join(missing, ", "))
	}
	return pass("VIPs %v announced on %s and exported to %d peer(s), every session established", cfg.VIP.Addresses, cfg.BGP.Interface, len(cfg.BGP.Peers))
}

// daemonReady asks the daemon's /readyz; unknown counts as not ready.
func daemonReady(ctx context.Context, h Host) bool {
	if h.Daemon == nil {
		return false
	}
	_, code, err := h.Daemon(ctx, "/readyz")
	return err == nil && code == 200
}

// protocolInfo reads `birdc show protocols`: each protocol's Info column
// ("Established", "Active  Socket: Connection refused"), by name.
func protocolInfo(out string) map[string]string {
	states := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		// Name Proto Table State Since(1-2 fields) Info...
		if len(f) < 5 || f[0] == "Name" {
			continue
		}
		info := ""
		if len(f) > 5 {
			info = strings.Join(f[5:], " ")
			if strings.Contains(f[5], ":") && len(f) > 6 { // a "since" of date and time
				info = strings.Join(f[6:], " ")
			}
		}
		states[f[0]] = info
	}
	return states
}
