package doctor

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/vipproxy/vipproxy/service/config"
	"github.com/vipproxy/vipproxy/service/netcfg"
)

// arpWait is how long the VIP check listens for ARP answers: three probes
// over it; a node answers within milliseconds.
const arpWait = 1500 * time.Millisecond

const (
	noHolderFix = "keepalived must run on the control-plane nodes with vipproxy's instance and its track script (`vipproxy probe`) pass on one of them: " +
		"systemctl status keepalived; journalctl -u keepalived; `vipproxy doctor` on each node names why its daemon is not ready"
	listenerFix = "systemctl status vipproxy.socket (it listens on every VIP and port); vipproxy doctor --only vip-port"
)

// checkVIPAnswers: the VIP answers on some node. This node holds it
// (keepalived put it on an uplink) and its ports answer here; or another
// node answers ARP for it on the VRRP interface. Nobody answering is the
// outage doctor exists for; two answering is a split brain or ARP flux.
//
// A VIP no node holds may be VRRP electing a master: keepalived just
// (re)started (the quick start runs doctor right then) takes it only after
// the master-down interval, so doctor asks again until then before it
// says no node holds it.
func checkVIPAnswers(ctx context.Context, h Host, cfg *config.Valid) []Result {
	if h.Netlink == nil {
		return []Result{skip("no netlink here")}
	}
	deadline := time.Now().Add(masterDownInterval(cfg.Keepalived.AdvertInt))
	for {
		out, electing, err := vipAnswersOnce(ctx, h, cfg)
		if err != nil {
			return []Result{fail("run as root on the node", "%v", err)}
		}
		if !electing || time.Now().After(deadline) {
			return out
		}
		select {
		case <-ctx.Done():
			return out
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// masterDownInterval bounds VRRP's election (RFC 5798): a backup takes
// over after 3 x advert_int plus a skew under one second.
func masterDownInterval(advertInt int) time.Duration {
	return time.Duration(3*advertInt+1) * time.Second
}

// vipAnswersOnce is one look at every VIP; electing reports a VIP that no
// node holds (yet).
func vipAnswersOnce(ctx context.Context, h Host, cfg *config.Valid) (out []Result, electing bool, err error) {
	held, err := netcfg.HeldVIPs(h.Netlink, cfg.Network.Interface, cfg.VIP.Addresses)
	if err != nil {
		return nil, false, err
	}
	for _, vip := range cfg.VIP.Addresses {
		switch {
		case held[vip] != "" || vip.IsLoopback() || !cfg.VIP.Mode.UsesKeepalived():
			out = append(out, vipServesHere(ctx, h, cfg, vip, held[vip]))
		default:
			r, nobody := vipHolder(ctx, cfg, vip, h.Install.fixes().twoHolders)
			out = append(out, r)
			electing = electing || nobody
		}
	}
	return out, electing, nil
}

// vipServesHere dials every port the VIP serves on vip, from this node,
// which holds it on link (netcfg.HeldVIPs).
func vipServesHere(ctx context.Context, h Host, cfg *config.Valid, vip netip.Addr, link string) Result {
	where := "held by this node on " + link + " (the VRRP master)"
	switch {
	case cfg.VIP.Mode.UsesBGP():
		where = "on this node's dummy link (vip.mode bgp: every ready node serves it, BGP routes clients to them)"
	case !cfg.VIP.Mode.UsesKeepalived():
		where = fmt.Sprintf("this node's own (vip.mode %s: no node holds it for others)", cfg.VIP.Mode)
	case vip.IsLoopback():
		where = "on loopback: this node's own"
	}
	var ports, bad []string
	for _, p := range cfg.ServedPorts() {
		addr := netip.AddrPortFrom(vip, p.Port).String()
		ports = append(ports, fmt.Sprint(p.Port))
		d := net.Dialer{Timeout: max(h.DialTimeout, time.Second)}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", addr, err))
			continue
		}
		c.Close()
	}
	if len(bad) > 0 {
		return fail(listenerFix, "VIP %s is %s but does not answer: %s", vip, where, strings.Join(bad, "; "))
	}
	return pass("VIP %s is %s and answers on port %s", vip, where, strings.Join(ports, ", "))
}

// vipHolder asks on the VRRP interface which node holds vip: by ARP for
// IPv4, by neighbour discovery for IPv6.
// twoHoldersFix is worded for how vipproxy was installed (Install.fixes).
// nobody reports that no node answered.
func vipHolder(ctx context.Context, cfg *config.Valid, vip netip.Addr, twoHoldersFix string) (r Result, nobody bool) {
	iface := cfg.Keepalived.Interface
	probe, how := arpProbe, "ARP"
	if vip.Is6() {
		probe, how = ndProbe, "neighbour discovery"
	}
	macs, err := probe(ctx, iface, vip, arpWait)
	switch {
	case err != nil:
		return skip("VIP %s: not held by this node; cannot ask on %s who holds it: %v", vip, iface, err), false
	case len(macs) == 0:
		return fail(noHolderFix, "no node answers %s for VIP %s on %s: no node holds it (no VRRP master), so nothing reaches the apiservers through it", how, vip, iface), true
	case len(macs) > 1:
		return fail(twoHoldersFix, "%d nodes answer %s for VIP %s on %s (%s): VRRP split brain or ARP flux; connections break as answers flip", len(macs), how, vip, iface, strings.Join(macs, ", ")), false
	}
	return pass("VIP %s is held by another node: %s answers %s for it on %s", vip, macs[0], how, iface), false
}
