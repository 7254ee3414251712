package doctor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/vipproxy/vipproxy/service/config"
	"github.com/vipproxy/vipproxy/service/discovery"
	"github.com/vipproxy/vipproxy/service/keepalived"
	"github.com/vipproxy/vipproxy/service/listen"
	"github.com/vipproxy/vipproxy/service/netcfg"
	"github.com/vipproxy/vipproxy/service/portowner"
	"github.com/vipproxy/vipproxy/service/units"
)

// checkVIPPort: each port the VIP serves is free or held by vipproxy
// alone; whoever else listens on one is named (a local apiserver on
// *:6443, most often).
func checkVIPPort(_ context.Context, h Host, cfg *config.Valid) Result {
	var details []string
	for _, p := range cfg.ServedPorts() {
		r := checkOneVIPPort(h, cfg, p)
		if r.Status == Fail {
			return r
		}
		details = append(details, r.Detail)
	}
	return pass("%s", strings.Join(details, "; "))
}

func checkOneVIPPort(h Host, cfg *config.Valid, p config.Port) Result {
	port := p.Port
	which := "" // the one-port form says it as it always did
	if len(cfg.Ports) > 0 {
		which = fmt.Sprintf(" (port %s)", p.Name)
	}
	ls, err := portowner.Listeners(h.Proc, port)
	if err != nil {
		return fail("run as root on the node", "cannot read the listeners on port %d%s: %v", port, which, err)
	}
	cs := portowner.Conflicts(ls, cfg.VIP.Addresses)
	if len(cs) > 0 && !cfg.VIP.ReusePort {
		return fail(portowner.Fix(cs[0]), "port %d is held by %s: vipproxy cannot listen on the VIP%s", port, names(cs), which)
	}
	if len(cs) > 0 {
		// Shared only where the holder set SO_REUSEPORT as the same user,
		// which /proc does not show: the bind says.
		if err := listen.CanBind(cfg.VIP, port); err != nil {
			return fail(portowner.ShareFix, "port %d is held by %s and vip.reuse_port cannot share it (%v): vipproxy cannot listen on the VIP%s", port, names(cs), err, which)
		}
	}
	var ours, others []portowner.Listener
	for _, l := range ls {
		if portowner.Ours(l) {
			ours = append(ours, l)
		} else {
			others = append(others, l)
		}
	}
	detail := fmt.Sprintf("port %d%s free on the VIP", port, which)
	if len(ours) > 0 {
		detail = fmt.Sprintf("port %d%s held by vipproxy: %s", port, which, names(ours))
	}
	if len(cs) > 0 {
		detail += "; shared (vip.reuse_port, SO_REUSEPORT) with " + names(cs)
		others = slices.DeleteFunc(others, func(l portowner.Listener) bool { return slices.Contains(cs, l) })
	}
	if len(others) > 0 {
		detail += "; also listening on other addresses: " + names(others)
	}
	return pass("%s", detail)
}

func names(ls []portowner.Listener) string {
	s := make([]string, 0, len(ls))
	for _, l := range ls {
		s = append(s, l.String())
	}
	return strings.Join(s, ", ")
}

func checkVIPLink(_ context.Context, h Host, cfg *config.Valid) Result {
	if h.Netlink == nil {
		return skip("no netlink here")
	}
	if !cfg.VIP.Mode.UsesVIPLink() {
		return checkLoopbackVIP(h, cfg)
	}
	if p := netcfg.VerifyLink(h.Netlink, cfg); len(p) > 0 {
		return fail(h.Install.fixes().network, "%s", strings.Join(p, "; "))
	}
	return pass("%s up with %s", cfg.Network.Interface, addrs(cfg))
}

func addrs(cfg *config.Valid) string {
	s := make([]string, 0, len(cfg.VIP.Addresses))
	for _, a := range cfg.VIP.Addresses {
		s = append(s, a.String())
	}
	return strings.Join(s, ", ")
}

// checkLoopbackVIP is vip-link for a node-local VIP: lo holds it and no
// dummy link or drop-in of a vrrp setup is left.
func checkLoopbackVIP(h Host, cfg *config.Valid) Result {
	if left := netcfg.Leftovers(h.Netlink, cfg, h.Root); len(left) > 0 {
		return fail(netcfg.LeftoversFix, "vip.mode = %q, but a vrrp setup left %s", cfg.VIP.Mode, strings.Join(left, ", "))
	}
	if p := netcfg.VerifyNodeLocal(h.Netlink, cfg, h.Root); len(p) > 0 {
		return fail("ip link set lo up (and IPv6 on lo for an IPv6 VIP)", "%s", strings.Join(p, "; "))
	}
	return pass("node-local: lo holds %s; no dummy link", addrs(cfg))
}

func checkARP(_ context.Context, h Host, cfg *config.Valid) Result {
	if !cfg.VIP.Mode.UsesVIPLink() {
		return skip("vip.mode = %q: no ARP sysctls (the VIP never leaves this node)", cfg.VIP.Mode)
	}
	p := netcfg.VerifyARP(h.Sysctl, cfg)
	if len(p) == 0 {
		return pass("arp_ignore=1 arp_announce=2 on %s; all/default arp_ignore untouched (0)", strings.Join(cfg.Network.Uplinks, ", "))
	}
	return fail(h.Install.fixes().arp, "%s", strings.Join(p, "; "))
}

// checkDropIns: the networkd, sysctl and socket drop-ins on disk are what
// the config renders today. On NixOS the module writes those files in its
// own form: there the socket's listeners, as systemd reports them, are
// compared instead (the link and the sysctls have their own checks).
func checkDropIns(ctx context.Context, h Host, cfg *config.Valid) Result {
	if h.Install.NixOS {
		return checkNixOSSocket(ctx, h, cfg)
	}
	nodeLocal := !cfg.VIP.Mode.UsesVIPLink()
	if left := netcfg.Leftovers(nil, cfg, h.Root); nodeLocal && len(left) > 0 {
		return fail(netcfg.LeftoversFix, "vip.mode = %q sets up no host network, but these are there: %s", cfg.VIP.Mode, strings.Join(left, ", "))
	}
	for _, sock := range units.Sockets(cfg, h.Root) {
		if !same(sock.Path, sock.Data) {
			return fail(h.Install.fixes().socket, "%s missing or not what the config renders", sock.Path)
		}
	}
	if stale := units.Stale(cfg, h.Root); len(stale) > 0 {
		return fail(h.Install.fixes().socket, "socket drop-ins of ports the config no longer has: %s (units write removes them)", strings.Join(stale, ", "))
	}
	if nodeLocal {
		return pass("socket drop-in current; no networkd or sysctl drop-in (vip.mode = %q)", cfg.VIP.Mode)
	}
	var stale []string
	for _, f := range netcfg.Render(cfg, h.Root).List() {
		if !same(f.Path, f.Data) {
			stale = append(stale, f.Path)
		}
	}
	if len(stale) > 0 {
		return fail(h.Install.fixes().network, "missing or not what the config renders: %s", strings.Join(stale, ", "))
	}
	return pass("networkd, sysctl and socket drop-ins current")
}

// checkNixOSSocket: each port's socket unit (vipproxy.socket for the
// first, vipproxy-port@NAME.socket for the others) listens on every VIP at
// its port and nothing else.
func checkNixOSSocket(ctx context.Context, h Host, cfg *config.Valid) Result {
	if h.Systemctl == nil {
		return skip("NixOS: the units and networkd files come from the system configuration; no systemd here to ask what vipproxy.socket listens on")
	}
	var listens []string
	for i, p := range cfg.ServedPorts() {
		unit := units.SocketUnit(cfg, i)
		want := units.ListenAddresses(cfg, p)
		have := systemdListens(ctx, h, unit)
		slices.Sort(want)
		slices.Sort(have)
		if !slices.Equal(want, have) {
			return fail(h.Install.fixes().socket, "%s (port %s) listens on [%s], the config asks for [%s]",
				unit, p.Name, strings.Join(have, " "), strings.Join(want, " "))
		}
		listens = append(listens, strings.Join(have, " "))
	}
	return pass("NixOS: units and networkd files from the system configuration (%s); the sockets listen on %s",
		h.Install.SocketUnit, strings.Join(listens, "; "))
}

func same(path string, want []byte) bool {
	have, err := os.ReadFile(path)
	return err == nil && bytes.Equal(have, want)
}

// checkKeepalived: keepalived runs, reads vipproxy's instance with the
// probe as track script, and nothing in its config cuts or splits the VIP
// (an IPVS virtual_server, another instance holding it, strict mode). The
// file is the one the running keepalived reads (Install.KeepalivedConf),
// read once, with that keepalived's config id.
func checkKeepalived(ctx context.Context, h Host, cfg *config.Valid) Result {
	if !cfg.VIP.Mode.UsesKeepalived() {
		return skip("vip.mode = %q: no keepalived on this node", cfg.VIP.Mode)
	}
	conf, fix := h.Install.KeepalivedConf, h.Install.fixes()
	info, err := os.Stat(conf)
	if errors.Is(err, fs.ErrNotExist) || err == nil && info.Size() == 0 {
		return fail(fix.keepalivedConf, "%s is missing or empty (found as %s): keepalived does not start", conf, h.Install.KeepalivedFrom)
	}
	k, err := keepalived.Read(conf, h.Install.KeepalivedConfigID)
	if err != nil { // unreadable: vipproxy's instance cannot be seen there
		return fail(fix.trackProbe, "%v", err)
	}
	if err := k.CheckTracksProbe(cfg); err != nil {
		return fail(fix.trackProbe, "%v", err)
	}
	if err := k.CheckVirtualServers(cfg); err != nil {
		return fail(fix.virtualServer, "%v", err)
	}
	if err := k.CheckOtherHolders(cfg); err != nil {
		return fail(fix.otherInstance, "%v", err)
	}
	if err := k.CheckStrict(cfg); err != nil {
		return fail(fix.strict, "%v", err)
	}
	if h.Systemctl == nil {
		return pass("%s tracks %s_probe (keepalived's unit not checked: no systemd)", conf, cfg.Keepalived.Instance)
	}
	if out, err := h.Systemctl(ctx, "is-active", "keepalived.service"); err != nil {
		return fail(fix.keepalivedUnit, "keepalived.service is %s", strings.TrimSpace(out))
	}
	return pass("keepalived.service active; %s (%s) tracks %s_probe; no virtual_server, other instance or strict mode for the VIP", conf, h.Install.KeepalivedFrom, cfg.Keepalived.Instance)
}

// checkDiscovery lists the kubernetes EndpointSlices once with discovery's
// credentials, through the backends as the daemon does: a refused
// certificate or missing RBAC shows here, not only in the daemon's log.
func checkDiscovery(ctx context.Context, h Host, cfg *config.Valid) Result {
	d := withSources(ctx, h, cfg).Discovery
	if !d.Enable {
		return skip("discovery.enable is false")
	}
	var seeds []string
	for _, b := range cfg.Backends {
		seeds = append(seeds, b.Address)
	}
	creds := discovery.Credentials{Kubeconfig: d.Kubeconfig, CAFile: d.CAFile, CertFile: d.CertFile,
		KeyFile: d.KeyFile, TokenFile: d.TokenFile, ServerName: d.ServerName}
	eps, server, err := discovery.ListOnce(ctx, creds, seeds, h.DialTimeout)
	if err != nil {
		return fail(discovery.Fix(err), "listing the kubernetes EndpointSlices failed: %v", err)
	}
	return pass("%s lists %d ready apiserver(s): %v", server, len(eps), eps)
}
